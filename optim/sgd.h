// SGD with momentum, dampening, weight decay and Nesterov, as PyTorch's.
#pragma once
#include "optim/optimizer.h"

namespace xg::optim {

// Settings of SGD, named as in its update rule.
struct SGDOptions {
  double lr = 0.01;         // learning rate (a schedule may set it each step)
  double momentum = 0;      // 0: no momentum buffer
  double dampening = 0;     // in [0, 1]
  double weight_decay = 0;  // wd, L2 added to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening 0
};

// PyTorch's SGD: g += wd p; buf = momentum buf + (1 - dampening) g (buf = g on
// the first step); g = nesterov ? g + momentum buf : buf; p -= lr g.
class SGD : public Optimizer {
 public:
  // Parameters as Optimizer takes them; options out of range throw
  // std::invalid_argument.
  SGD(std::vector<Tensor> params, SGDOptions o);
  SGD(std::vector<ParamGroup> groups, SGDOptions o);

 protected:
  void update(Tensor& p, const Tensor& g, std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_names() const override;
  const char* name() const override { return "SGD"; }

 private:
  SGDOptions o_;
};

}  // namespace xg::optim
