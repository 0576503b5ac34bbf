// The caching allocator behind every tensor's storage. A training step frees
// and allocates the same sizes step after step; handing freed memory to the
// next request avoids the page faults and zero-filling of fresh memory (glibc
// maps every request above its mmap threshold anew and unmaps it on free:
// ~700 page faults per 1M-float temporary).
//
// Large requests (256 KiB and more) are carved out of segments mapped from
// the system, as in PyTorch's CUDA caching allocator: a request takes the
// smallest free block that holds it (best fit), splitting off the rest when
// that is at least 64 KiB; a freed block merges with its free neighbours. So
// the memory the gradients free at zero_grad() can hold the next forward's
// activations, whatever their sizes. Small requests keep exact-size free lists
// over aligned_alloc.
//
// The cache (free bytes held) never exceeds twice the most bytes ever handed
// out at once, nor its limit: past that, wholly free segments go back to the
// system, least recently freed first, and small blocks are freed. Twice, not
// once: after a differently shaped pass (an evaluation between training
// steps) the free spans can be cut so that one request of each step no
// longer fits; with the bound at the high-water mark the segment mapped for
// it went back to the system at the end of every step, and the character
// model's step stayed slower for the rest of training (bench/results/README.md,
// "character LM, 30 minutes, xgrad bf16 and PyTorch bf16").
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <unordered_map>
#include <vector>

#include "autograd/detail/impl.h"

namespace xg {

namespace {

constexpr size_t kAlign = 64;          // a cache line, and what AVX-512 loads prefer
constexpr size_t kLarge = 256 << 10;   // from segments at and above this
constexpr size_t kMinSplit = 64 << 10; // a remainder smaller than this stays with the block

struct Segment;
struct Span {  // a block of a segment, free or handed out
  Segment* seg;
  size_t offset, size;
  bool free = false;
  Span *prev = nullptr, *next = nullptr;  // neighbours in address order
  uint64_t freed_at = 0;
  char* ptr() const;
};
struct Segment {
  char* base;
  size_t size;
};
char* Span::ptr() const { return seg->base + offset; }

struct BySize {
  bool operator()(const Span* a, const Span* b) const {
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr()) < reinterpret_cast<uintptr_t>(b->ptr());
  }
};

struct Cache {
  std::mutex m;
  std::set<Span*, BySize> free_spans;
  std::unordered_map<size_t, std::vector<void*>> small;  // size -> free small blocks
  int64_t cached = 0;  // free bytes held
  int64_t limit = int64_t{4} << 30;
  int64_t high_water = 0, out = 0;  // most bytes / bytes handed out
  int64_t hits = 0, misses = 0;
  uint64_t clock = 0;

  void hand_out(int64_t bytes) {
    out += bytes;
    high_water = std::max(high_water, out);
  }
};

Cache& cache() {
  static Cache* c = [] {
    auto* made = new Cache;  // never destroyed: tensors may outlive static destructors
    // XG_CACHE_LIMIT_MB: the cache limit from the environment (0 turns caching off).
    if (const char* v = std::getenv("XG_CACHE_LIMIT_MB")) {
      char* end = nullptr;
      const long long mb = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && mb >= 0 && mb < (1LL << 40)) made->limit = mb << 20;
    }
    return made;
  }();
  return *c;
}

size_t round_size(size_t bytes) {
  if (bytes == 0) return kAlign;
  const size_t unit = bytes < kLarge ? kAlign : 4096;
  return (bytes + unit - 1) / unit * unit;
}

// What to give back to the system once the lock is released.
struct Garbage {
  std::vector<Segment*> segments;
  std::vector<void*> small;
  void release() {
    for (Segment* s : segments) {
      munmap(s->base, s->size);
      delete s;
    }
    for (void* p : small) std::free(p);
  }
};

// Unmaps wholly free segments (least recently freed first), then small
// blocks, until the cache holds at most `bound` bytes. Lock held.
void trim(Cache& c, int64_t bound, Garbage& g) {
  if (c.cached <= bound) return;
  std::vector<Span*> whole;
  for (Span* s : c.free_spans)
    if (!s->prev && !s->next) whole.push_back(s);
  std::sort(whole.begin(), whole.end(), [](Span* a, Span* b) { return a->freed_at < b->freed_at; });
  for (Span* s : whole) {
    if (c.cached <= bound) return;
    c.free_spans.erase(s);
    c.cached -= static_cast<int64_t>(s->size);
    g.segments.push_back(s->seg);
    delete s;
  }
  for (auto& [size, list] : c.small)
    while (c.cached > bound && !list.empty()) {
      g.small.push_back(list.back());
      list.pop_back();
      c.cached -= static_cast<int64_t>(size);
    }
}

