// xg::optim::Optimizer: parameters, per-parameter state, and that state on disk.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg::optim {

class Optimizer {
 public:
  // Leaves that require a gradient; the same tensor twice is an error.
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (no tape involved). Warns
  // once on stderr if more autograd nodes are alive after each of 20 steps
  // in a row (a running loss kept with its history).
  void step();
  void zero_grad();  // drops every parameter's gradient
  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  const std::vector<Tensor>& params() const { return params_; }

  // "<index>.<name>" for per-parameter state, plus "step" and "lr" (0-d float64).
  std::map<std::string, Tensor> state_dict() const;
  // Checks counts, missing/unexpected keys, shapes and dtypes before changing
  // anything; throws std::invalid_argument naming the key. "num_params" and
  // "step" must be whole numbers from 0 to 2^53, "lr" finite and >= 0, and a
  // buffer's key "<index>.<name>" with the index as state_dict writes it.
  void load_state_dict(const std::map<std::string, Tensor>& state);
  void save(const std::string& path) const;  // atomic (save_tensors)
  void load(const std::string& path);

 protected:
  // Called once per parameter with a gradient. `state` holds this
  // parameter's buffers by name, created on first use with `buffer()`.
  virtual void update(Tensor& param, const Tensor& grad, std::map<std::string, Tensor>& state) = 0;
  // The names of the per-parameter buffers this optimiser keeps.
  virtual std::vector<std::string> state_names() const = 0;
  virtual const char* name() const = 0;
  // A zero buffer shaped like `param`, created once.
  Tensor& buffer(std::map<std::string, Tensor>& state, const std::string& key, const Tensor& param);

 private:
  static constexpr int kLeakSteps = 20;
  void check_graph_growth();  // warns once on stderr when the tape keeps growing across steps
  std::vector<Tensor> params_;
  std::vector<std::map<std::string, Tensor>> state_;
  double lr_;
  int64_t steps_ = 0;
  int64_t last_live_nodes_ = -1;  // tape nodes alive after the previous step
  int64_t growth_streak_ = 0;     // consecutive steps after which more nodes were alive
  bool warned_leak_ = false;
};

}  // namespace xg::optim
