// Flatten: consecutive dimensions merged into one, as torch.nn.Flatten.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace xg::nn
