#include "optim/adam.h"

#include <algorithm>
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

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Adam(std::move(params), o) { decoupled_ = true; }
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions o) : Adam(std::move(groups), o) { decoupled_ = true; }

void Adam::update(Tensor& p, const Tensor& grad, std::map<std::string, Tensor>& state) {
  Tensor& m = buffer(state, "exp_avg", p);
  Tensor& v = buffer(state, "exp_avg_sq", p);
  // Bias corrections use this optimiser's step count (set by Optimizer::step before update).
  const double t = static_cast<double>(steps());
  const double bc1 = 1 - std::pow(o_.beta1, t), bc2 = 1 - std::pow(o_.beta2, t);
  const double lr = group_lr(), wd = group_weight_decay(o_.weight_decay);
  Pending u{p, grad, m, v, {}};
  u.c = {o_.beta1, o_.beta2, 1 - o_.beta1, 1 - o_.beta2, o_.eps, lr / bc1, 1 / std::sqrt(bc2),
         decoupled_ ? 0 : wd, decoupled_ ? 1 - lr * wd : 1};
  pending_.push_back(std::move(u));
}

// Elements [i0, i1) of one parameter, in its precision, branch-free so that
// the loop vectorises.
template <class T>
void Adam::run(Pending& u, int64_t i0, int64_t i1) {
  // Locals, not the struct's members: a store through `w` could alias
  // those, which keeps the loop from vectorising.
  const T b1 = T(u.c.b1), b2 = T(u.c.b2), c1 = T(u.c.c1), c2 = T(u.c.c2), eps = T(u.c.eps), s = T(u.c.step_size),
          sq = T(u.c.inv_sqrt_bc2), l2 = T(u.c.l2), shrink = T(u.c.shrink);
  T* __restrict w = u.p.data<T>() + i0;
  const T* __restrict g = u.g.data<T>() + i0;
  T* __restrict pm = u.m.data<T>() + i0;
  T* __restrict pv = u.v.data<T>() + i0;
  for (int64_t i = 0; i < i1 - i0; ++i) {
    const T gi = g[i] + l2 * w[i];
    const T mi = b1 * pm[i] + c1 * gi;
    const T vi = b2 * pv[i] + c2 * gi * gi;
    pm[i] = mi;
    pv[i] = vi;
    w[i] = w[i] * shrink - s * mi / (std::sqrt(vi) * sq + eps);
  }
}

// Every queued parameter in one pass over the thread pool: the elements of
// all of them, end to end, split into one range per thread (a parameter too
// small to be worth a split of its own still shares the threads).
void Adam::finish_step() {
  std::vector<Pending> work;
  work.swap(pending_);  // nothing stays queued for the next step, even if this one throws
  std::vector<int64_t> start(work.size() + 1, 0);
  for (size_t k = 0; k < work.size(); ++k) start[k + 1] = start[k] + work[k].p.numel();
  parallel_for(start.back(), 16, [&](int64_t begin, int64_t end) {
    size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), begin) - start.begin()) - 1;
    for (; k < work.size() && start[k] < end; ++k) {
      const int64_t i0 = std::max(begin, start[k]) - start[k], i1 = std::min(end, start[k + 1]) - start[k];
      if (i0 >= i1) continue;
      if (work[k].p.dtype() == f32) run<float>(work[k], i0, i1);
      else run<double>(work[k], i0, i1);
    }
  });
}

}  // namespace xg::optim
