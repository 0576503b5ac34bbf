// Adam and AdamW, as PyTorch's (optim::Optimizer subclasses).
#pragma once
#include "optim/optimizer.h"

namespace xg::optim {

// Settings of Adam and AdamW, PyTorch's defaults (AdamW::defaults() adds its decay).
struct AdamOptions {
  double lr = 1e-3;         // learning rate (a schedule may set it each step)
  double beta1 = 0.9;       // decay of the first moment m, in [0, 1)
  double beta2 = 0.999;     // decay of the second moment v, in [0, 1)
  double eps = 1e-8;        // added to sqrt(v) in the denominator
  double weight_decay = 0;  // Adam: L2 on the gradient; AdamW: decoupled
};

// PyTorch's Adam: L2 weight decay added to the gradient, bias-corrected moments:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
class Adam : public Optimizer {
 public:
  // Parameters as Optimizer takes them; an option out of range (betas in
  // [0, 1), the rest finite and >= 0) throws std::invalid_argument naming it.
  Adam(std::vector<Tensor> params, AdamOptions o);
  Adam(std::vector<ParamGroup> groups, AdamOptions o);

 protected:
  // Queues the parameter's update (its buffers created on first use) ...
  void update(Tensor& p, const Tensor& g, std::map<std::string, Tensor>& state) override;
  // ... and runs all of them in one pass over the thread pool.
  void finish_step() override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  const char* name() const override { return "Adam"; }
  AdamOptions o_;           // the options given
  bool decoupled_ = false;  // AdamW's decay instead of Adam's L2

 private:
  // One parameter's update, queued by update() and run by finish_step().
  struct Pending {
    Tensor p, g, m, v;
    struct {
      double b1, b2, c1, c2, eps, step_size, inv_sqrt_bc2, l2, shrink;
    } c;
  };
  template <class T>
  static void run(Pending& u, int64_t i0, int64_t i1);  // elements [i0, i1) of one parameter
  std::vector<Pending> pending_;
};

// Settings of AdamW: Adam's, with PyTorch's AdamW default weight_decay 0.01.
// Built in PyTorch's positional order, AdamW(params, lr, betas, eps,
// weight_decay): AdamWOptions{1e-3} decays by 0.01 as torch.optim.AdamW(params, lr=1e-3).
struct AdamWOptions : AdamOptions {
  // lr, beta1, beta2, eps and weight_decay, PyTorch's defaults.
  AdamWOptions(double lr_ = 1e-3, double beta1_ = 0.9, double beta2_ = 0.999, double eps_ = 1e-8,
               double weight_decay_ = 0.01) {
    lr = lr_, beta1 = beta1_, beta2 = beta2_, eps = eps_, weight_decay = weight_decay_;
  }
  // Adam's settings as they are, its weight_decay included (0 unless set).
  explicit AdamWOptions(const AdamOptions& o) : AdamOptions(o) {}
};

// AdamW: decoupled decay, p -= lr * wd * p before the Adam update.
class AdamW : public Adam {
 public:
  // As Adam's constructors, with decoupled decay.
  AdamW(std::vector<Tensor> params, AdamWOptions o);
  AdamW(std::vector<ParamGroup> groups, AdamWOptions o);

 protected:
  const char* name() const override { return "AdamW"; }
};

}  // namespace xg::optim
