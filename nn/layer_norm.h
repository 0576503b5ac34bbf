// LayerNorm over the last dimension: (..., C) -> (..., C).
#pragma once

#include "nn/module.h"

namespace xg::nn {

// xg::layer_norm as a module, with a learned gain and bias by default.
class LayerNorm : public Module {
 public:
  // weight (C) ones and bias (C) zeros if elementwise_affine.
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;  // (..., C) -> (..., C); C != dim throws ShapeError
  // norm(x + residual) in one pass (add_layer_norm), for post-norm blocks;
  // residual must have x's shape.
  Tensor forward(const Tensor& x, const Tensor& residual);
  std::string type_name() const override;  // "LayerNorm(dim=..)"
  Tensor& weight() { return weight_; }  // undefined without affine
  Tensor& bias() { return bias_; }      // undefined without affine

 private:
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace xg::nn
