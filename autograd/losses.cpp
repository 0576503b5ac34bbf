// Losses, composed from differentiable ops (so every order of gradient
// follows from theirs); the unweighted mean cross-entropy over class indices
// alone runs as the fused op of ops_nn.cpp. Each follows PyTorch 1.13's
// definition term by term, including where a clamp lets the gradient through.
#include "autograd/losses.h"

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void same_shape(const Tensor& input, const Tensor& target, const char* op, const char* a = "input",
                const char* b = "target") {
  check_defined(input, op);
  check_defined(target, op);
  detail::check_same_dtype(input, target, op);
  if (input.shape() != target.shape())
    throw ShapeError(fmt::format("{}: {} {} and {} {} must have one shape", op, a, shape_str(input.shape()), b,
                                 shape_str(target.shape())));
}

// max(z, 0) whose gradient passes at 0, as PyTorch's clamp_min.
Tensor clamp_min0(const Tensor& z) { return clamp(z, 0.0, kInf); }

// ln(1 + e^x) for every x (no threshold: exact where PyTorch's formulas are).
Tensor softplus_exact(const Tensor& x) { return softplus(x, 1.0, kInf); }

// The class dimension moved last and the rest merged: (N,C,d1,...) -> (N d1 ..., C);
// (C) -> (1, C).
Tensor classes_last(const Tensor& input) {
  if (input.dim() == 1) return reshape(input, {1, input.size(0)});
  if (input.dim() == 2) return input;
  std::vector<int64_t> perm{0};
  for (int64_t d = 2; d < input.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return reshape(permute(input, perm), {-1, input.size(1)});
}

// The shape a class-index target must have: the input's without dimension 1.
Shape target_shape_for(const Tensor& input) {
  if (input.dim() == 1) return {};
  Shape s{input.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) s.push_back(input.size(d));
  return s;
}

// t with its values below `floor` raised to it, the gradient passing as if
// they were not (PyTorch clamps such values in place under no_grad).
Tensor raised_to(const Tensor& t, double floor) {
  return t + detail::map(t.detach(), [floor](auto v) {
    using T = decltype(v);
    return v < T(floor) ? T(floor) - v : T(0);
  });
}

void check_class_input(const Tensor& input, const char* op) {
  check_defined(input, op);
  if (input.dim() < 1)
    throw ShapeError(fmt::format("{}: input {} must be (C), (N,C) or (N,C,d1,...)", op, shape_str(input.shape())));
}

// Class-index targets as a vector, checked against the input: one per
// (n, d...) position, each in [0, C) or ignore_index.
std::vector<int64_t> class_targets(const Tensor& input, const Tensor& target, int64_t ignore_index, const char* op) {
  check_defined_any(target, op);
  if (target.dtype() != Dtype::i64)
    throw ShapeError(fmt::format("{}: target must hold int64 class indices, got {} {} (float targets of the "
                                 "input's shape are class probabilities, for cross_entropy only)",
                                 op, dtype_name(target.dtype()), shape_str(target.shape())));
  const Shape want = target_shape_for(input);
  if (target.shape() != want)
    throw ShapeError(fmt::format("{}: target {} must be input {}'s shape without dimension 1 (the classes), {}; "
                                 "classes are at dimension 1 as in PyTorch: reshape (B,T,V) logits to (B*T,V) and "
                                 "their (B,T) targets to (B*T)",
                                 op, shape_str(target.shape()), shape_str(input.shape()), shape_str(want)));
  const int64_t* p = target.data<int64_t>();
  return std::vector<int64_t>(p, p + target.numel());
}

void check_class_weight(const Tensor& weight, int64_t classes, const char* op) {
  if (!weight.defined()) return;
  if (weight.dim() != 1 || weight.size(0) != classes)
    throw ShapeError(fmt::format("{}: weight {} must be (C) = ({}), one per class", op, shape_str(weight.shape()),
                                 classes));
}

// Q (M,C) with Q[r, t_r] = w[t_r] (1 without weights) and 0 on ignored rows,
// and the sum of the counted rows' weights: nll's rows are -sum(logp Q).
struct TargetWeights {
  Tensor q;
  double total = 0;  // sum of w[t] over the counted rows
};
TargetWeights target_weights(const std::vector<int64_t>& targets, int64_t classes, const Tensor& weight,
                             int64_t ignore_index, double smoothing, Dtype dtype, const char* op) {
  std::vector<double> w(static_cast<size_t>(classes), 1.0);
  if (weight.defined()) w = weight.to_vector();
  const int64_t rows = static_cast<int64_t>(targets.size());
  std::vector<double> q(static_cast<size_t>(rows * classes), 0.0);
  TargetWeights tw;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes)
      throw ShapeError(fmt::format("{}: target {} at position {} is out of range for {} classes (expected 0 to {}, "
                                   "or ignore_index {})",
                                   op, t, r, classes, classes - 1, ignore_index));
    tw.total += w[t];
    // (1 - e) on the target's weight, and e/C of every class's weight
    for (int64_t c = 0; c < classes; ++c) q[r * classes + c] = smoothing / classes * w[c];
    q[r * classes + t] += (1 - smoothing) * w[t];
  }
  tw.q = from_vector(q, {rows, classes}, dtype);
  return tw;
}

