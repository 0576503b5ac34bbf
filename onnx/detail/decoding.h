// What the exporters of decoding models (onnx/transformer.cpp, onnx/gpt.cpp)
// share: example inputs of the dynamic axes and the per-layer key/value
// caches as named graph inputs and outputs.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/attention.h"
#include "onnx/export.h"

namespace xg::onnx::detail {

// Example sizes of the dynamic axes: distinct and above 1, as export_model
// asks (a reshape tells axes apart by their sizes).
inline constexpr int64_t kB = 3, kS = 5, kL = 4;

inline Tensor example_ids(int64_t rows, int64_t cols, int64_t vocab, Generator& g) {
  std::vector<int64_t> v(static_cast<size_t>(rows * cols));
  for (auto& id : v) id = std::min(vocab - 1, static_cast<int64_t>(g.uniform() * static_cast<double>(vocab)));
  return from_ints(v, {rows, cols});
}

inline std::string indexed(const std::string& name, size_t i) { return name + "_" + std::to_string(i); }

// Per layer: past_k_i, past_v_i (B,L,C) as inputs, present_k_i, present_v_i as outputs.
inline void add_cache_io(size_t layers, int64_t width, Generator& g, std::vector<Input>& in, std::vector<std::string>& out) {
  for (size_t i = 0; i < layers; ++i)
    for (const char* kv : {"k", "v"}) {
      in.push_back({indexed(std::string("past_") + kv, i), randn({kB, kL, width}, g), {"B", "L", ""}});
      out.push_back(indexed(std::string("present_") + kv, i));
    }
}

// The caches of the inputs from `first` on: (k, v) pairs, each a whole cache.
inline std::vector<nn::KVCache> caches(const std::vector<Tensor>& in, size_t first, size_t layers) {
  std::vector<nn::KVCache> c;
  for (size_t i = 0; i < layers; ++i) {
    const Tensor &k = in[first + 2 * i], &v = in[first + 2 * i + 1];
    c.push_back({k, v, k.size(1), 0});
  }
  return c;
}

inline void append_caches(std::vector<Tensor>& out, const std::vector<nn::KVCache>& c) {
  for (const auto& kv : c) {
    out.push_back(kv.k);
    out.push_back(kv.v);
  }
}

}  // namespace xg::onnx::detail
