#include "optim/adam.h"

#include <cmath>
#include <stdexcept>

#include "autograd/parallel.h"

namespace xg::optim {

namespace {
void check(const AdamOptions& o, const char* who) {
  auto bad = [&](const char* what, double v) {
    throw std::invalid_argument(std::string(who) + ": invalid " + what + " " + std::to_string(v));
  };
  if (!(o.lr >= 0 && std::isfinite(o.lr))) bad("lr (need a finite value >= 0)", o.lr);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) bad("beta1 (need [0, 1))", o.beta1);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) bad("beta2 (need [0, 1))", o.beta2);
  if (!(o.eps >= 0 && std::isfinite(o.eps))) bad("eps (need a finite value >= 0)", o.eps);
  if (!(o.weight_decay >= 0 && std::isfinite(o.weight_decay)))
    bad("weight_decay (need a finite value >= 0)", o.weight_decay);
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Optimizer(std::move(params), o.lr), o_(o) { check(o, "Adam"); }

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o) : Optimizer(std::move(groups), o.lr), o_(o) {
  check(o, "Adam");
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions o) : Adam(std::move(params), o) { decoupled_ = true; }
AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions o) : Adam(std::move(groups), o) { decoupled_ = true; }

void Adam::update(Tensor& p, const Tensor& grad, std::map<std::string, Tensor>& state) {
  Tensor& m = buffer(state, "exp_avg", p);
  Tensor& v = buffer(state, "exp_avg_sq", p);
  // Bias corrections use this optimiser's step count (set by Optimizer::step before update).
  const double t = static_cast<double>(steps());
  const double bc1 = 1 - std::pow(o_.beta1, t), bc2 = 1 - std::pow(o_.beta2, t);
  const double lr = group_lr(), b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps, wd = group_weight_decay(o_.weight_decay);
  const double step_size = lr / bc1, inv_sqrt_bc2 = 1 / std::sqrt(bc2);
  // In the parameter's precision, branch-free in the loop so that it vectorises.
  auto run = [&](auto z) {
    using T = decltype(z);
    const T tb1 = T(b1), tb2 = T(b2), c1 = T(1 - b1), c2 = T(1 - b2), teps = T(eps), ts = T(step_size),
            tsq = T(inv_sqrt_bc2);
    const T l2 = decoupled_ ? T(0) : T(wd), shrink = decoupled_ ? T(1 - lr * wd) : T(1);
    T* pw0 = p.data<T>();
    const T* pg0 = grad.data<T>();
    T *pm0 = m.data<T>(), *pv0 = v.data<T>();
    parallel_for(p.numel(), 16, [=](int64_t begin, int64_t end) {
      // Locals, not the closure's members: a store through `w` could alias
      // those, which keeps the loop from vectorising.
      const T b1_ = tb1, b2_ = tb2, c1_ = c1, c2_ = c2, eps_ = teps, s_ = ts, sq_ = tsq, l2_ = l2, shrink_ = shrink;
      T* __restrict w = pw0 + begin;
      const T* __restrict g = pg0 + begin;
      T* __restrict pm = pm0 + begin;
      T* __restrict pv = pv0 + begin;
      for (int64_t i = 0; i < end - begin; ++i) {
        const T gi = g[i] + l2_ * w[i];
        const T mi = b1_ * pm[i] + c1_ * gi;
        const T vi = b2_ * pv[i] + c2_ * gi * gi;
        pm[i] = mi;
        pv[i] = vi;
        w[i] = w[i] * shrink_ - s_ * mi / (std::sqrt(vi) * sq_ + eps_);
      }
    });
  };
  if (p.dtype() == f32) run(float{});
  else run(double{});
}

}  // namespace xg::optim