// -sum(logp * Q) per row, reduced: none (target's shape), sum, or mean over
// the counted weights (0 when none counts).
Tensor weighted_rows(const Tensor& logp, const TargetWeights& tw, const Shape& target_shape, Reduction r,
                     const char* op) {
  const Tensor rows = -sum(logp * tw.q, {-1});
  switch (r) {
    case Reduction::none: return reshape(rows, target_shape);
    case Reduction::sum: return sum(rows);
    case Reduction::mean: return tw.total > 0 ? sum(rows) / tw.total : sum(rows) * 0.0;
    default: return reduce_loss(rows, r, op);
  }
}

}  // namespace

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::batchmean: return "batchmean";
  }
  return "?";
}

Tensor reduce_loss(const Tensor& loss, Reduction r, const char* op) {
  switch (r) {
    case Reduction::none: return loss;
    case Reduction::mean: return mean(loss);
    case Reduction::sum: return sum(loss);
    case Reduction::batchmean: break;
  }
  throw std::invalid_argument(fmt::format("{}: reduction batchmean is kl_div's alone (expected none, mean or sum)", op));
}

// ---- regression -------------------------------------------------------------------

Tensor l1_loss(const Tensor& input, const Tensor& target, const LossOptions& o) {
  same_shape(input, target, "l1_loss");
  return reduce_loss(abs(input - target), o.reduction(), "l1_loss");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const LossOptions& o) {
  same_shape(input, target, "mse_loss");
  const Tensor d = input - target;
  return reduce_loss(d * d, o.reduction(), "mse_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o) {
  same_shape(input, target, "smooth_l1_loss");
  const double beta = o.beta();
  require(beta >= 0, fmt::format("smooth_l1_loss: beta {}: expected >= 0", beta));
  const Tensor d = input - target, ad = abs(d);
  if (beta == 0) return reduce_loss(ad, o.reduction(), "smooth_l1_loss");
  return reduce_loss(where(lt(ad, beta), d * d * (0.5 / beta), ad - 0.5 * beta), o.reduction(), "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o) {
  same_shape(input, target, "huber_loss");
  const double delta = o.delta();
  require(delta > 0, fmt::format("huber_loss: delta {}: expected > 0", delta));
  const Tensor d = input - target, ad = abs(d);
  return reduce_loss(where(lt(ad, delta), d * d * 0.5, (ad - 0.5 * delta) * delta), o.reduction(), "huber_loss");
}

// ---- probabilities and logits -------------------------------------------------------

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o) {
  same_shape(input, target, "binary_cross_entropy");
  for (double p : input.to_vector())
    if (!(p >= 0 && p <= 1))
      throw std::invalid_argument(fmt::format(
          "binary_cross_entropy: input holds {}: expected probabilities in [0, 1] (for logits use "
          "binary_cross_entropy_with_logits)", p));
  const Tensor lp = clamp(log(input), -100.0, kInf), lq = clamp(log(1.0 - input), -100.0, kInf);
  Tensor loss = -(target * lp + (1.0 - target) * lq);
  if (o.weight().defined()) loss = loss * o.weight();
  return reduce_loss(loss, o.reduction(), "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsLossOptions& o) {
  same_shape(input, target, "binary_cross_entropy_with_logits");
  // (1 - t) x + (1 + (pw - 1) t) ln(1 + e^-x): -t ln sigmoid(x) - (1 - t) ln sigmoid(-x), pw on the first
  Tensor lw = o.pos_weight().defined() ? (o.pos_weight() - 1.0) * target + 1.0 : Tensor();
  Tensor loss = (1.0 - target) * input + (lw.defined() ? lw * softplus_exact(-input) : softplus_exact(-input));
  if (o.weight().defined()) loss = loss * o.weight();
  return reduce_loss(loss, o.reduction(), "binary_cross_entropy_with_logits");
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  check_class_input(input, "nll_loss");
  const std::vector<int64_t> t = class_targets(input, target, o.ignore_index(), "nll_loss");
  const int64_t classes = input.dim() == 1 ? input.size(0) : input.size(1);
  check_class_weight(o.weight(), classes, "nll_loss");
  const TargetWeights tw = target_weights(t, classes, o.weight(), o.ignore_index(), 0.0, input.dtype(), "nll_loss");
  return weighted_rows(classes_last(input), tw, target.shape(), o.reduction(), "nll_loss");
}

namespace {

void check_cross_entropy_options(const Tensor& input, const CrossEntropyLossOptions& o) {
  check_class_input(input, "cross_entropy");
  detail::check_label_smoothing(o.label_smoothing(), "cross_entropy");
  check_class_weight(o.weight(), input.dim() == 1 ? input.size(0) : input.size(1), "cross_entropy");
}

// Class indices t, one per (n, d...) position of `target_shape` (checked).
Tensor cross_entropy_indices(const Tensor& input, const std::vector<int64_t>& t, const Shape& target_shape,
                             const CrossEntropyLossOptions& o) {
  const Tensor rows = classes_last(input);
  const double e = o.label_smoothing();
  if (!o.weight().defined() && o.reduction() == Reduction::mean)
    return detail::cross_entropy_rows(rows, t, o.ignore_index(), e);
  const TargetWeights tw =
      target_weights(t, rows.size(1), o.weight(), o.ignore_index(), e, input.dtype(), "cross_entropy");
  return weighted_rows(log_softmax(rows, -1), tw, target_shape, o.reduction(), "cross_entropy");
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const std::vector<int64_t>& target, const CrossEntropyLossOptions& o) {
  check_cross_entropy_options(input, o);
  const Shape ts = target_shape_for(input);
  if (static_cast<int64_t>(target.size()) != shape_numel(ts))
    throw ShapeError(fmt::format("cross_entropy: {} targets for input {}, which has {} positions {} (classes at "
                                 "dimension 1, as PyTorch)",
                                 target.size(), shape_str(input.shape()), shape_numel(ts), shape_str(ts)));
  return cross_entropy_indices(input, target, ts, o);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyLossOptions& o) {
  const char* op = "cross_entropy";
  check_cross_entropy_options(input, o);
  check_defined_any(target, op);
  const int64_t classes = input.dim() == 1 ? input.size(0) : input.size(1);
  const double e = o.label_smoothing();
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  if (target.dtype() != Dtype::i64) {  // class probabilities
    if (target.shape() != input.shape())
      throw ShapeError(fmt::format("cross_entropy: target {} {} must hold int64 class indices of shape {} or class "
                                   "probabilities of the input's shape {}",
                                   dtype_name(target.dtype()), shape_str(target.shape()),
                                   shape_str(target_shape_for(input)), shape_str(input.shape())));
    same_shape(input, target, op, "input", "target (class probabilities)");
    Tensor q = e > 0 ? target * (1 - e) + e / classes : target;
    if (o.weight().defined()) {
      Shape ws(static_cast<size_t>(input.dim()), 1);
      ws[class_dim] = classes;
      q = q * reshape(o.weight(), ws);
    }
    const Tensor loss = -sum(log_softmax(input, class_dim) * q, {class_dim});
    return reduce_loss(loss, o.reduction(), op);
  }
  return cross_entropy_indices(input, class_targets(input, target, o.ignore_index(), op), target.shape(), o);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o) {
  same_shape(input, target, "kl_div");
  Tensor loss;
  if (o.log_target()) {
    loss = exp(target) * (target - input);
  } else {  // xlogy(t, t) - t input: 0 where t is 0, with no log of 0 on any path
    const Tensor pos = gt(target, 0.0);
    const Tensor safe = where(pos, target, ones_like(target));
    loss = where(pos, target * log(safe), zeros_like(target)) - target * input;
  }
  if (o.reduction() == Reduction::batchmean)
    return input.dim() == 0 ? sum(loss) : sum(loss) / static_cast<double>(input.size(0));
  return reduce_loss(loss, o.reduction(), "kl_div");
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& o) {
  same_shape(input, target, "poisson_nll_loss");
  Tensor loss = o.log_input() ? exp(input) - target * input : input - target * log(input + o.eps());
  if (o.full()) {  // Stirling's term where target > 1: t ln t - t + ln(2 pi t) / 2
    const Tensor big = gt(target, 1.0);
    const Tensor t = where(big, target, ones_like(target) * 2.0);
    const Tensor stirling = t * log(t) - t + log(t * (2 * M_PI)) * 0.5;
    loss = loss + where(big, stirling, zeros_like(target));
  }
  return reduce_loss(loss, o.reduction(), "poisson_nll_loss");
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o) {
  const char* op = "gaussian_nll_loss";
  same_shape(input, target, op);
  check_defined(var, op);
  detail::check_same_dtype(input, var, op);
  Tensor v = var;
  if (var.shape() != input.shape()) {
    const Shape lead(input.shape().begin(), input.shape().end() - (input.dim() > 0 ? 1 : 0));
    if (var.shape() == lead) {
      v = unsqueeze(var, -1);
    } else if (!(var.dim() == input.dim() && var.dim() > 0 && var.shape().back() == 1 &&
                 Shape(var.shape().begin(), var.shape().end() - 1) == lead)) {
      throw ShapeError(fmt::format("{}: var {} must be input {}'s shape, or it with the last dimension 1 or "
                                   "dropped (one variance per row)",
                                   op, shape_str(var.shape()), shape_str(input.shape())));
    }
  }
  for (double x : var.to_vector())
    if (!(x >= 0)) throw std::invalid_argument(fmt::format("{}: var holds {}: expected >= 0", op, x));
  require(o.eps() >= 0, fmt::format("{}: eps {}: expected >= 0", op, o.eps()));
  v = raised_to(v, o.eps());  // var below eps raised to it, the gradient passing unchanged
  const Tensor d = input - target;
  Tensor loss = (log(v) + d * d / v) * 0.5;
  if (o.full()) loss = loss + 0.5 * std::log(2 * M_PI);
  return reduce_loss(loss, o.reduction(), op);
}

// ---- margins and embeddings ------------------------------------------------------------

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           const MarginLossOptions& o) {
  same_shape(input1, input2, "margin_ranking_loss", "input1", "input2");
  same_shape(input1, target, "margin_ranking_loss", "input1", "target");
  return reduce_loss(clamp_min0(-target * (input1 - input2) + o.margin()), o.reduction(), "margin_ranking_loss");
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, const HingeEmbeddingLossOptions& o) {
  same_shape(input, target, "hinge_embedding_loss");
  const Tensor zero = zeros_like(input);
  const Tensor margin_part = where(ne(target, 1.0), clamp_min0(o.margin() - input), zero);
  const Tensor self_part = where(ne(target, -1.0), input, zero);
  return reduce_loss(margin_part + self_part, o.reduction(), "hinge_embedding_loss");
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             const MarginLossOptions& o) {
  const char* op = "cosine_embedding_loss";
  same_shape(input1, input2, op, "input1", "input2");
  if (input1.dim() != 1 && input1.dim() != 2)
    throw ShapeError(fmt::format("{}: inputs {} must be (N,D) or (D)", op, shape_str(input1.shape())));
  const int64_t d = input1.dim() - 1;
  const Shape want = d == 1 ? Shape{input1.size(0)} : Shape{};
  if (!target.defined() || target.shape() != want)
    throw ShapeError(fmt::format("{}: target {} must be {} (one label per pair)", op,
                                 target.defined() ? shape_str(target.shape()) : "undefined", shape_str(want)));
  constexpr double kEps = 1e-12;  // PyTorch's, added to each squared magnitude
  const Tensor dot = sum(input1 * input2, {d});
  const Tensor m1 = sum(input1 * input1, {d}) + kEps, m2 = sum(input2 * input2, {d}) + kEps;
  const Tensor cos = dot / sqrt(m1 * m2);
  const Tensor zero = zeros_like(cos);
  const Tensor pos = where(eq(target, 1.0), 1.0 - cos, zero);
  const Tensor neg = where(eq(target, -1.0), clamp_min0(cos - o.margin()), zero);
  return reduce_loss(pos + neg, o.reduction(), op);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const LossOptions& o) {
  same_shape(input, target, "soft_margin_loss");
  return reduce_loss(softplus_exact(-input * target), o.reduction(), "soft_margin_loss");
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const MultilabelSoftMarginLossOptions& o) {
  const char* op = "multilabel_soft_margin_loss";
  same_shape(input, target, op);
  if (input.dim() < 1) throw ShapeError(fmt::format("{}: input {} must be (N,C) or (C)", op, shape_str(input.shape())));
  Tensor loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input));
  if (o.weight().defined()) loss = loss * o.weight();
  const int64_t c = input.dim() - 1;
  return reduce_loss(sum(loss, {c}) / static_cast<double>(input.size(c)), o.reduction(), op);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& o) {
  const char* op = "multi_margin_loss";
  check_class_input(input, op);
  if (input.dim() > 2) throw ShapeError(fmt::format("{}: input {} must be (N,C) or (C)", op, shape_str(input.shape())));
  require(o.p() == 1 || o.p() == 2, fmt::format("{}: p {}: expected 1 or 2", op, o.p()));
  const std::vector<int64_t> t = class_targets(input, target, -100, op);
  const Tensor x = classes_last(input);  // (N,C)
  const int64_t n = x.size(0), c = x.size(1);
  check_class_weight(o.weight(), c, op);
  const std::vector<double> w = o.weight().defined() ? o.weight().to_vector() : std::vector<double>(c, 1.0);
  std::vector<double> onehot(static_cast<size_t>(n * c), 0.0), others(static_cast<size_t>(n * c), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    if (t[r] < 0 || t[r] >= c)
      throw ShapeError(fmt::format("{}: target {} at position {} is out of range for {} classes", op, t[r], r, c));
    onehot[r * c + t[r]] = 1;
    for (int64_t i = 0; i < c; ++i)
      if (i != t[r]) others[r * c + i] = w[t[r]] / c;  // the target's weight, the mean over C
  }
  const Tensor xy = sum(x * from_vector(onehot, {n, c}, x.dtype()), {-1}, true);  // (N,1)
  const Tensor z = x - xy + o.margin();
  Tensor h = where(gt(z, 0.0), z, zeros_like(z));  // z > 0 counts, as PyTorch
  if (o.p() == 2) h = h * h;
  Tensor loss = sum(h * from_vector(others, {n, c}, x.dtype()), {-1});
  if (input.dim() == 1) loss = reshape(loss, {});
  return reduce_loss(loss, o.reduction(), op);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const LossOptions& o) {
  const char* op = "multilabel_margin_loss";
  check_defined(input, op);
  check_defined_any(target, op);
  if (input.dim() < 1 || input.dim() > 2 || target.shape() != input.shape() || target.dtype() != Dtype::i64)
    throw ShapeError(fmt::format("{}: input {} must be (N,C) or (C) and target int64 of its shape, got {} {}", op,
                                 shape_str(input.shape()), dtype_name(target.dtype()), shape_str(target.shape())));
  const Tensor x = classes_last(input);  // (N,C)
  const int64_t n = x.size(0), c = x.size(1);
  const int64_t* pt = target.data<int64_t>();
  // every (listed j, unlisted i) pair of a row: 1 - x[j] + x[i] over C
  std::vector<int64_t> js, is, row_of;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<bool> listed(static_cast<size_t>(c), false);
    int64_t k = 0;
    for (; k < c && pt[r * c + k] >= 0; ++k) {
      const int64_t j = pt[r * c + k];
      if (j >= c)
        throw ShapeError(fmt::format("{}: target {} in row {} is out of range for {} classes", op, j, r, c));
      listed[j] = true;
    }
    for (int64_t q = 0; q < k; ++q)
      for (int64_t i = 0; i < c; ++i)
        if (!listed[i]) {
          js.push_back(r * c + pt[r * c + q]);
          is.push_back(r * c + i);
          row_of.push_back(r);
        }
  }
  Tensor loss;
  if (js.empty()) {
    loss = sum(x, {-1}) * 0.0;
  } else {
    const int64_t pairs = static_cast<int64_t>(js.size());
    const Tensor flat = reshape(x, {-1});
    const Tensor z = 1.0 - index_select(flat, 0, from_ints(js, {pairs})) + index_select(flat, 0, from_ints(is, {pairs}));
    const Tensor h = where(gt(z, 0.0), z, zeros_like(z));
    std::vector<double> rows(static_cast<size_t>(n * pairs), 0.0);  // (N, pairs): which row each pair adds to
    const Autocast full(Precision::f32);  // a loss's sums stay float32 under Autocast
    for (int64_t p = 0; p < pairs; ++p) rows[row_of[p] * pairs + p] = 1.0 / c;
    loss = reshape(matmul(from_vector(rows, {n, pairs}, x.dtype()), reshape(h, {pairs, 1})), {n});
  }
  if (input.dim() == 1) loss = reshape(loss, {});
  return reduce_loss(loss, o.reduction(), op);
}

