// Dropout: in training, zeros each element with probability p and scales the
// rest by 1/(1-p); in eval mode (or p == 0), the identity.
#pragma once

#include <memory>

#include "nn/module.h"

namespace xg::nn {

// Dropout as a module (xg::dropout while training).
class Dropout : public Module {
 public:
  // p in [0, 1), else std::invalid_argument. gen draws the masks; null:
  // default_generator().
  explicit Dropout(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);
  Tensor forward(const Tensor& x) override;  // xg::dropout in training; x itself in eval mode or when p == 0
  // forward(relu(x)), fused (xg::relu_dropout): one pass, one saved tensor.
  Tensor forward_relu(const Tensor& x);
  std::string type_name() const override;  // "Dropout(p=0.1)"
  double p() const { return p_; }  // the drop probability

 private:
  double p_;
  std::shared_ptr<Generator> gen_;
};

}  // namespace xg::nn
