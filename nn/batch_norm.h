// Batch normalisation, as torch.nn.BatchNorm1d, BatchNorm2d and BatchNorm3d: each
// channel normalised with the batch's statistics in training and with the
// running statistics in evaluation (train() / eval()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace xg::nn {

// What BatchNorm1d and BatchNorm2d share. State dict as PyTorch's: weight,
// bias (affine), running_mean, running_var and num_batches_tracked (int64,
// a count of training batches) when track_running_stats.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // the shape is unchanged
  // relu(forward(x)) as one op (xg::batch_norm_relu): in float32 the relu
  // costs no pass of its own, forward or backward.
  Tensor forward_relu(const Tensor& x);
  std::string type_name() const override;   // "BatchNorm2d(64, eps=1e-05, momentum=0.1)"

  int64_t num_features() const { return features_; }  // C
  Tensor& weight() { return weight_; }                 // (C) ones; undefined without affine
  Tensor& bias() { return bias_; }                     // (C) zeros; undefined without affine
  Tensor& running_mean() { return running_mean_; }     // (C) zeros; undefined without tracking
  Tensor& running_var() { return running_var_; }       // (C) ones; undefined without tracking
  // Training batches seen (an int64 scalar); undefined without tracking.
  Tensor& num_batches_tracked() { return num_batches_tracked_; }
  // Training statistics over every process's batch: `sum_over_processes`
  // sums a tensor across them, differentiably (dist::sync_batch_norm sets
  // dist::all_sum here). Empty: this process's batch alone (the default).
  void synchronise(std::function<Tensor(const Tensor&)> sum_over_processes) { across_ = std::move(sum_over_processes); }

 protected:
  // `name` is the class; `ranks` the accepted input ranks, e.g. {2, 3}.
  // Throws std::invalid_argument on features < 1, eps <= 0 or momentum
  // outside [0, 1].
  BatchNorm(const char* name, std::vector<int64_t> ranks, int64_t features, double eps, double momentum, bool affine,
            bool track_running_stats);

 private:
  Tensor run(const Tensor& x, bool relu);  // forward, then relu when asked

  std::string name_;
  std::vector<int64_t> ranks_;
  int64_t features_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
  std::function<Tensor(const Tensor&)> across_;
};

// (N,C) or (N,C,L) inputs.
class BatchNorm1d : public BatchNorm {
 public:
  // PyTorch's defaults; eps > 0, momentum in [0, 1].
  explicit BatchNorm1d(int64_t features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", {2, 3}, features, eps, momentum, affine, track_running_stats) {}
};

// (N,C,H,W) inputs.
class BatchNorm2d : public BatchNorm {
 public:
  // PyTorch's defaults; eps > 0, momentum in [0, 1].
  explicit BatchNorm2d(int64_t features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", {4}, features, eps, momentum, affine, track_running_stats) {}
};

// (N,C,D,H,W) inputs.
class BatchNorm3d : public BatchNorm {
 public:
  // PyTorch's defaults; eps > 0, momentum in [0, 1].
  explicit BatchNorm3d(int64_t features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm3d", {5}, features, eps, momentum, affine, track_running_stats) {}
};

}  // namespace xg::nn