namespace {

// What ctc_loss reads from its integer arguments, checked.
struct CtcProblem {
  int64_t T = 0, N = 0, C = 0, S = 0;  // frames, sequences, classes, longest target
  std::vector<int64_t> in_len, tgt_len;
  std::vector<std::vector<int64_t>> targets;  // each sequence's labels
};

std::vector<int64_t> ctc_lengths(const Tensor& t, int64_t N, bool batched, const char* what) {
  const Shape want = batched ? Shape{N} : Shape{};
  if (!t.defined() || t.dtype() != Dtype::i64 || t.shape() != want)
    throw ShapeError(fmt::format("ctc_loss: {} must be int64 {}, got {}", what, shape_str(want),
                                 t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) : "undefined"));
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

CtcProblem ctc_problem(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                       const Tensor& target_lengths, int64_t blank) {
  const char* op = "ctc_loss";
  check_defined(log_probs, op);
  const bool batched = log_probs.dim() == 3;
  if (log_probs.dim() != 2 && !batched)
    throw ShapeError("ctc_loss: log_probs must be (T,N,C) or (T,C), got " + shape_str(log_probs.shape()));
  CtcProblem p;
  p.T = log_probs.size(0), p.N = batched ? log_probs.size(1) : 1, p.C = log_probs.size(-1);
  if (blank < 0 || blank >= p.C) throw ShapeError(fmt::format("{}: blank {}: expected in [0, {})", op, blank, p.C));
  p.in_len = ctc_lengths(input_lengths, p.N, batched, "input_lengths");
  p.tgt_len = ctc_lengths(target_lengths, p.N, batched, "target_lengths");
  check_defined_any(targets, op);
  const bool padded = targets.dim() == (batched ? 2 : 1) && (!batched || targets.size(0) == p.N);
  int64_t total = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    if (p.in_len[n] < 1 || p.in_len[n] > p.T)
      throw ShapeError(fmt::format("{}: input_lengths[{}] = {}: expected in [1, {}]", op, n, p.in_len[n], p.T));
    // at most a row's labels, or all of the concatenated ones (which keeps the total in range)
    const int64_t cap = padded ? targets.size(-1) : targets.numel();
    if (p.tgt_len[n] < 0 || p.tgt_len[n] > cap)
      throw ShapeError(fmt::format("{}: target_lengths[{}] = {}: expected in [0, {}]", op, n, p.tgt_len[n], cap));
    total += p.tgt_len[n];
  }
  if (targets.dtype() != Dtype::i64 || (!padded && (targets.dim() != 1 || targets.numel() != total)))
    throw ShapeError(fmt::format("{}: targets must be int64 {} or the {} labels one after another, got {} {}", op,
                                 batched ? "(N,S)" : "(S)", total, dtype_name(targets.dtype()),
                                 shape_str(targets.shape())));
  const int64_t* t = targets.data<int64_t>();
  for (int64_t n = 0, at = 0; n < p.N; ++n) {
    const int64_t* row = padded ? t + n * targets.size(-1) : t + at;
    p.targets.emplace_back(row, row + p.tgt_len[n]);
    for (const int64_t label : p.targets.back())
      if (label < 0 || label >= p.C || label == blank)
        throw ShapeError(fmt::format("{}: target {} of sequence {}: expected in [0, {}) and not the blank {}", op,
                                     label, n, p.C, blank));
    at += p.tgt_len[n];
    p.S = std::max(p.S, p.tgt_len[n]);
  }
  return p;
}

