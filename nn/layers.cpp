#include "nn/layers.h"

#include <cmath>

#include <fmt/format.h>

#include "autograd/require.h"
#include "nn/init.h"

namespace xg::nn {

namespace {
void need_input(const Module& m, const Tensor& x) {
  if (!x.defined()) throw ShapeError(m.describe() + ": input is undefined");
}
}  // namespace

// ---- local response norm ----------------------------------------------------------

LocalResponseNorm::LocalResponseNorm(int64_t size, double alpha, double beta, double k)
    : size_(size), alpha_(alpha), beta_(beta), k_(k) {
  require(size >= 1, fmt::format("LocalResponseNorm: size {}: expected >= 1", size));
}
Tensor LocalResponseNorm::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return local_response_norm(x, size_, alpha_, beta_, k_);
}
std::string LocalResponseNorm::type_name() const {
  return fmt::format("LocalResponseNorm({}, alpha={:g}, beta={:g}, k={:g})", size_, alpha_, beta_, k_);
}

// ---- cross-map response norm, bags ------------------------------------------------------

CrossMapLRN2d::CrossMapLRN2d(int64_t size, double alpha, double beta, double k)
    : size_(size), alpha_(alpha), beta_(beta), k_(k) {
  require(size >= 1, fmt::format("CrossMapLRN2d: size {}: expected >= 1", size));
}
Tensor CrossMapLRN2d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return cross_map_lrn2d(x, size_, alpha_, beta_, k_);
}
std::string CrossMapLRN2d::type_name() const {
  return fmt::format("CrossMapLRN2d({}, alpha={:g}, beta={:g}, k={:g})", size_, alpha_, beta_, k_);
}

EmbeddingBag::EmbeddingBag(int64_t num, int64_t dim, Generator& gen, const std::string& mode, bool include_last_offset,
                           std::optional<int64_t> padding_idx)
    : num_(num), dim_(dim), mode_(mode), include_last_offset_(include_last_offset) {
  require(num >= 1 && dim >= 1, fmt::format("EmbeddingBag: num_embeddings {}, embedding_dim {}: expected >= 1", num, dim));
  require(mode == "sum" || mode == "mean" || mode == "max",
          "EmbeddingBag: mode '" + mode + "': expected 'sum', 'mean' or 'max'");
  padding_idx_ = padding_index("EmbeddingBag", padding_idx, num);
  weight_ = register_parameter("weight", empty({num, dim}));
  normal_(weight_, gen, 0.0, 1.0);
  if (padding_idx_)  // the padding row zeroed, as PyTorch's reset_parameters does
    for (int64_t c = 0; c < dim; ++c) weight_.set({*padding_idx_, c}, 0.0);
}
Tensor EmbeddingBag::forward(const Tensor& ids, const Tensor& offsets, const Tensor& per_sample_weights) {
  const auto named = scope();
  need_input(*this, ids);
  return embedding_bag(ids, weight_, offsets, mode_, per_sample_weights, include_last_offset_, padding_idx_);
}
std::string EmbeddingBag::type_name() const { return fmt::format("EmbeddingBag({}, {}, mode='{}')", num_, dim_, mode_); }

// ---- instance norm ----------------------------------------------------------------------

InstanceNorm::InstanceNorm(std::string name, int64_t rank, int64_t c, double eps, double momentum, bool affine,
                           bool track_running_stats)
    : name_(std::move(name)), rank_(rank), c_(c), eps_(eps), affine_(affine) {
  require(c >= 1, fmt::format("{}: num_features {}: expected >= 1", name_, c));
  require(eps > 0, fmt::format("{}: eps {}: expected > 0", name_, eps));
  require(momentum >= 0 && momentum <= 1, fmt::format("{}: momentum {}: expected in [0, 1]", name_, momentum));
  require(!track_running_stats, name_ + ": track_running_stats (running statistics for eval mode) is not built; "
                                        "the input's statistics are used in both modes, PyTorch's default");
  if (affine) {
    weight_ = register_parameter("weight", ones({c}));
    bias_ = register_parameter("bias", zeros({c}));
  }
}

std::string InstanceNorm::type_name() const {
  return fmt::format("{}({}, eps={:g}, affine={})", name_, c_, eps_, affine_ ? "True" : "False");
}

