#include "nn/adaptive_softmax.h"

#include <cmath>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg::nn {

AdaptiveLogSoftmaxWithLoss::AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes,
                                                       std::vector<int64_t> cutoffs, Generator& gen,
                                                       double div_value, bool head_bias)
    : in_features_(in_features), n_classes_(n_classes), cutoffs_(std::move(cutoffs)) {
  const char* name = "AdaptiveLogSoftmaxWithLoss";
  require(in_features >= 1 && n_classes >= 2,
          fmt::format("{}: in_features {}, n_classes {}: expected >= 1 and >= 2", name, in_features, n_classes));
  require(!cutoffs_.empty(), fmt::format("{}: cutoffs is empty: expected at least one", name));
  for (size_t i = 0; i < cutoffs_.size(); ++i)
    require(cutoffs_[i] >= 1 && cutoffs_[i] < n_classes && (i == 0 || cutoffs_[i] > cutoffs_[i - 1]),
            fmt::format("{}: cutoffs [{}]: expected increasing, each in [1, {}]", name, fmt::join(cutoffs_, ", "),
                        n_classes - 1));
  require(div_value > 0 && std::isfinite(div_value), fmt::format("{}: div_value {}: expected > 0", name, div_value));
  const int64_t clusters = static_cast<int64_t>(cutoffs_.size());
  cutoffs_.push_back(n_classes);
  head = register_module("head", std::make_shared<Linear>(in_features, cutoffs_[0] + clusters, gen, head_bias));
  tail = register_module<ModuleList>("tail");
  for (int64_t i = 0; i < clusters; ++i) {
    // PyTorch's int(in_features // div_value ** (i + 1))
    const auto hidden = static_cast<int64_t>(std::floor(in_features / std::pow(div_value, i + 1)));
    require(hidden >= 1, fmt::format("{}: cluster {}'s hidden size in_features // div_value^{} = {}: expected >= 1 "
                                     "(a smaller div_value or fewer cutoffs)",
                                     name, i, i + 1, hidden));
    auto proj = std::make_shared<Sequential>();
    proj->append<Linear>(in_features, hidden, gen, false).append<Linear>(hidden, cutoffs_[i + 1] - cutoffs_[i], gen,
                                                                          false);
    tail->push_back(proj);
  }
}

std::string AdaptiveLogSoftmaxWithLoss::type_name() const {
  const std::vector<int64_t> given(cutoffs_.begin(), cutoffs_.end() - 1);
  return fmt::format("AdaptiveLogSoftmaxWithLoss(in_features={}, n_classes={}, cutoffs=[{}])", in_features_,
                     n_classes_, fmt::join(given, ", "));
}

Tensor AdaptiveLogSoftmaxWithLoss::rows(const Tensor& input) const {
  if (!input.defined() || input.dim() < 1 || input.dim() > 2 || input.size(-1) != in_features_)
    throw ShapeError(fmt::format("{}: input {}: expected (N, {}) or ({})", describe(),
                                 input.defined() ? shape_str(input.shape()) : "undefined", in_features_, in_features_));
  return input.dim() == 1 ? reshape(input, {1, in_features_}) : input;
}

ASMoutput AdaptiveLogSoftmaxWithLoss::forward(const Tensor& input, const Tensor& target) {
  const auto named = scope();
  const Tensor x = rows(input);
  const int64_t N = x.size(0), H = head->out_features();
  if (!target.defined() || target.dtype() != Dtype::i64 || target.numel() != N || target.dim() != input.dim() - 1)
    throw ShapeError(fmt::format("{}: target must be int64 {} for input {}, got {}", describe(),
                                 input.dim() == 2 ? fmt::format("({})", N) : "()", shape_str(input.shape()),
                                 target.defined() ? shape_str(target.shape()) : "undefined"));
  const int64_t* y = target.data<int64_t>();
  // each row's column of the head, and its position among the clusters' picks (0: the shortlist's zero)
  std::vector<int64_t> head_index(N), pick(N, 0);
  std::vector<Tensor> parts{zeros({1}, x.dtype())};
  int64_t placed = 1;
  for (int64_t n = 0; n < N; ++n)
    if (y[n] < 0 || y[n] >= n_classes_)
      throw ShapeError(fmt::format("{}: target {} of row {}: expected in [0, {})", describe(), y[n], n, n_classes_));
  for (size_t c = 0; c < cutoffs_.size(); ++c) {
    const int64_t low = c == 0 ? 0 : cutoffs_[c - 1], high = cutoffs_[c];
    std::vector<int64_t> members, local;
    for (int64_t n = 0; n < N; ++n)
      if (y[n] >= low && y[n] < high) {
        head_index[n] = n * H + (c == 0 ? y[n] : cutoffs_[0] + static_cast<int64_t>(c) - 1);
        if (c > 0) pick[n] = placed + static_cast<int64_t>(members.size());
        members.push_back(n), local.push_back(static_cast<int64_t>(local.size()) * (high - low) + y[n] - low);
      }
    if (c == 0 || members.empty()) continue;
    const auto k = static_cast<int64_t>(members.size());
    const Tensor logits = tail->at<Sequential>(c - 1)->forward(index_select(x, 0, from_ints(members, {k})));
    parts.push_back(index_select(reshape(log_softmax(logits, 1), {-1}), 0, from_ints(local, {k})));
    placed += k;
  }
  const Tensor head_lp = reshape(log_softmax(head->forward(x), 1), {-1});
  Tensor output = index_select(head_lp, 0, from_ints(head_index, {N})) +
                  index_select(concat(parts, 0), 0, from_ints(pick, {N}));
  const Tensor loss = mean(-output);
  if (input.dim() == 1) output = reshape(output, {});
  return {output, loss};
}

Tensor AdaptiveLogSoftmaxWithLoss::log_prob(const Tensor& input) {
  const auto named = scope();
  const Tensor x = rows(input);
  const int64_t shortlist = cutoffs_[0];
  const Tensor head_lp = log_softmax(head->forward(x), 1);  // (N, shortlist + clusters)
  std::vector<Tensor> columns{slice(head_lp, 1, 0, shortlist)};
  for (size_t c = 1; c < cutoffs_.size(); ++c) {
    const Tensor cluster_lp = log_softmax(tail->at<Sequential>(c - 1)->forward(x), 1);
    columns.push_back(cluster_lp + slice(head_lp, 1, shortlist + c - 1, shortlist + c));
  }
  const Tensor out = concat(columns, 1);
  return input.dim() == 1 ? reshape(out, {n_classes_}) : out;
}

Tensor AdaptiveLogSoftmaxWithLoss::predict(const Tensor& input) {
  const Tensor lp = log_prob(input);
  return from_ints(argmax(lp.detach(), -1), input.dim() == 1 ? Shape{} : Shape{lp.size(0)});
}

}  // namespace xg::nn