// log(sum(exp(x))) along the last axis; the shift is a constant, so every
// order of gradient is the plain one.
Tensor ctc_logsumexp(const Tensor& x) {
  const Tensor m = max(x, {-1}, true).detach();
  return reshape(m, {x.size(0)}) + log(sum(exp(x - m), {-1}));
}

// The extended label sequences (blank, y1, blank, y2, ..., blank) of every
// sequence, padded to the longest, as masks over their L = 2S+1 states.
struct CtcStates {
  static constexpr double kNone = -1e30;  // log of an impossible state: finite, so exp() is exactly 0, never NaN
  int64_t L = 1;
  std::vector<int64_t> index;           // (N, L): the column of log_probs' (N*C) each state emits
  std::vector<double> skip, start, end;  // (N, L): 0 where a state may be skipped to / start / end, else kNone
  std::vector<double> feasible, scale;   // (N): 1 if some alignment fits the frames; 1 / max(S, 1)
};

CtcStates ctc_states(const CtcProblem& p, int64_t blank) {
  CtcStates st;
  const int64_t N = p.N, L = st.L = 2 * p.S + 1;
  const size_t cells = static_cast<size_t>(N * L);
  st.index.resize(cells), st.skip.assign(cells, st.kNone), st.start.assign(cells, st.kNone);
  st.end.assign(cells, st.kNone), st.feasible.resize(N), st.scale.resize(N);
  for (int64_t n = 0; n < N; ++n) {
    const auto& y = p.targets[n];
    const int64_t S = static_cast<int64_t>(y.size());
    int64_t repeats = 0;
    for (int64_t s = 0; s < L; ++s) {
      const bool label = s % 2 == 1 && s / 2 < S;
      st.index[n * L + s] = n * p.C + (label ? y[s / 2] : blank);
      if (label && s >= 3) (y[s / 2] != y[s / 2 - 1] ? st.skip[n * L + s] = 0 : ++repeats);
    }
    st.start[n * L] = 0, st.end[n * L + 2 * S] = 0;
    if (S > 0) st.start[n * L + 1] = 0, st.end[n * L + 2 * S - 1] = 0;
    st.feasible[n] = p.in_len[n] >= S + repeats ? 1.0 : 0.0;  // a repeated label needs a blank between
    st.scale[n] = 1.0 / static_cast<double>(std::max<int64_t>(S, 1));
  }
  return st;
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& o) {
  const CtcProblem p = ctc_problem(log_probs, targets, input_lengths, target_lengths, o.blank());
  const CtcStates st = ctc_states(p, o.blank());
  const int64_t N = p.N, L = st.L;
  const Dtype dt = log_probs.dtype();
  const Tensor lp = reshape(log_probs, {p.T, N * p.C});
  const Tensor emit = reshape(index_select(lp, 1, from_ints(st.index, {N * L})), {p.T, N, L});
  auto frame = [&](int64_t t) { return reshape(slice(emit, 0, t, t + 1), {N, L}); };
  const Tensor skip = from_vector(st.skip, {N, L}, dt), none = full({N, 2}, st.kNone, dt);
  // alpha[n, s]: log-probability of the alignments of frames 0..t that end in state s
  Tensor alpha = frame(0) + from_vector(st.start, {N, L}, dt);
  for (int64_t t = 1; t < p.T; ++t) {
    const Tensor step = L >= 2 ? concat({slice(none, 1, 0, 1), slice(alpha, 1, 0, L - 1)}, 1) : slice(none, 1, 0, 1);
    const Tensor jump = L >= 3 ? concat({none, slice(alpha, 1, 0, L - 2)}, 1) : slice(none, 1, 0, L);
    const Tensor paths = stack({alpha, step, jump + skip}, -1);  // (N, L, 3): stay, advance, skip a blank
    const Tensor next = reshape(ctc_logsumexp(reshape(paths, {N * L, 3})), {N, L}) + frame(t);
    std::vector<double> on(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) on[n] = t < p.in_len[n] ? 1.0 : 0.0;
    const Tensor live = from_vector(on, {N, 1}, dt);
    alpha = next * live + alpha * (1.0 - live);  // a sequence past its last frame keeps its alpha
  }
  Tensor loss = -ctc_logsumexp(alpha + from_vector(st.end, {N, L}, dt));  // (N)
  loss = where(from_vector(st.feasible, {N}, dt), loss, full({N}, o.zero_infinity() ? 0.0 : kInf, dt));
  if (log_probs.dim() == 2) loss = reshape(loss, {});
  if (o.reduction() == Reduction::mean) return mean(loss * from_vector(st.scale, loss.shape(), dt));
  return reduce_loss(loss, o.reduction(), "ctc_loss");
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, const PairwiseDistanceOptions& o) {
  check_defined(x1, "pairwise_distance");
  check_defined(x2, "pairwise_distance");
  const Tensor d = x1 - x2 + o.eps();
  return vector_norm(d, o.p(), {-1}, o.keepdim());
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, const CosineSimilarityOptions& o) {
  const char* op = "cosine_similarity";
  check_defined(x1, op);
  check_defined(x2, op);
  const Shape s = detail::broadcast_shapes(x1.shape(), x2.shape(), op);
  const int64_t dim = normalize_axis(o.dim(), static_cast<int64_t>(s.size()), op);
  // sum((x1 / max(|x1|, eps)) (x2 / max(|x2|, eps))), as PyTorch 1.13: each
  // norm raised to eps where below it, the gradient passing as if it were not
  const Tensor a = broadcast_to(x1, s), b = broadcast_to(x2, s);
  auto norm = [&](const Tensor& t) { return raised_to(vector_norm(t, 2.0, {dim}, true), o.eps()); };
  return sum((a / norm(a)) * (b / norm(b)), {dim});
}

Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const TripletMarginWithDistanceLossOptions& o) {
  const char* op = "triplet_margin_with_distance_loss";
  require(o.margin() > 0, fmt::format("{}: margin {}: expected > 0", op, o.margin()));
  const DistanceFunction dist = o.distance_function() ? o.distance_function() : [](const Tensor& a, const Tensor& b) {
    return pairwise_distance(a, b);
  };
  const Tensor dp = dist(anchor, positive);
  Tensor dn = dist(anchor, negative);
  if (o.swap()) dn = -maximum(-dn, -dist(positive, negative));
  return reduce_loss(clamp_min0(dp - dn + o.margin()), o.reduction(), op);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o) {
  const char* op = "triplet_margin_loss";
  same_shape(anchor, positive, op, "anchor", "positive");
  same_shape(anchor, negative, op, "anchor", "negative");
  const PairwiseDistanceOptions d = PairwiseDistanceOptions().p(o.p()).eps(o.eps());
  const Tensor dp = pairwise_distance(anchor, positive, d);
  Tensor dn = pairwise_distance(anchor, negative, d);
  if (o.swap()) dn = -maximum(-dn, -pairwise_distance(positive, negative, d));
  return reduce_loss(clamp_min0(dp - dn + o.margin()), o.reduction(), op);
}

}  // namespace xg
