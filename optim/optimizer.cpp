#include "optim/optimizer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>
#include <stdexcept>

#include "autograd/autograd.h"
#include "autograd/serialize.h"

namespace xg::optim {

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  std::vector<ParamGroup> g(1);
  g[0].params = std::move(params);
  return g;
}

std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params,
                                            double weight_decay, const std::vector<std::string>& no_decay) {
  std::vector<ParamGroup> g(2);
  g[0].weight_decay = weight_decay;
  g[1].weight_decay = 0.0;
  for (const auto& [name, p] : named_params) {
    bool decay = p.dim() >= 2;
    for (const std::string& part : no_decay) decay = decay && name.find(part) == std::string::npos;
    g[decay ? 0 : 1].params.push_back(p);
  }
  return g;
}

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : Optimizer(one_group(std::move(params)), lr) {}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)), lr_(0) {
  for (size_t k = 0; k < groups_.size(); ++k) {
    const ParamGroup& g = groups_[k];
    if (!(g.lr_scale >= 0) || !std::isfinite(g.lr_scale))
      throw std::invalid_argument("optimizer: group " + std::to_string(k) + ": lr_scale " + std::to_string(g.lr_scale) +
                                  ": expected a finite number >= 0");
    if (g.weight_decay && (!(*g.weight_decay >= 0) || !std::isfinite(*g.weight_decay)))
      throw std::invalid_argument("optimizer: group " + std::to_string(k) + ": weight_decay " +
                                  std::to_string(*g.weight_decay) + ": expected a finite number >= 0");
    for (const Tensor& p : g.params) {
      params_.push_back(p);
      group_of_.push_back(k);
    }
  }
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
  std::vector<size_t> updated;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    current_group_ = group_of_[i];
    update(params_[i], g, state_[i]);
    updated.push_back(i);
  }
  finish_step();
  // An op that saved the old values must not run backward on the new ones.
  for (size_t i : updated) params_[i].bump_version();
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

namespace {

// Shortest text that reads back as v: "nan", "-inf", "0.5", "1e+30".
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A parameter index as state_dict writes it: decimal digits, no sign, no
// leading zero, no space, so that "01.exp_avg" or " 1.exp_avg" cannot stand
// for "1.exp_avg" (and be overwritten by it, or overwrite it). -1 if not.
int64_t param_index(const std::string& s) {
  if (s.empty() || s.size() > 18 || (s.size() > 1 && s[0] == '0')) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// state[key], which must be there and hold one value.
double state_value(const char* who, const std::map<std::string, Tensor>& state, const std::string& key) {
  auto it = state.find(key);
  if (it == state.end()) throw std::invalid_argument(std::string(who) + " state: missing key '" + key + "'");
  const Tensor& t = it->second;
  if (!t.defined() || t.numel() != 1)
    throw std::invalid_argument(
        std::string(who) + " state: '" + key + "' must hold one value, not " +
        (t.defined() ? "a tensor of shape " + shape_str(t.shape()) : std::string("an undefined tensor")));
  return t.item();
}

// An integer kept in state as float64 (as PyTorch does): a whole number that
// a double holds exactly, checked before the conversion (casting NaN, Inf or
// a value beyond int64 is undefined behaviour).
int64_t state_int(const char* who, const std::map<std::string, Tensor>& state, const std::string& key) {
  const double v = state_value(who, state, key);
  if (!(v >= 0 && v <= 9007199254740992.0 && v == std::floor(v)))
    throw std::invalid_argument(std::string(who) + " state: '" + key + "' is " + number_text(v) +
                                ", expected a whole number from 0 to 9007199254740992 (2^53)");
  return static_cast<int64_t>(v);
}

}  // namespace

Optimizer::CheckedState Optimizer::check_state(const std::map<std::string, Tensor>& state) const {
  const int64_t n = state_int(name(), state, "num_params");
  if (n != static_cast<int64_t>(params_.size()))
    throw std::invalid_argument(std::string(name()) + " state: saved for " + std::to_string(n) +
                                " parameters, this optimizer has " + std::to_string(params_.size()));
  const int64_t steps = state_int(name(), state, "step");
  const double lr = state_value(name(), state, "lr");
  if (!(lr >= 0) || !std::isfinite(lr))
    throw std::invalid_argument(std::string(name()) + " state: 'lr' is " + number_text(lr) +
                                ", expected a finite value >= 0");
  std::vector<std::map<std::string, Tensor>> fresh(params_.size());
  const auto names = state_names();
  for (const auto& [key, t] : state) {
    if (key == "step" || key == "lr" || key == "num_params") continue;
    const auto dot = key.find('.');
    const int64_t idx = dot == std::string::npos ? -1 : param_index(key.substr(0, dot));
    const std::string buf = dot == std::string::npos ? "" : key.substr(dot + 1);
    bool known = false;
    for (const auto& nm : names) known = known || nm == buf;
    if (idx < 0 || idx >= static_cast<int64_t>(params_.size()) || !known)
      throw std::invalid_argument(std::string(name()) + " state: unexpected key '" + key + "'");
    const Tensor& p = params_[static_cast<size_t>(idx)];
    if (!t.defined() || t.shape() != p.shape() || t.dtype() != p.dtype())
      throw std::invalid_argument(std::string(name()) + " state: '" + key + "' is " +
                                  (t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "undefined") +
                                  ", parameter " + std::to_string(idx) + " is " + shape_str(p.shape()) + " " +
                                  dtype_name(p.dtype()));
    fresh[static_cast<size_t>(idx)][buf] = t;
  }
  // A parameter has either all of its buffers or none (never stepped).
  for (size_t i = 0; i < fresh.size(); ++i)
    if (!fresh[i].empty())
      for (const auto& nm : names)
        if (!fresh[i].count(nm))
          throw std::invalid_argument(std::string(name()) + " state: missing key '" + std::to_string(i) + "." + nm +
                                      "'");
  return {std::move(fresh), steps, lr};
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  CheckedState c = check_state(state);
  for (auto& buffers : c.buffers)
    for (auto& [k, t] : buffers) t = t.clone().detach();
  // Everything checked: only now does anything change.
  state_ = std::move(c.buffers);
  steps_ = c.steps;
  set_lr(c.lr);
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& buffers : state_)
    for (const auto& [k, t] : buffers) bytes += t.numel() * dtype_size(t.dtype());
  return bytes;
}

void Optimizer::save(const std::string& path) const { save_tensors(path, state_dict()); }
void Optimizer::load(const std::string& path) { load_state_dict(load_tensors(path)); }

}  // namespace xg::optim
