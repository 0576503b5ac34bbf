// The caching allocator behind every tensor's storage. A training step frees
// and allocates the same sizes step after step; handing a freed block to the
// next request that fits it avoids the page faults and zero-filling of fresh
// memory (glibc maps every request above its mmap threshold anew, and unmaps
// it on free: ~700 page faults per 1M-float temporary).
//
// Sizes are rounded to 64 bytes (below 64 KiB) or to pages. A request takes
// the smallest free block that is at least as large and at most 1/8 larger
// (best fit, no splitting). Free blocks are kept while the cache holds no more
// than the most tensor bytes ever alive at once (and the cache limit): a
// training step then reuses its own blocks, and a run whose sizes keep
// changing (decoding longer and longer sequences) returns the least recently
// freed blocks to the system instead of piling them up.
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>

#include "autograd/detail/impl.h"

namespace xg {

namespace {

constexpr size_t kAlign = 64;  // a cache line, and what AVX-512 loads prefer

size_t round_size(size_t bytes) {
  if (bytes == 0) return kAlign;
  const size_t unit = bytes < (64 << 10) ? kAlign : 4096;
  return (bytes + unit - 1) / unit * unit;
}

struct Cache {
  std::mutex m;
  std::list<Block> lru;  // free blocks, least recently freed first
  std::multimap<size_t, std::list<Block>::iterator> by_size;
  int64_t cached = 0;  // bytes in free blocks
  int64_t limit = int64_t{4} << 30;
  int64_t high_water = 0;  // most bytes handed out at once
  int64_t out = 0;         // bytes handed out now
  int64_t hits = 0, misses = 0;

  void take(std::multimap<size_t, std::list<Block>::iterator>::iterator it) {
    cached -= static_cast<int64_t>(it->first);
    lru.erase(it->second);
    by_size.erase(it);
  }
  // Drops the least recently freed blocks until `cached` fits `bound`; returns them.
  std::list<Block> trim(int64_t bound) {
    std::list<Block> gone;
    while (cached > bound && !lru.empty()) {
      const Block b = lru.front();
      auto range = by_size.equal_range(b.bytes);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == lru.begin()) {
          take(it);
          break;
        }
      gone.push_back(b);
    }
    return gone;
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destructors
  return *c;
}

void release(const std::list<Block>& blocks) {
  for (const Block& b : blocks) std::free(b.ptr);
}

}  // namespace

Block storage_alloc(size_t bytes) {
  const size_t size = round_size(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lk(c.m);
    auto it = c.by_size.lower_bound(size);
    if (it != c.by_size.end() && it->first <= size + size / 8) {
      const Block b{it->second->ptr, it->first};
      c.take(it);
      ++c.hits;
      c.out += static_cast<int64_t>(b.bytes);
      c.high_water = std::max(c.high_water, c.out);
      return b;
    }
    ++c.misses;
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (!p) {
    empty_cache();  // the cached blocks may be what stands in the way
    p = std::aligned_alloc(kAlign, size);
    if (!p) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lk(c.m);
  c.out += static_cast<int64_t>(size);
  c.high_water = std::max(c.high_water, c.out);
  return {p, size};
}

void storage_free(Block b) {
  if (!b.ptr) return;
  Cache& c = cache();
  std::list<Block> gone;
  {
    std::lock_guard<std::mutex> lk(c.m);
    c.out -= static_cast<int64_t>(b.bytes);
    const int64_t bound = std::min(c.limit, c.high_water);
    if (static_cast<int64_t>(b.bytes) > bound) {
      gone.push_back(b);
    } else {
      c.lru.push_back(b);
      c.by_size.emplace(b.bytes, std::prev(c.lru.end()));
      c.cached += static_cast<int64_t>(b.bytes);
      gone = c.trim(bound);
    }
  }
  release(gone);
}

void empty_cache() {
  std::list<Block> gone;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    gone.swap(c.lru);
    c.by_size.clear();
    c.cached = 0;
  }
  release(gone);
}

void set_cache_limit(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("set_cache_limit: need 0 or more bytes, got " + std::to_string(bytes));
  std::list<Block> gone;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    c.limit = bytes;
    gone = c.trim(bytes);
  }
  release(gone);
}

CacheCounters cache_counters() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lk(c.m);
  return {c.cached, c.limit, c.hits, c.misses};
}

}  // namespace xg