// get() (null on failure), retried once after emptying the cache, whose
// blocks may be what stands in the way; std::bad_alloc if it fails again.
template <class Get>
void* from_system(Get get) {
  void* p = get();
  if (!p) {
    empty_cache();
    p = get();
    if (!p) throw std::bad_alloc();
  }
  return p;
}

Block alloc_large(Cache& c, size_t size) {
  {
    std::lock_guard<std::mutex> lk(c.m);
    Span key{nullptr, 0, size};
    Segment probe{nullptr, 0};
    key.seg = &probe;  // ptr() = offset 0 of a null base: sorts before any real span of this size
    auto it = c.free_spans.lower_bound(&key);
    if (it != c.free_spans.end()) {
      Span* s = *it;
      c.free_spans.erase(it);
      c.cached -= static_cast<int64_t>(s->size);
      if (s->size - size >= kMinSplit) {  // the rest becomes a free span of its own
        auto* rest = new Span{s->seg, s->offset + size, s->size - size};
        rest->free = true;
        rest->freed_at = s->freed_at;
        rest->prev = s;
        rest->next = s->next;
        if (s->next) s->next->prev = rest;
        s->next = rest;
        s->size = size;
        c.free_spans.insert(rest);
        c.cached += static_cast<int64_t>(rest->size);
      }
      s->free = false;
      ++c.hits;
      c.hand_out(static_cast<int64_t>(s->size));
      return {s->ptr(), s->size, s};
    }
    ++c.misses;
  }
  void* p = from_system([size] {
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? nullptr : m;
  });
  auto* seg = new Segment{static_cast<char*>(p), size};
  auto* s = new Span{seg, 0, size};
  std::lock_guard<std::mutex> lk(c.m);
  c.hand_out(static_cast<int64_t>(size));
  return {p, size, s};
}

void free_large(Cache& c, Span* s) {
  Garbage g;
  {
    std::lock_guard<std::mutex> lk(c.m);
    c.out -= static_cast<int64_t>(s->size);
    s->free = true;
    s->freed_at = ++c.clock;
    // Merge with free neighbours.
    for (Span* n : {s->prev, s->next}) {
      if (!n || !n->free) continue;
      c.free_spans.erase(n);
      c.cached -= static_cast<int64_t>(n->size);
      if (n == s->prev) {
        s->offset = n->offset;
        s->prev = n->prev;
        if (n->prev) n->prev->next = s;
      } else {
        s->next = n->next;
        if (n->next) n->next->prev = s;
      }
      s->size += n->size;
      delete n;
    }
    c.free_spans.insert(s);
    c.cached += static_cast<int64_t>(s->size);
    trim(c, std::min(c.limit, 2 * c.high_water), g);
  }
  g.release();
}

}  // namespace

Block storage_alloc(size_t bytes) {
  const size_t size = round_size(bytes);
  Cache& c = cache();
  if (size >= kLarge) return alloc_large(c, size);
  {
    std::lock_guard<std::mutex> lk(c.m);
    auto it = c.small.find(size);
    if (it != c.small.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= static_cast<int64_t>(size);
      ++c.hits;
      c.hand_out(static_cast<int64_t>(size));
      return {p, size, nullptr};
    }
    ++c.misses;
  }
  void* p = from_system([size] { return std::aligned_alloc(kAlign, size); });
  std::lock_guard<std::mutex> lk(c.m);
  c.hand_out(static_cast<int64_t>(size));
  return {p, size, nullptr};
}

void storage_free(Block b) {
  if (!b.ptr) return;
  Cache& c = cache();
  if (b.span) return free_large(c, static_cast<Span*>(b.span));
  Garbage g;
  {
    std::lock_guard<std::mutex> lk(c.m);
    c.out -= static_cast<int64_t>(b.bytes);
    c.small[b.bytes].push_back(b.ptr);
    c.cached += static_cast<int64_t>(b.bytes);
    trim(c, std::min(c.limit, 2 * c.high_water), g);
  }
  g.release();
}

void empty_cache() {
  Garbage g;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    trim(c, 0, g);
  }
  g.release();
}

void set_cache_limit(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("set_cache_limit: need 0 or more bytes, got " + std::to_string(bytes));
  Garbage g;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    c.limit = bytes;
    trim(c, bytes, g);
  }
  g.release();
}

CacheCounters cache_counters() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lk(c.m);
  return {c.cached, c.limit, c.hits, c.misses};
}

}  // namespace xg
