// Linear: y = x Wᵀ + b, x (..., in) -> (..., out).
#pragma once

#include "nn/module.h"

namespace xg::nn {

// A dense layer (xg::linear), as torch.nn.Linear.
class Linear : public Module {
 public:
  // weight (out, in), bias (out); both U(-1/sqrt(in), 1/sqrt(in)) as PyTorch.
  Linear(int64_t in, int64_t out, Generator& gen, bool bias = true);
  Linear(int64_t in, int64_t out, bool bias = true) : Linear(in, out, default_generator(), bias) {}  // from it
  Tensor forward(const Tensor& x) override;  // (..., in) -> (..., out)
  std::string type_name() const override;   // "Linear(in=4, out=3)"

  int64_t in_features() const { return in_; }    // in, the input width
  int64_t out_features() const { return out_; }  // out, the output width
  // (out, in), the parameter "weight" itself: assigning another module's
  // parameter to it ties the two (lm_head->weight() = wte->weight(), as
  // nanoGPT does), one tensor under both names.
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return bias_ ? *bias_ : no_bias_; }  // (out), the parameter "bias"; undefined without bias

 private:
  int64_t in_, out_;
  Tensor no_bias_;  // undefined: what bias() is without a bias
  Tensor* weight_;  // the registered entries, so that an assignment re-registers
  Tensor* bias_ = nullptr;  // null without a bias (a pointer to no_bias_ would not survive a move)
};

}  // namespace xg::nn
