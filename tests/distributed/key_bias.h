// The key projection's bias, which the data-parallel comparisons leave out.
#pragma once

#include <cstddef>
#include <string>

namespace xgt {

// True for element j of the n of parameter `name` when it is a key
// projection's bias: w_k.bias (nn::MultiHeadAttention), or the middle third
// of a packed in_proj_bias (nn::MultiheadAttention). It adds q.b to every
// score of a query: softmax ignores it, so its gradient is exactly zero in
// exact arithmetic and only rounding noise in floating point. Adam normalises
// that noise into steps of up to lr, so two summation orders of one batch
// (one process, or two) move those biases apart by up to lr per step.
inline bool is_key_bias(const std::string& name, size_t j, size_t n) {
  auto ends = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends("w_k.bias") || (ends("in_proj_bias") && j >= n / 3 && j < 2 * n / 3);
}

}  // namespace xgt
