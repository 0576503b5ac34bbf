#pragma once
#include "optim/optimizer.h"

namespace xg::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// PyTorch's SGD: g += wd p; buf = momentum buf + (1 - dampening) g (buf = g on
// the first step); g = nesterov ? g + momentum buf : buf; p -= lr g.
class SGD : public Optimizer {
 public:
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
