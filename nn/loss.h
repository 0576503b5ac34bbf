// Losses as modules, as torch.nn's loss.py and distance.py: each holds the
// options of its functional form (autograd/losses.h), LibTorch's way:
//   nn::CrossEntropyLoss ce(CrossEntropyLossOptions().label_smoothing(0.1));
//   Tensor loss = ce.forward(logits, targets);
// A class weight or pos_weight is registered as a buffer ("weight",
// "pos_weight"), so the state dict holds it as PyTorch's does.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/losses.h"
#include "nn/module.h"

namespace xg::nn {

namespace detail {
template <class O, class = void>
struct has_weight : std::false_type {};
template <class O>
struct has_weight<O, std::void_t<decltype(std::declval<O&>().weight(Tensor()))>> : std::true_type {};
template <class O, class = void>
struct has_pos_weight : std::false_type {};
template <class O>
struct has_pos_weight<O, std::void_t<decltype(std::declval<O&>().pos_weight(Tensor()))>> : std::true_type {};
}  // namespace detail

// A loss of (input, target) with options O, computed by F.
template <class O, Tensor (*F)(const Tensor&, const Tensor&, const O&)>
class PairLoss : public Module {
 public:
  // The loss (or distance) of input and target with `options`.
  Tensor forward(const Tensor& input, const Tensor& target) {
    const auto named = scope();
    return F(input, target, options);
  }
  std::string type_name() const override { return name_ + "()"; }  // "MSELoss()"
  O options;  // as given; a weight in it is this module's buffer

 protected:
  // `name`: the class's, for type_name(); a weight or pos_weight in `o` becomes a buffer.
  PairLoss(std::string name, O o) : options(std::move(o)), name_(std::move(name)) {
    if constexpr (detail::has_weight<O>::value)
      if (options.weight().defined()) options.weight(register_buffer("weight", options.weight()));
    if constexpr (detail::has_pos_weight<O>::value)
      if (options.pos_weight().defined()) options.pos_weight(register_buffer("pos_weight", options.pos_weight()));
  }

 private:
  std::string name_;
};

// A loss of (input1, input2, target) or (anchor, positive, negative).
template <class O, Tensor (*F)(const Tensor&, const Tensor&, const Tensor&, const O&)>
class TripleLoss : public Module {
 public:
  // The loss of its three tensors with `options`.
  Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c) {
    const auto named = scope();
    return F(a, b, c, options);
  }
  std::string type_name() const override { return name_ + "()"; }  // "TripletMarginLoss()"
  O options;  // as given

 protected:
  // `name`: the class's, for type_name().
  TripleLoss(std::string name, O o) : options(std::move(o)), name_(std::move(name)) {}

 private:
  std::string name_;
};

