// AdaptiveLogSoftmaxWithLoss (Grave et al., 2016, "Efficient softmax
// approximation for GPUs"): the frequent classes in a head softmax, the rest
// in clusters behind it, each cluster's softmax computed only for the rows
// whose target falls in it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/containers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace xg::nn {

// forward()'s result, as PyTorch's _ASMoutput (LibTorch's ASMoutput).
struct ASMoutput {
  Tensor output;  // (N) (or ()): the log-probability of each row's target
  Tensor loss;    // (): the mean of -output
};

// torch.nn.AdaptiveLogSoftmaxWithLoss. cutoffs c0 < c1 < ... split the
// n_classes classes: [0, c0) in the head, [c_i, c_{i+1}) in cluster i, whose
// projection is Linear(in, in // div_value^(i+1), no bias) then
// Linear(that, c_{i+1} - c_i, no bias). Parameters as PyTorch names them:
// head.weight (c0 + clusters, in), head.bias with head_bias,
// tail.I.0.weight, tail.I.1.weight.
class AdaptiveLogSoftmaxWithLoss : public Module {
 public:
  // cutoffs increasing, each in [1, n_classes - 1]; in_features >= 1;
  // div_value > 0 and small enough that every cluster keeps a hidden size
  // of at least 1 (PyTorch would build an empty layer); else
  // std::invalid_argument naming the value.
  AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes, std::vector<int64_t> cutoffs, Generator& gen,
                             double div_value = 4.0, bool head_bias = false);
  // The same drawing from default_generator().
  AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes, std::vector<int64_t> cutoffs,
                             double div_value = 4.0, bool head_bias = false)
      : AdaptiveLogSoftmaxWithLoss(in_features, n_classes, std::move(cutoffs), default_generator(), div_value,
                                   head_bias) {}
  // input (N, in) (or (in)), target int64 (N) (or ()) in [0, n_classes).
  ASMoutput forward(const Tensor& input, const Tensor& target);
  Tensor log_prob(const Tensor& input);  // (N, in) -> (N, n_classes): every class's log-probability
  Tensor predict(const Tensor& input);   // (N, in) -> int64 (N): the most probable class of each row
  std::string type_name() const override;  // "AdaptiveLogSoftmaxWithLoss(in_features=8, n_classes=20, cutoffs=[4, 10])"

  std::shared_ptr<Linear> head;     // "head"
  std::shared_ptr<ModuleList> tail;  // "tail": one Sequential of two Linears per cluster

 private:
  int64_t in_features_, n_classes_;
  std::vector<int64_t> cutoffs_;  // the given ones, then n_classes
  Tensor rows(const Tensor& input) const;  // (N, in), checked
};

}  // namespace xg::nn
