#pragma once
#include "optim/optimizer.h"

namespace xg::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

// PyTorch's Adam: L2 weight decay added to the gradient, bias-corrected moments:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions o);
  Adam(std::vector<ParamGroup> groups, AdamOptions o);

 protected:
  void update(Tensor& p, const Tensor& g, std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  const char* name() const override { return "Adam"; }
  AdamOptions o_;
  bool decoupled_ = false;
};

// AdamW: decoupled decay, p -= lr * wd * p before the Adam update (PyTorch's default wd 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions o);
  AdamW(std::vector<ParamGroup> groups, AdamOptions o);
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 0.01;
    return o;
  }

 protected:
  const char* name() const override { return "AdamW"; }
};

}  // namespace xg::optim
