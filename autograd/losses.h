// Losses: torch.nn.functional's, with its names, shapes and defaults.
// Every loss takes its options as one struct of named setters (a Python
// keyword argument is a setter of the same name), reduces as `reduction`
// says (default mean) and is differentiable to any order. Shapes follow
// PyTorch: classes at dimension 1, (N,C) or (N,C,d1,...), or (C) unbatched.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/options.h"
#include "autograd/tensor.h"

namespace xg {

// The options of the losses that take only a reduction (l1, mse, soft
// margin, ...).
struct LossOptions {
  LossOptions() = default;
  LossOptions(Reduction r) : reduction_(r) {}  // NOLINT: LossOptions(Reduction::sum) reads as the keyword
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};

// ---- regression -----------------------------------------------------------

// |input - target| and (input - target)^2, elementwise (shapes equal).
Tensor l1_loss(const Tensor& input, const Tensor& target, const LossOptions& o = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const LossOptions& o = {});

// The options of SmoothL1Loss (nn::SmoothL1Loss and its function below).
struct SmoothL1LossOptions {
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
  XG_ARG(double, beta) = 1.0;  // >= 0; 0 is l1_loss
};
// d = |input - target|: 0.5 d^2 / beta below beta, else d - 0.5 beta.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o = {});

// The options of HuberLoss (nn::HuberLoss and its function below).
struct HuberLossOptions {
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
  XG_ARG(double, delta) = 1.0;  // > 0
};
// d = |input - target|: 0.5 d^2 below delta, else delta (d - 0.5 delta).
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o = {});

// ---- classification: probabilities and logits ----------------------------

// The options of BCELoss (nn::BCELoss and its function below).
struct BCELossOptions {
  XG_ARG(Tensor, weight);  // broadcast to the input's shape, or undefined
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// -w (t ln p + (1 - t) ln(1 - p)) with each log clamped to >= -100, as
// PyTorch; input p in [0, 1].
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o = {});

// The options of BCEWithLogitsLoss (nn::BCEWithLogitsLoss and its function below).
struct BCEWithLogitsLossOptions {
  XG_ARG(Tensor, weight);      // broadcast to the input's shape, or undefined
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
  XG_ARG(Tensor, pos_weight);  // the positive class's weight, broadcast along the last dimension, or undefined
};
// binary_cross_entropy(sigmoid(input), target) computed stably from the logits.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& o = {});

// The options of NLLLoss (nn::NLLLoss and its function below).
struct NLLLossOptions {
  XG_ARG(Tensor, weight);  // (C) per class, or undefined
  XG_ARG(int64_t, ignore_index) = -100;  // targets equal to it count for nothing
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// -w[t] input[n, t, d...] for log-probabilities input (N,C,d1,...) (or (C))
// and int64 targets (N,d1,...) (or ()); mean divides by the sum of the
// counted targets' weights. Targets equal to ignore_index count for nothing;
// when nothing counts the mean is 0 (PyTorch: NaN), so that a batch of
// padding does not poison a run.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o = {});

// The options of CrossEntropyLoss (nn::CrossEntropyLoss and its function below).
struct CrossEntropyLossOptions {
  XG_ARG(Tensor, weight);  // (C) per class, or undefined
  XG_ARG(int64_t, ignore_index) = -100;  // targets equal to it count for nothing
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
  XG_ARG(double, label_smoothing) = 0.0;  // in [0, 1]: e/C on every class and 1-e more on the target
};
// nll_loss(log_softmax(input, 1), target) with label smoothing, for logits
// (N,C,d1,...) or (C). The target is int64 class indices (N,d1,...), or
// float class probabilities of the input's shape (then mean divides by the
// number of (n, d...) positions and ignore_index does not apply). Classes are
// at dimension 1, as PyTorch: logits (B,T,V) of a sequence are reshaped to
// (B*T,V) first (a target of the wrong shape is an error naming both). The
// unweighted mean over class indices runs as one fused op.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyLossOptions& o = {});
// The same with the targets as a vector, one per (n, d...) position.
Tensor cross_entropy(const Tensor& input, const std::vector<int64_t>& target, const CrossEntropyLossOptions& o = {});

// The options of KLDivLoss (nn::KLDivLoss and its function below).
struct KLDivLossOptions {
  XG_ARG(Reduction, reduction) = Reduction::mean;  // Reduction::batchmean: the sum divided by input.size(0)
  XG_ARG(bool, log_target) = false;  // the target holds log-probabilities
};
// target (ln target - input), 0 where target is 0; with log_target,
// e^target (target - input). input holds log-probabilities. PyTorch's
// reduction 'mean' averages over every element; 'batchmean' is the
// KL divergence's mathematical definition.
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o = {});

