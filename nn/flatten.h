// Flatten: consecutive dimensions merged into one, as torch.nn.Flatten.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "nn/module.h"

namespace xg::nn {

// xg::flatten as a layer: (N, C, H, W) -> (N, C H W) with the defaults.
class Flatten : public Module {
 public:
  // Dimensions start_dim..end_dim (negative: from the end), checked by forward.
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override;  // dimensions start..end merged into one
  std::string type_name() const override;   // "Flatten(start=1, end=-1)"

 private:
  int64_t start_, end_;
};

// xg::unflatten as a layer, as torch.nn.Unflatten: dimension `dim` split
// into `sizes` (one of them may be -1).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes) : dim_(dim), sizes_(std::move(sizes)) {}  // checked by forward
  Tensor forward(const Tensor& x) override;  // unflatten(x, dim, sizes)
  std::string type_name() const override;   // "Unflatten(dim=1, unflattened_size=(2,3))"

 private:
  int64_t dim_;
  Shape sizes_;
};

}  // namespace xg::nn
