#include "optim/sgd.h"

#include <cmath>

#include <stdexcept>

namespace xg::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : SGD(one_group(std::move(params)), o) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions o) : Optimizer(std::move(groups), o.lr), o_(o) {
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum))
    throw std::invalid_argument("SGD: momentum must be finite and >= 0, got " + std::to_string(o.momentum));
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    throw std::invalid_argument("SGD: weight_decay must be finite and >= 0, got " + std::to_string(o.weight_decay));
  if (!(o.dampening >= 0 && o.dampening <= 1))
    throw std::invalid_argument("SGD: dampening must be in [0, 1], got " + std::to_string(o.dampening));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw std::invalid_argument("SGD: nesterov needs momentum > 0 and dampening 0");
}

std::vector<std::string> SGD::state_names() const {
  return o_.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
}

void SGD::update(Tensor& p, const Tensor& grad, std::map<std::string, Tensor>& state) {
  const bool first = o_.momentum != 0 && !state.count("momentum_buffer");
  Tensor* buf = o_.momentum != 0 ? &buffer(state, "momentum_buffer", p) : nullptr;
  auto run = [&](auto z) {
    using T = decltype(z);
    T* w = p.data<T>();
    const T* g = grad.data<T>();
    T* b = buf ? buf->data<T>() : nullptr;
    const double lr = group_lr(), wd = group_weight_decay(o_.weight_decay);
    for (int64_t i = 0, n = p.numel(); i < n; ++i) {
      double d = g[i] + wd * w[i];
      if (b) {
        b[i] = first ? T(d) : T(o_.momentum * b[i] + (1 - o_.dampening) * d);
        d = o_.nesterov ? d + o_.momentum * b[i] : b[i];
      }
      w[i] = T(w[i] - lr * d);
    }
  };
  if (p.dtype() == f32) run(float{});
  else run(double{});
}

}  // namespace xg::optim
