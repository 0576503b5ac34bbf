// The caching allocator behind every tensor's storage. A training step frees
// and allocates the same sizes step after step; handing a freed block to the
// next request of its size class avoids the page faults and zero-filling of a
// fresh mapping (glibc maps every request above its mmap threshold anew).
// Size classes: 64-byte multiples up to 4 KiB, then four classes per power
// of two (at most 25% of a block unused). Free blocks wait in one list per
// class, up to the cache limit; empty_cache() returns them all to the system.
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "autograd/detail/impl.h"

namespace xg {

namespace {

constexpr size_t kAlign = 64;  // a cache line, and what AVX-512 loads prefer

size_t size_class(size_t bytes) {
  if (bytes <= 4096) return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  int top = 63 - __builtin_clzll(bytes);   // 2^top <= bytes < 2^(top+1)
  const size_t quarter = size_t{1} << (top - 2);
  return (bytes + quarter - 1) / quarter * quarter;
}

struct Cache {
  std::mutex m;
  std::unordered_map<size_t, std::vector<void*>> free;  // size class -> free blocks
  int64_t cached = 0;      // bytes in free blocks
  int64_t limit = int64_t{4} << 30;
  int64_t hits = 0, misses = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destructors
  return *c;
}

}  // namespace

Block storage_alloc(size_t bytes) {
  const size_t cls = size_class(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lk(c.m);
    auto it = c.free.find(cls);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= static_cast<int64_t>(cls);
      ++c.hits;
      return {p, cls};
    }
    ++c.misses;
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p) {
    empty_cache();  // the cached blocks may be what stands in the way
    p = std::aligned_alloc(kAlign, cls);
    if (!p) throw std::bad_alloc();
  }
  return {p, cls};
}

void storage_free(Block b) {
  if (!b.ptr) return;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lk(c.m);
    if (c.cached + static_cast<int64_t>(b.bytes) <= c.limit) {
      c.free[b.bytes].push_back(b.ptr);
      c.cached += static_cast<int64_t>(b.bytes);
      return;
    }
  }
  std::free(b.ptr);
}

void empty_cache() {
  std::unordered_map<size_t, std::vector<void*>> blocks;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    blocks.swap(c.free);
    c.cached = 0;
  }
  for (auto& [cls, list] : blocks)
    for (void* p : list) std::free(p);
}

void set_cache_limit(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("set_cache_limit: need 0 or more bytes, got " + std::to_string(bytes));
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lk(c.m);
    c.limit = bytes;
    if (c.cached <= c.limit) return;
  }
  empty_cache();
}

CacheCounters cache_counters() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lk(c.m);
  return {c.cached, c.limit, c.hits, c.misses};
}

}  // namespace xg