// forward(input, target) of one shape.
struct L1Loss : PairLoss<LossOptions, l1_loss> {
  explicit L1Loss(LossOptions o = {}) : PairLoss("L1Loss", std::move(o)) {}  // with options o
};
// torch.nn.MSELoss.
struct MSELoss : PairLoss<LossOptions, mse_loss> {
  explicit MSELoss(LossOptions o = {}) : PairLoss("MSELoss", std::move(o)) {}  // with options o
};
// torch.nn.SmoothL1Loss.
struct SmoothL1Loss : PairLoss<SmoothL1LossOptions, smooth_l1_loss> {
  explicit SmoothL1Loss(SmoothL1LossOptions o = {}) : PairLoss("SmoothL1Loss", std::move(o)) {}  // with options o
};
// torch.nn.HuberLoss.
struct HuberLoss : PairLoss<HuberLossOptions, huber_loss> {
  explicit HuberLoss(HuberLossOptions o = {}) : PairLoss("HuberLoss", std::move(o)) {}  // with options o
};
// torch.nn.BCELoss.
struct BCELoss : PairLoss<BCELossOptions, binary_cross_entropy> {
  explicit BCELoss(BCELossOptions o = {}) : PairLoss("BCELoss", std::move(o)) {}  // with options o
};
// torch.nn.BCEWithLogitsLoss.
struct BCEWithLogitsLoss : PairLoss<BCEWithLogitsLossOptions, binary_cross_entropy_with_logits> {
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions o = {}) : PairLoss("BCEWithLogitsLoss", std::move(o)) {}  // with options o
};
// torch.nn.KLDivLoss.
struct KLDivLoss : PairLoss<KLDivLossOptions, kl_div> {
  explicit KLDivLoss(KLDivLossOptions o = {}) : PairLoss("KLDivLoss", std::move(o)) {}  // with options o
};
// torch.nn.PoissonNLLLoss.
struct PoissonNLLLoss : PairLoss<PoissonNLLLossOptions, poisson_nll_loss> {
  explicit PoissonNLLLoss(PoissonNLLLossOptions o = {}) : PairLoss("PoissonNLLLoss", std::move(o)) {}  // with options o
};
// torch.nn.SoftMarginLoss.
struct SoftMarginLoss : PairLoss<LossOptions, soft_margin_loss> {
  explicit SoftMarginLoss(LossOptions o = {}) : PairLoss("SoftMarginLoss", std::move(o)) {}  // with options o
};
// torch.nn.HingeEmbeddingLoss.
struct HingeEmbeddingLoss : PairLoss<HingeEmbeddingLossOptions, hinge_embedding_loss> {
  explicit HingeEmbeddingLoss(HingeEmbeddingLossOptions o = {}) : PairLoss("HingeEmbeddingLoss", std::move(o)) {}  // with options o
};
// torch.nn.MultiLabelSoftMarginLoss.
struct MultiLabelSoftMarginLoss : PairLoss<MultilabelSoftMarginLossOptions, multilabel_soft_margin_loss> {
  // with options o
  explicit MultiLabelSoftMarginLoss(MultilabelSoftMarginLossOptions o = {});  // with options o
};
// forward(input, int64 class targets).
struct NLLLoss : PairLoss<NLLLossOptions, nll_loss> {
  explicit NLLLoss(NLLLossOptions o = {}) : PairLoss("NLLLoss", std::move(o)) {}  // with options o
};
// torch.nn.CrossEntropyLoss.
struct CrossEntropyLoss : PairLoss<CrossEntropyLossOptions, cross_entropy> {
  explicit CrossEntropyLoss(CrossEntropyLossOptions o = {}) : PairLoss("CrossEntropyLoss", std::move(o)) {}  // with options o
};
// torch.nn.MultiMarginLoss.
struct MultiMarginLoss : PairLoss<MultiMarginLossOptions, multi_margin_loss> {
  explicit MultiMarginLoss(MultiMarginLossOptions o = {}) : PairLoss("MultiMarginLoss", std::move(o)) {}  // with options o
};
// torch.nn.MultiLabelMarginLoss.
struct MultiLabelMarginLoss : PairLoss<LossOptions, multilabel_margin_loss> {
  explicit MultiLabelMarginLoss(LossOptions o = {}) : PairLoss("MultiLabelMarginLoss", std::move(o)) {}  // with options o
};
// forward(input1, input2, target) and forward(anchor, positive, negative).
struct MarginRankingLoss : TripleLoss<MarginLossOptions, margin_ranking_loss> {
  explicit MarginRankingLoss(MarginLossOptions o = {}) : TripleLoss("MarginRankingLoss", std::move(o)) {}  // with options o
};
// torch.nn.CosineEmbeddingLoss.
struct CosineEmbeddingLoss : TripleLoss<MarginLossOptions, cosine_embedding_loss> {
  explicit CosineEmbeddingLoss(MarginLossOptions o = {}) : TripleLoss("CosineEmbeddingLoss", std::move(o)) {}  // with options o
};
// torch.nn.GaussianNLLLoss.
struct GaussianNLLLoss : TripleLoss<GaussianNLLLossOptions, gaussian_nll_loss> {  // forward(input, target, var)
  explicit GaussianNLLLoss(GaussianNLLLossOptions o = {}) : TripleLoss("GaussianNLLLoss", std::move(o)) {}  // with options o
};
// torch.nn.TripletMarginLoss.
struct TripletMarginLoss : TripleLoss<TripletMarginLossOptions, triplet_margin_loss> {
  explicit TripletMarginLoss(TripletMarginLossOptions o = {}) : TripleLoss("TripletMarginLoss", std::move(o)) {}  // with options o
};
// torch.nn.TripletMarginWithDistanceLoss.
struct TripletMarginWithDistanceLoss : TripleLoss<TripletMarginWithDistanceLossOptions, triplet_margin_with_distance_loss> {
  // with options o
  explicit TripletMarginWithDistanceLoss(TripletMarginWithDistanceLossOptions o = {});
};
// torch.nn.CTCLoss: forward(log_probs, targets, input_lengths, target_lengths) as xg::ctc_loss.
class CTCLoss : public Module {
 public:
  explicit CTCLoss(CTCLossOptions o = {}) : options(o) {}  // with options o
  // log_probs (T,N,C), targets (N,S) or concatenated, lengths int64 (N)
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths) {
    const auto named = scope();
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, options);
  }
  std::string type_name() const override { return "CTCLoss()"; }  // "CTCLoss()"
  CTCLossOptions options;  // as given
};
// forward(x1, x2): distances (torch.nn's distance.py).
struct PairwiseDistance : PairLoss<PairwiseDistanceOptions, pairwise_distance> {
  explicit PairwiseDistance(PairwiseDistanceOptions o = {}) : PairLoss("PairwiseDistance", std::move(o)) {}  // with options o
};
// torch.nn.CosineSimilarity.
struct CosineSimilarity : PairLoss<CosineSimilarityOptions, cosine_similarity> {
  explicit CosineSimilarity(CosineSimilarityOptions o = {}) : PairLoss("CosineSimilarity", std::move(o)) {}  // with options o
};

}  // namespace xg::nn