// The options of PoissonNLLLoss (nn::PoissonNLLLoss and its function below).
struct PoissonNLLLossOptions {
  XG_ARG(bool, log_input) = true;  // e^input - target input; else input - target ln(input + eps)
  XG_ARG(bool, full) = false;      // adds Stirling's target ln target - target + ln(2 pi target) / 2 where target > 1
  XG_ARG(double, eps) = 1e-8;  // added for stability
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// The negative log-likelihood of target under Poisson(rate input), as PyTorch.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& o = {});

// The options of GaussianNLLLoss (nn::GaussianNLLLoss and its function below).
struct GaussianNLLLossOptions {
  XG_ARG(bool, full) = false;  // adds ln(2 pi) / 2
  XG_ARG(double, eps) = 1e-6;  // var below it is raised to it (the gradient passes unchanged, as PyTorch)
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// (ln var + (input - target)^2 / var) / 2; var of the input's shape, or
// with its last dimension 1 or missing (one variance per row).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o = {});

// ---- margins and embeddings ------------------------------------------------

// The options of MarginLoss (nn::MarginLoss and its function below).
struct MarginLossOptions {
  XG_ARG(double, margin) = 0.0;  // the margin
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// max(0, -y (x1 - x2) + margin), y in {1, -1} (margin default 0).
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           const MarginLossOptions& o = {});
// The options of HingeEmbeddingLoss (nn::HingeEmbeddingLoss and its function below).
struct HingeEmbeddingLossOptions {
  XG_ARG(double, margin) = 1.0;  // the margin
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// y == 1: x; y == -1: max(0, margin - x).
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, const HingeEmbeddingLossOptions& o = {});
// y == 1: 1 - cos(x1, x2); y == -1: max(0, cos - margin), along dimension 1
// ((N,D) pairs, or (D) unbatched).
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             const MarginLossOptions& o = {});
// ln(1 + e^(-y x)), y in {1, -1}.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const LossOptions& o = {});

// The options of MultilabelSoftMarginLoss (nn::MultilabelSoftMarginLoss and its function below).
struct MultilabelSoftMarginLossOptions {
  XG_ARG(Tensor, weight);  // (C), or undefined
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// -(y ln sigmoid(x) + (1 - y) ln sigmoid(-x)) averaged over the C classes
// of each (N,C) row.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const MultilabelSoftMarginLossOptions& o = {});

// The options of MultiMarginLoss (nn::MultiMarginLoss and its function below).
struct MultiMarginLossOptions {
  XG_ARG(int64_t, p) = 1;  // 1 or 2
  XG_ARG(double, margin) = 1.0;  // the margin
  XG_ARG(Tensor, weight);  // (C), or undefined
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// For (N,C) scores and int64 targets (N): sum over i != y of
// w[y] max(0, margin - x[y] + x[i])^p, divided by C.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& o = {});
// For (N,C) scores and int64 targets (N,C) listing each row's classes, ended
// by the first -1: sum over listed j and unlisted i of max(0, 1 - (x[j] - x[i])), / C.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const LossOptions& o = {});

// The options of PairwiseDistance (nn::PairwiseDistance and its function below).
struct PairwiseDistanceOptions {
  XG_ARG(double, p) = 2.0;  // > 0
  XG_ARG(double, eps) = 1e-6;  // added for stability
  XG_ARG(bool, keepdim) = false;  // keep the reduced dimension as size 1
};
// ||x1 - x2 + eps||_p along the last dimension.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, const PairwiseDistanceOptions& o = {});

// The options of CosineSimilarity (nn::CosineSimilarity and its function below).
struct CosineSimilarityOptions {
  XG_ARG(int64_t, dim) = 1;  // the dimension reduced
  XG_ARG(double, eps) = 1e-8;  // added for stability
};
// sum(x1 x2) / (max(||x1||, eps) max(||x2||, eps)) along `dim` (x1, x2
// broadcast), as PyTorch 1.13: a norm below eps is raised to it with the
// gradient passing as if it were not.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, const CosineSimilarityOptions& o = {});

// The options of TripletMarginLoss (nn::TripletMarginLoss and its function below).
struct TripletMarginLossOptions {
  XG_ARG(double, margin) = 1.0;  // the margin
  XG_ARG(double, p) = 2.0;  // the norm's order
  XG_ARG(double, eps) = 1e-6;  // added for stability
  XG_ARG(bool, swap) = false;  // the negative's distance is the smaller of d(a, n) and d(p, n)
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// max(d(a, p) - d(a, n) + margin, 0) with d = pairwise_distance(., ., p, eps).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o = {});

// A distance of two batches of embeddings (N,D), (N,D) -> (N).
using DistanceFunction = std::function<Tensor(const Tensor&, const Tensor&)>;
// The options of TripletMarginWithDistanceLoss (nn::TripletMarginWithDistanceLoss and its function below).
struct TripletMarginWithDistanceLossOptions {
  XG_ARG(DistanceFunction, distance_function);  // empty: pairwise_distance
  XG_ARG(double, margin) = 1.0;  // the margin
  XG_ARG(bool, swap) = false;  // d(a, n) replaced by the smaller of it and d(p, n)
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (the default) or sum
};
// max(d(a, p) - d(a, n) + margin, 0) with the given distance; margin > 0.
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const TripletMarginWithDistanceLossOptions& o = {});

// ---- sequences ------------------------------------------------------------

// The options of CTCLoss (nn::CTCLoss and its function below).
struct CTCLossOptions {
  XG_ARG(int64_t, blank) = 0;  // the blank class, in [0, C)
  XG_ARG(Reduction, reduction) = Reduction::mean;  // none, mean (each loss over its target length first) or sum
  XG_ARG(bool, zero_infinity) = false;  // an impossible alignment's loss (+inf) and its gradient become 0
};
// Connectionist temporal classification (Graves et al., 2006): for each
// sequence, -log of the total probability of every alignment of its target
// to its input_lengths[n] frames. log_probs (T,N,C) (or (T,C) unbatched),
// log-probabilities over the C classes; targets int64, (N,S) padded or the
// targets one after another (sum of target_lengths), or (S) unbatched, none
// equal to blank; input_lengths and target_lengths int64 (N) (or ()), with
// 1 <= input_lengths <= T. Mean divides each loss by its target length (at
// least 1), then takes the batch mean, as PyTorch. Composed of
// differentiable ops (one step per frame), so every order of gradient is
// exact; PyTorch's own gradient adds exp(log_probs), which is zero only
// once it passes back through a log_softmax.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& o = {});

// ---- internals shared with nn/ ----------------------------------------------

// A loss of every element reduced as `r` says: itself, its mean or its sum
// (batchmean: the sum over input.size(0), kl_div only; elsewhere an error
// naming `op`).
Tensor reduce_loss(const Tensor& loss, Reduction r, const char* op);

}  // namespace xg
