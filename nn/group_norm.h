// Group normalisation, as torch.nn.GroupNorm.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace xg::nn {

// torch.nn.GroupNorm: x (N,C,...) with C in `groups` groups, each (n,
// group) normalised on its own, in training and evaluation alike.
class GroupNorm : public Module {
 public:
  // Throws std::invalid_argument unless groups divides channels and eps > 0.
  GroupNorm(int64_t groups, int64_t channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;  // the shape is unchanged
  std::string type_name() const override;   // "GroupNorm(8, 64, eps=1e-05)"
  Tensor& weight() { return weight_; }       // (C) ones; undefined without affine
  Tensor& bias() { return bias_; }           // (C) zeros; undefined without affine

 private:
  int64_t groups_, channels_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace xg::nn
