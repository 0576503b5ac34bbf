#include "distributed/zero.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "autograd/autograd.h"
#include "distributed/dist.h"

namespace xg::dist {

namespace {

// Each parameter's owner: largest first, to the rank with the fewest
// elements so far (the lowest such rank on a tie), the same on every process.
std::vector<int> partition(const std::vector<Tensor>& params, int ranks) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0);
  std::vector<int> owner(params.size(), 0);
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[static_cast<size_t>(r)] += params[i].numel();
  }
  return owner;
}

// Copies between the parameters of `idx` and one flat buffer of their dtype.
void pack(const std::vector<Tensor>& params, const std::vector<size_t>& idx, Tensor& flat, bool into_flat) {
  char* f = static_cast<char*>(flat.dtype() == f32 ? static_cast<void*>(flat.data<float>())
                                                   : static_cast<void*>(flat.data<double>()));
  for (size_t i : idx) {
    Tensor p = params[i];
    char* d = static_cast<char*>(p.dtype() == f32 ? static_cast<void*>(p.data<float>())
                                                  : static_cast<void*>(p.data<double>()));
    const size_t bytes = static_cast<size_t>(p.numel() * dtype_size(p.dtype()));
    if (into_flat) {
      std::memcpy(f, d, bytes);
    } else {
      std::memcpy(d, f, bytes);
      p.bump_version();
    }
    f += bytes;
  }
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<optim::ParamGroup> groups, double lr,
                                                 const Factory& make)
    : Optimizer(groups, lr) {
  if (!all_same_shapes(params()))
    throw std::invalid_argument("ZeroRedundancyOptimizer: the processes' parameters differ (rank " +
                                std::to_string(rank()) + " has " + std::to_string(params().size()) +
                                "; their number, shapes or dtypes differ on some rank)");
  owner_ = partition(params(), world_size());
  std::vector<optim::ParamGroup> shard;
  size_t i = 0;
  int64_t local = 0;
  for (const optim::ParamGroup& g : groups) {
    optim::ParamGroup mine{{}, g.lr_scale, g.weight_decay};
    for (const Tensor& p : g.params) {
      const bool owned = owner_[i++] == rank();
      local_index_.push_back(owned ? local++ : -1);
      if (owned) mine.params.push_back(p);
    }
    shard.push_back(std::move(mine));
  }
  local_ = make(std::move(shard));
  if (!local_) throw std::invalid_argument("ZeroRedundancyOptimizer: the factory returned no optimiser");
  if (static_cast<int64_t>(local_->params().size()) != local)
    throw std::invalid_argument("ZeroRedundancyOptimizer: the factory's optimiser has " +
                                std::to_string(local_->params().size()) + " parameters, its shard " +
                                std::to_string(local));
}

int ZeroRedundancyOptimizer::owner(size_t param) const {
  if (param >= owner_.size())
    throw std::out_of_range("ZeroRedundancyOptimizer::owner: parameter " + std::to_string(param) + " of " +
                            std::to_string(owner_.size()));
  return owner_[param];
}

void ZeroRedundancyOptimizer::finish_step() {
  local_->set_lr(lr());
  local_->step();
  // Every shard's new values from its owner: one broadcast per rank and
  // dtype, of that shard's parameters one after another.
  NoGradGuard no_grad;
  for (int r = 0; r < world_size(); ++r) {
    for (Dtype dt : {f32, f64}) {
      std::vector<size_t> idx;
      int64_t n = 0;
      for (size_t i = 0; i < owner_.size(); ++i)
        if (owner_[i] == r && params()[i].dtype() == dt) idx.push_back(i), n += params()[i].numel();
      if (n == 0) continue;
      Tensor flat = zeros({n}, dt);
      if (r == rank()) pack(params(), idx, flat, true);
      broadcast(flat, r);
      if (r != rank()) pack(params(), idx, flat, false);
    }
  }
}

std::map<std::string, Tensor> ZeroRedundancyOptimizer::state_dict() const { return gather(-1); }

std::map<std::string, Tensor> ZeroRedundancyOptimizer::consolidate_state_dict(int to) const {
  if (to < 0 || to >= world_size())
    throw std::invalid_argument("ZeroRedundancyOptimizer::consolidate_state_dict: rank " + std::to_string(to) +
                                " is not a rank (0.." + std::to_string(world_size() - 1) + ")");
  return gather(to);
}

std::map<std::string, Tensor> ZeroRedundancyOptimizer::gather(int to) const {
  const std::map<std::string, Tensor> mine = local_->state_dict();
  const std::vector<std::string> names = state_names();
  const size_t n = owner_.size();
  // Which parameters have state (stepped at least once), from their owners.
  Tensor has = zeros({static_cast<int64_t>(n)}, f64);
  for (size_t i = 0; i < n; ++i)
    if (local_index_[i] >= 0 && !names.empty() && mine.count(std::to_string(local_index_[i]) + "." + names[0]))
      has.data<double>()[i] = 1;
  allreduce(has);
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    if (has.data<double>()[i] == 0) continue;
    for (const std::string& nm : names) {
      const Tensor& p = params()[i];
      Tensor t = local_index_[i] >= 0 ? mine.at(std::to_string(local_index_[i]) + "." + nm).detach().clone()
                                      : zeros(p.shape(), p.dtype());
      broadcast(t, owner_[i]);
      if (to < 0 || to == rank()) out[std::to_string(i) + "." + nm] = t;  // elsewhere dropped at once
    }
  }
  if (to >= 0 && to != rank()) return out;
  out["step"] = scalar(static_cast<double>(steps()), f64);
  out["lr"] = scalar(lr(), f64);
  out["num_params"] = scalar(static_cast<double>(n), f64);
  return out;
}

void ZeroRedundancyOptimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  CheckedState c = check_state(state);  // the whole state, as the unsharded optimiser checks it
  std::map<std::string, Tensor> mine;
  for (size_t i = 0; i < owner_.size(); ++i)
    if (local_index_[i] >= 0)
      for (const auto& [nm, t] : c.buffers[i]) mine[std::to_string(local_index_[i]) + "." + nm] = t;
  mine["step"] = scalar(static_cast<double>(c.steps), f64);
  mine["lr"] = scalar(c.lr, f64);
  mine["num_params"] = scalar(static_cast<double>(local_->params().size()), f64);
  local_->load_state_dict(mine);
  set_steps(c.steps);
  set_lr(c.lr);
}

}  // namespace xg::dist
