#include "optim/optimizer.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/serialize.h"

namespace xg::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(0) {
  std::set<const void*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined()) throw std::invalid_argument("optimizer: parameter " + std::to_string(i) + " is undefined");
    if (!p.is_leaf() || !p.requires_grad())
      throw std::invalid_argument("optimizer: parameter " + std::to_string(i) + " " + shape_str(p.shape()) +
                                  " is not a leaf that requires grad");
    if (!seen.insert(p.impl().get()).second)
      throw std::invalid_argument("optimizer: parameter " + std::to_string(i) + " appears twice");
  }
  state_.resize(params_.size());
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw std::invalid_argument("optimizer: learning rate must be finite and >= 0, got " + std::to_string(lr));
  lr_ = lr;
}

void Optimizer::step() {
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    update(params_[i], g, state_[i]);
    params_[i].bump_version();  // an op that saved the old values must not run backward on the new ones
  }
  check_graph_growth();
}

// A graph that survives every step and keeps growing is almost always a
// running total kept with its history (`running = running + loss` before
// backward()): the record() guard only sees it once backward has freed a graph
// it reaches. Warn once, after 20 steps of growth in a row.
void Optimizer::check_graph_growth() {
  const int64_t live = live_nodes();
  growth_streak_ = last_live_nodes_ >= 0 && live > last_live_nodes_ ? growth_streak_ + 1 : 0;
  last_live_nodes_ = live;
  if (growth_streak_ < kLeakSteps || warned_leak_) return;
  warned_leak_ = true;
  std::fprintf(stderr,
               "xgrad warning: %lld autograd graph nodes are alive after optimiser step %lld, more after each of the "
               "last %d steps. A tensor that depends on every step's loss is being kept with its history (for "
               "example running = running + loss): accumulate loss.item() or loss.detach() instead.\n",
               static_cast<long long>(live), static_cast<long long>(steps_), kLeakSteps);
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

Tensor& Optimizer::buffer(std::map<std::string, Tensor>& state, const std::string& key, const Tensor& param) {
  auto it = state.find(key);
  if (it == state.end()) it = state.emplace(key, zeros(param.shape(), param.dtype())).first;
  return it->second;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [k, v] : state_[i]) out[std::to_string(i) + "." + k] = v;
  out["step"] = scalar(static_cast<double>(steps_), f64);
  out["lr"] = scalar(lr_, f64);
  out["num_params"] = scalar(static_cast<double>(params_.size()), f64);
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto need = [&](const std::string& key) -> const Tensor& {
    auto it = state.find(key);
    if (it == state.end()) throw std::invalid_argument(std::string(name()) + " state: missing key '" + key + "'");
    return it->second;
  };
  const int64_t n = static_cast<int64_t>(need("num_params").item());
  if (n != static_cast<int64_t>(params_.size()))
    throw std::invalid_argument(std::string(name()) + " state: saved for " + std::to_string(n) +
                                " parameters, this optimizer has " + std::to_string(params_.size()));
  std::vector<std::map<std::string, Tensor>> fresh(params_.size());
  const auto names = state_names();
  for (const auto& [key, t] : state) {
    if (key == "step" || key == "lr" || key == "num_params") continue;
    auto dot = key.find('.');
    size_t idx = 0;
    std::string buf;
    bool ok = dot != std::string::npos;
    if (ok) {
      try {
        size_t used = 0;
        idx = std::stoul(key.substr(0, dot), &used);
        ok = used == dot && idx < params_.size();
      } catch (const std::exception&) {
        ok = false;
      }
      buf = key.substr(dot + 1);
      bool known = false;
      for (const auto& nm : names) known = known || nm == buf;
      ok = ok && known;
    }
    if (!ok) throw std::invalid_argument(std::string(name()) + " state: unexpected key '" + key + "'");
    const Tensor& p = params_[idx];
    if (t.shape() != p.shape() || t.dtype() != p.dtype())
      throw std::invalid_argument(std::string(name()) + " state: '" + key + "' is " + shape_str(t.shape()) + " " +
                                  dtype_name(t.dtype()) + ", parameter " + std::to_string(idx) + " is " +
                                  shape_str(p.shape()) + " " + dtype_name(p.dtype()));
    fresh[idx][buf] = t.clone().detach();
  }
  // A parameter has either all of its buffers or none (never stepped).
  for (size_t i = 0; i < fresh.size(); ++i)
    if (!fresh[i].empty())
      for (const auto& nm : names)
        if (!fresh[i].count(nm))
          throw std::invalid_argument(std::string(name()) + " state: missing key '" + std::to_string(i) + "." + nm + "'");
  state_ = std::move(fresh);
  steps_ = static_cast<int64_t>(need("step").item());
  set_lr(need("lr").item());
}

void Optimizer::save(const std::string& path) const { save_tensors(path, state_dict()); }
void Optimizer::load(const std::string& path) { load_state_dict(load_tensors(path)); }

}  // namespace xg::optim
