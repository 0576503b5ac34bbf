// Private to engine/'s oneDNN build: what its matmul (engine/onednn.cpp) and
// convolution (engine/onednn_conv.cpp) primitives share. One CPU engine; per
// thread one stream and one scratchpad (a thread runs one primitive at a
// time, so all of its primitives can share it); primitives cached per thread
// by a key compared bytewise; one count of primitives created.
#pragma once

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

namespace xg::engine::onednn {

dnnl::engine& cpu();
dnnl::stream& thread_stream();
// This thread's scratchpad, grown to at least `bytes` (never shrunk).
char* thread_scratchpad(size_t bytes);
size_t thread_scratchpad_size();
// Primitives created since start-up, by every thread.
std::atomic<int64_t>& created();

// oneDNN reads OpenMP's thread count when it creates and runs a primitive:
// held at 1 for the call, and restored, so a program's own OpenMP is untouched.
struct OneOmpThread {
  int before = omp_get_max_threads();
  OneOmpThread() {
    if (before != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (before != 1) omp_set_num_threads(before);
  }
};

// Hash and equality over a key's bytes: keys are zero-initialised (padding
// included) plain structs.
template <class Key>
struct BytesHash {
  size_t operator()(const Key& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};
template <class Key>
struct BytesEqual {
  bool operator()(const Key& a, const Key& b) const { return std::memcmp(&a, &b, sizeof(Key)) == 0; }
};

constexpr size_t kMaxCached = 512;  // decoding meets a new length every step

// A thread's primitives of one kind: make() builds an Entry for a key not
// seen yet (and is counted in created()); the cache empties itself past
// kMaxCached entries rather than grow without bound.
template <class Key, class Entry>
class Cache {
 public:
  template <class Make>
  Entry& get(const Key& key, Make&& make) {
    auto it = map_.find(key);
    if (it != map_.end()) return *it->second;
    if (map_.size() >= kMaxCached) map_.clear();
    auto e = std::make_unique<Entry>(make(key));
    ++created();
    return *map_.emplace(key, std::move(e)).first->second;
  }
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<Key, std::unique_ptr<Entry>, BytesHash<Key>, BytesEqual<Key>> map_;
};

// The number of primitives in the calling thread's convolution cache.
size_t conv_cached();

}  // namespace xg::engine::onednn
