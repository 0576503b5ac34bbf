// Linear: y = x Wᵀ + b, x (..., in) -> (..., out).
#pragma once

#include "nn/module.h"

namespace xg::nn {

// A dense layer (xg::linear), as torch.nn.Linear.
class Linear : public Module {
 public:
  // weight (out, in), bias (out); both U(-1/sqrt(in), 1/sqrt(in)) as PyTorch.
  Linear(int64_t in, int64_t out, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (..., in) -> (..., out)
  std::string type_name() const override;   // "Linear(in=4, out=3)"

  int64_t in_features() const { return in_; }    // in, the input width
  int64_t out_features() const { return out_; }  // out, the output width
  Tensor& weight() { return weight_; }           // (out, in)
  Tensor& bias() { return bias_; }  // undefined without bias

 private:
  int64_t in_, out_;
  Tensor weight_, bias_;
};

}  // namespace xg::nn
