// Sharded optimiser state (ZeRO stage 1, Rajbhandari et al. 2020), as
// PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer: every process
// holds the whole model and the whole (reduced) gradient, but the
// optimiser's state (Adam's two moments, twice the model in float32) only
// for its shard of the parameters. A step updates the shard, then every
// process receives the new values of the other shards from their owners.
//
//   xg::dist::DataParallel ddp(model);
//   xg::dist::ZeroRedundancyOptimizer opt(optim::one_group(model.parameters()), 1e-3,
//       [](std::vector<optim::ParamGroup> shard) {
//         return std::make_unique<optim::Adam>(std::move(shard), optim::AdamOptions{});
//       });
//   ... loss.backward(); ddp.wait(); opt.step();
//
// The shards are whole parameters, assigned largest first to the process
// with the fewest elements so far (PyTorch's greedy partition), the same on
// every process. Each parameter's update is the one the unsharded optimiser
// makes (the same elementwise arithmetic), so the weights equal an
// unsharded run's bit for bit.
//
// state_dict() gathers the whole state in the unsharded optimiser's layout
// (INDEX.NAME over all parameters, "step", "lr", "num_params") on every
// process, and load_state_dict() takes such a state and keeps its shard: a
// checkpoint resumes at any process count, or without sharding. Both are
// collectives: every process calls them at the same point. So are the
// inherited save(path) (every process writes the same file: call it on every
// process, or write consolidate_state_dict(0) from rank 0) and load(path).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace xg::dist {

// An optimiser whose per-parameter state is split over the processes (above).
class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  // Builds the optimiser of this process's shard from the groups restricted to it.
  using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup> shard)>;
  // `groups` as any optimiser takes them, the same on every process (their
  // shapes are checked across processes: std::invalid_argument naming the
  // difference); `make` builds the shard's optimiser (its options must agree
  // between processes).
  ZeroRedundancyOptimizer(std::vector<optim::ParamGroup> groups, double lr, const Factory& make);

  int owner(size_t param) const;                  // the rank that updates parameter `param` (0-based, through the groups)
  const optim::Optimizer& local() const { return *local_; }  // the shard's optimiser
  // The whole state, gathered on every process (collective).
  std::map<std::string, Tensor> state_dict() const override;
  // The whole state on rank `to` alone, as PyTorch's consolidate_state_dict:
  // an empty map on the others, which hold one tensor at a time while it
  // passes (collective). What a checkpoint written by one process needs.
  std::map<std::string, Tensor> consolidate_state_dict(int to = 0) const;
  // The whole state checked, this process's shard kept (collective only in
  // that every process must load the same state).
  void load_state_dict(const std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_names() const override { return local_->state_names(); }
  int64_t state_bytes() const override { return local_->state_bytes(); }  // the shard's alone

 protected:
  void update(Tensor&, const Tensor&, std::map<std::string, Tensor>&) override {}  // finish_step() steps the shard
  void finish_step() override;  // the shard's step, then every shard's new values from its owner
  const char* name() const override { return "ZeroRedundancyOptimizer"; }

 private:
  std::map<std::string, Tensor> gather(int to) const;  // to < 0: every process
  std::vector<int> owner_;          // per parameter
  std::vector<int64_t> local_index_;  // per parameter: its index in local_ (-1: another process's)
  std::unique_ptr<optim::Optimizer> local_;
};

}  // namespace xg::dist