Tensor InstanceNorm::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  if (x.dim() != rank_ && x.dim() != rank_ - 1)
    throw ShapeError(fmt::format("{}: expected an input of {} dimensions (N,C,...) or {} (C,...), got {}", describe(),
                                 rank_, rank_ - 1, shape_str(x.shape())));
  const bool unbatched = x.dim() == rank_ - 1;
  const Tensor in = unbatched ? unsqueeze(x, 0) : x;
  if (in.size(1) != c_)
    throw ShapeError(fmt::format("{}: expected {} channels, got input {}", describe(), c_, shape_str(x.shape())));
  const Tensor y = instance_norm(in, weight_, bias_, eps_);
  return unbatched ? squeeze(y, 0) : y;
}

InstanceNorm1d::InstanceNorm1d(int64_t c, double eps, double m, bool affine, bool track)
    : InstanceNorm("InstanceNorm1d", 3, c, eps, m, affine, track) {}
InstanceNorm2d::InstanceNorm2d(int64_t c, double eps, double m, bool affine, bool track)
    : InstanceNorm("InstanceNorm2d", 4, c, eps, m, affine, track) {}
InstanceNorm3d::InstanceNorm3d(int64_t c, double eps, double m, bool affine, bool track)
    : InstanceNorm("InstanceNorm3d", 5, c, eps, m, affine, track) {}

// ---- bilinear, unfold, fold -------------------------------------------------------------

Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, Generator& gen, bool bias) : in1_(in1), in2_(in2), out_(out) {
  require(in1 >= 1 && in2 >= 1 && out >= 1,
          fmt::format("Bilinear: in1_features {}, in2_features {}, out_features {}: expected each >= 1", in1, in2, out));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in1));
  weight_ = register_parameter("weight", empty({out, in1, in2}));
  uniform_(weight_, gen, -bound, bound);
  if (bias) {
    bias_ = register_parameter("bias", empty({out}));
    uniform_(bias_, gen, -bound, bound);
  }
}
Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) {
  const auto named = scope();
  return bilinear(x1, x2, weight_, bias_);
}
std::string Bilinear::type_name() const { return fmt::format("Bilinear(in1={}, in2={}, out={})", in1_, in2_, out_); }

Unfold::Unfold(const UnfoldOptions& o) : o_(o) {}
Tensor Unfold::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return unfold2d(x, o_);
}
std::string Unfold::type_name() const {
  return fmt::format("Unfold(kernel_size={}, dilation={}, padding={}, stride={})", window_text(o_.kernel_size()),
                     window_text(o_.dilation()), window_text(o_.padding()), window_text(o_.stride()));
}

Fold::Fold(const FoldOptions& o) : o_(o) {}
Tensor Fold::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return fold2d(x, o_);
}
std::string Fold::type_name() const {
  return fmt::format("Fold(output_size={}, kernel_size={}, dilation={}, padding={}, stride={})",
                     window_text(o_.output_size()), window_text(o_.kernel_size()), window_text(o_.dilation()),
                     window_text(o_.padding()), window_text(o_.stride()));
}

// ---- dropouts --------------------------------------------------------------------------

DropoutModule::DropoutModule(std::string name, Fn fn, double p, std::shared_ptr<Generator> gen)
    : name_(std::move(name)), fn_(fn), p_(p), gen_(std::move(gen)) {
  require(p >= 0 && p <= 1, fmt::format("{}: p {}: expected in [0, 1]", name_, p));
}
Tensor DropoutModule::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return fn_(x, p_, is_training(), gen_.get());
}
std::string DropoutModule::type_name() const { return fmt::format("{}(p={:g})", name_, p_); }

Dropout1d::Dropout1d(double p, std::shared_ptr<Generator> gen) : DropoutModule("Dropout1d", dropout1d, p, gen) {}
Dropout2d::Dropout2d(double p, std::shared_ptr<Generator> gen) : DropoutModule("Dropout2d", dropout2d, p, gen) {}
Dropout3d::Dropout3d(double p, std::shared_ptr<Generator> gen) : DropoutModule("Dropout3d", dropout3d, p, gen) {}
AlphaDropout::AlphaDropout(double p, std::shared_ptr<Generator> gen)
    : DropoutModule("AlphaDropout", alpha_dropout, p, gen) {}
FeatureAlphaDropout::FeatureAlphaDropout(double p, std::shared_ptr<Generator> gen)
    : DropoutModule("FeatureAlphaDropout", feature_alpha_dropout, p, gen) {}

}  // namespace xg::nn
