// xg::optim::Optimizer: parameters, per-parameter state, and that state on disk.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace xg::optim {

// Parameters that share settings (PyTorch's param_groups). A group's learning
// rate is lr_scale times the optimiser's (the rate schedules set), and its
// weight decay, when given, replaces the optimiser's.
struct ParamGroup {
  std::vector<Tensor> params;          // leaves that require a gradient
  double lr_scale = 1.0;               // finite and >= 0
  std::optional<double> weight_decay;  // unset: the optimiser's; else finite and >= 0
};

// All of `params` in one group with the optimiser's settings.
std::vector<ParamGroup> one_group(std::vector<Tensor> params);

// The AdamW recipe (GPT-2, nanoGPT, BERT): weight decay on the matrices of
// linear layers, none on biases, norms' gains (every parameter of fewer than 2
// dimensions) and on embeddings (a name containing one of `no_decay`, such as
// "src_embed.weight", "pos.weight"). Two groups: decayed first.
std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params,
                                            double weight_decay,
                                            const std::vector<std::string>& no_decay = {"embed", "pos"});

// The base of every optimiser: holds the parameters, their groups and their
// state; a subclass implements update() for one parameter.
class Optimizer {
 public:
  // Leaves that require a gradient; the same tensor twice is an error.
  Optimizer(std::vector<Tensor> params, double lr);
  // The same with groups (the same tensor in two groups is an error too).
  // Parameters are numbered through the groups in order (state_dict keys).
  Optimizer(std::vector<ParamGroup> groups, double lr);

  virtual ~Optimizer() = default;
  // Not copyable: an optimiser owns its per-parameter state.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (no tape involved). Warns
  // once on stderr if more autograd nodes are alive after each of 20 steps
  // in a row (a running loss kept with its history).
  void step();
  void zero_grad();  // drops every parameter's gradient
  double lr() const { return lr_; }         // the learning rate (each group's: times its lr_scale)
  void set_lr(double lr);                   // finite and >= 0, else std::invalid_argument
  int64_t steps() const { return steps_; }  // step() calls so far (restored by load_state_dict)
  const std::vector<Tensor>& params() const { return params_; }      // every parameter, through the groups in order
  const std::vector<ParamGroup>& groups() const { return groups_; }  // as given to the constructor

  // INDEX.NAME ("0.exp_avg") for per-parameter state, plus "step", "lr" and
  // "num_params" (0-d float64).
  virtual std::map<std::string, Tensor> state_dict() const;
  // Checks counts, missing/unexpected keys, shapes and dtypes before changing
  // anything; throws std::invalid_argument naming the key. "num_params" and
  // "step" must be whole numbers from 0 to 2^53, "lr" finite and >= 0, and a
  // buffer's key INDEX.NAME with the index as state_dict writes it.
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);
  void save(const std::string& path) const;  // atomic (save_tensors)
  void load(const std::string& path);        // load_state_dict of the file (FormatError if malformed)
  // The names of the per-parameter buffers this optimiser keeps.
  virtual std::vector<std::string> state_names() const = 0;
  // Bytes of per-parameter state this process holds (Adam: two moments per
  // parameter it has stepped).
  virtual int64_t state_bytes() const;

 protected:
  // Called once per parameter with a gradient. `state` holds this
  // parameter's buffers by name, created on first use with `buffer()`.
  virtual void update(Tensor& param, const Tensor& grad, std::map<std::string, Tensor>& state) = 0;
  // Called once per step() after every update(): an optimiser whose update()
  // only queues its work runs it here, over all parameters at once.
  virtual void finish_step() {}
  virtual const char* name() const = 0;  // "Adam", "SGD", ...: names it in error messages
  // A zero buffer shaped like `param`, created once.
  Tensor& buffer(std::map<std::string, Tensor>& state, const std::string& key, const Tensor& param);
  // Inside update(): the learning rate and weight decay of the parameter's group.
  double group_lr() const { return lr_ * groups_[current_group_].lr_scale; }
  double group_weight_decay(double optimiser_default) const {
    return groups_[current_group_].weight_decay.value_or(optimiser_default);
  }
  // load_state_dict's checks, nothing changed and nothing copied: each
  // parameter's buffers by name (empty: never stepped), the step count and lr.
  struct CheckedState {
    std::vector<std::map<std::string, Tensor>> buffers;  // per parameter, by buffer name (the state's own tensors)
    int64_t steps = 0;                                   // "step"
    double lr = 0;                                       // "lr"
  };
  CheckedState check_state(const std::map<std::string, Tensor>& state) const;
  void set_steps(int64_t steps) { steps_ = steps; }  // a subclass that keeps its state elsewhere restores the count

 private:
  static constexpr int kLeakSteps = 20;
  void check_graph_growth();  // warns once on stderr when the tape keeps growing across steps
  std::vector<Tensor> params_;
  std::vector<ParamGroup> groups_;
  std::vector<size_t> group_of_;  // per parameter
  size_t current_group_ = 0;
  std::vector<std::map<std::string, Tensor>> state_;
  double lr_;
  int64_t steps_ = 0;
  int64_t last_live_nodes_ = -1;  // tape nodes alive after the previous step
  int64_t growth_streak_ = 0;     // consecutive steps after which more nodes were alive
  bool warned_leak_ = false;
};

}  // namespace xg::optim
