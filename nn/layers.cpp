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

// ---- pooling ----------------------------------------------------------------------

AvgPool1d::AvgPool1d(int64_t k, int64_t s, int64_t p, bool ceil_mode, bool count_include_pad)
    : k_(k), s_(s), p_(p), ceil_(ceil_mode), include_(count_include_pad) {}
Tensor AvgPool1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return avg_pool1d(x, k_, s_, p_, ceil_, include_);
}
std::string AvgPool1d::type_name() const { return fmt::format("AvgPool1d(kernel_size={})", k_); }

MaxPool1d::MaxPool1d(int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode)
    : k_(k), s_(s), p_(p), d_(d), ceil_(ceil_mode) {}
Tensor MaxPool1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return max_pool1d(x, k_, s_, p_, d_, ceil_);
}
std::string MaxPool1d::type_name() const { return fmt::format("MaxPool1d(kernel_size={})", k_); }

AdaptiveAvgPool1d::AdaptiveAvgPool1d(int64_t out) : out_(out) {
  require(out >= 1, fmt::format("AdaptiveAvgPool1d: output_size {}: expected >= 1", out));
}
Tensor AdaptiveAvgPool1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return adaptive_avg_pool1d(x, out_);
}
std::string AdaptiveAvgPool1d::type_name() const { return fmt::format("AdaptiveAvgPool1d(output_size={})", out_); }

AdaptiveMaxPool1d::AdaptiveMaxPool1d(int64_t out) : out_(out) {
  require(out >= 1, fmt::format("AdaptiveMaxPool1d: output_size {}: expected >= 1", out));
}
Tensor AdaptiveMaxPool1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return adaptive_max_pool1d(x, out_);
}
std::string AdaptiveMaxPool1d::type_name() const { return fmt::format("AdaptiveMaxPool1d(output_size={})", out_); }

AdaptiveMaxPool2d::AdaptiveMaxPool2d(std::array<int64_t, 2> out) : out_(out) {
  require(out[0] >= 1 && out[1] >= 1, "AdaptiveMaxPool2d: output_size " + pair_text(out) + ": expected each >= 1");
}
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return adaptive_max_pool2d(x, out_);
}
std::string AdaptiveMaxPool2d::type_name() const { return "AdaptiveMaxPool2d(output_size=" + pair_text(out_) + ")"; }

LPPool1d::LPPool1d(double p, int64_t k, int64_t s, bool ceil_mode) : p_(p), k_(k), s_(s), ceil_(ceil_mode) {
  require(p > 0, fmt::format("LPPool1d: norm_type {}: expected > 0", p));
}
Tensor LPPool1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return lp_pool1d(x, p_, k_, s_, ceil_);
}
std::string LPPool1d::type_name() const { return fmt::format("LPPool1d(norm_type={:g}, kernel_size={})", p_, k_); }

LPPool2d::LPPool2d(double p, std::array<int64_t, 2> k, std::array<int64_t, 2> s, bool ceil_mode)
    : p_(p), k_(k), s_(s), ceil_(ceil_mode) {
  require(p > 0, fmt::format("LPPool2d: norm_type {}: expected > 0", p));
}
Tensor LPPool2d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return lp_pool2d(x, p_, k_, s_, ceil_);
}
std::string LPPool2d::type_name() const {
  return fmt::format("LPPool2d(norm_type={:g}, kernel_size={})", p_, pair_text(k_));
}

AvgPool3d::AvgPool3d(std::array<int64_t, 3> k, std::array<int64_t, 3> s, std::array<int64_t, 3> p, bool ceil_mode,
                     bool count_include_pad)
    : k_(k), s_(s), p_(p), ceil_(ceil_mode), include_(count_include_pad) {}
Tensor AvgPool3d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return avg_pool3d(x, k_, s_, p_, ceil_, include_);
}
std::string AvgPool3d::type_name() const { return "AvgPool3d"; }

MaxPool3d::MaxPool3d(std::array<int64_t, 3> k, std::array<int64_t, 3> s, std::array<int64_t, 3> p,
                     std::array<int64_t, 3> d, bool ceil_mode)
    : k_(k), s_(s), p_(p), d_(d), ceil_(ceil_mode) {}
Tensor MaxPool3d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return max_pool3d(x, k_, s_, p_, d_, ceil_);
}
std::string MaxPool3d::type_name() const { return "MaxPool3d"; }

AdaptivePool3d::AdaptivePool3d(bool max, std::array<int64_t, 3> out) : max_(max), out_(out) {
  require(out[0] >= 1 && out[1] >= 1 && out[2] >= 1,
          fmt::format("{}: output_size ({}, {}, {}): expected each >= 1", type_name(), out[0], out[1], out[2]));
}
Tensor AdaptivePool3d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return max_ ? adaptive_max_pool3d(x, out_) : adaptive_avg_pool3d(x, out_);
}
std::string AdaptivePool3d::type_name() const { return max_ ? "AdaptiveMaxPool3d" : "AdaptiveAvgPool3d"; }

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

// ---- unpooling, cross-map response norm, bags, 3-D convolution --------------------------

MaxUnpool::MaxUnpool(std::string name, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p)
    : name_(std::move(name)), k_(std::move(k)), s_(std::move(s)), p_(std::move(p)) {
  for (size_t i = 0; i < k_.size(); ++i) {
    if (s_[i] == 0) s_[i] = k_[i];
    require(k_[i] >= 1 && s_[i] >= 1 && p_[i] >= 0,
            fmt::format("{}: kernel_size {}, stride {}, padding {}: expected kernel and stride >= 1, padding >= 0",
                        name_, k_[i], s_[i], p_[i]));
  }
}
Tensor MaxUnpool::forward(const Tensor& x, const Tensor& indices, const Shape& output_size) {
  const auto named = scope();
  need_input(*this, x);
  const size_t dims = k_.size();
  if (x.dim() != static_cast<int64_t>(dims) + 2)
    throw ShapeError(fmt::format("{}: expected an input (N,C) and {} spatial dimensions, got {}", describe(), dims,
                                 shape_str(x.shape())));
  Shape out = output_size;
  if (out.empty())
    for (size_t i = 0; i < dims; ++i) out.push_back((x.size(2 + i) - 1) * s_[i] - 2 * p_[i] + k_[i]);
  return max_unpool(x, indices, out);
}
std::string MaxUnpool::type_name() const { return fmt::format("{}(kernel_size=({}))", name_, fmt::join(k_, ", ")); }

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
                           int64_t padding_idx)
    : num_(num), dim_(dim), padding_idx_(padding_idx), mode_(mode), include_last_offset_(include_last_offset) {
  require(num >= 1 && dim >= 1, fmt::format("EmbeddingBag: num_embeddings {}, embedding_dim {}: expected >= 1", num, dim));
  require(mode == "sum" || mode == "mean" || mode == "max",
          "EmbeddingBag: mode '" + mode + "': expected 'sum', 'mean' or 'max'");
  require(padding_idx >= -1 && padding_idx < num,
          fmt::format("EmbeddingBag: padding_idx {}: expected in [0, {}) or -1 for none", padding_idx, num));
  weight_ = register_parameter("weight", empty({num, dim}));
  normal_(weight_, gen, 0.0, 1.0);
}
Tensor EmbeddingBag::forward(const Tensor& ids, const Tensor& offsets, const Tensor& per_sample_weights) {
  const auto named = scope();
  need_input(*this, ids);
  return embedding_bag(ids, weight_, offsets, mode_, per_sample_weights, include_last_offset_, padding_idx_);
}
std::string EmbeddingBag::type_name() const { return fmt::format("EmbeddingBag({}, {}, mode='{}')", num_, dim_, mode_); }

Conv3d::Conv3d(int64_t in, int64_t out, std::array<int64_t, 3> k, Generator& gen, std::array<int64_t, 3> s,
               std::array<int64_t, 3> p, std::array<int64_t, 3> d, int64_t groups, bool bias)
    : in_(in), out_(out), groups_(groups), s_(s), p_(p), d_(d) {
  require(in >= 1 && out >= 1 && groups >= 1 && in % groups == 0 && out % groups == 0 && k[0] >= 1 && k[1] >= 1 &&
              k[2] >= 1,
          fmt::format("Conv3d: in {}, out {}, groups {}: expected sizes >= 1 and groups dividing in and out", in, out,
                      groups));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in / groups * k[0] * k[1] * k[2]));
  weight_ = register_parameter("weight", empty({out, in / groups, k[0], k[1], k[2]}));
  uniform_(weight_, gen, -bound, bound);
  if (bias) {
    bias_ = register_parameter("bias", empty({out}));
    uniform_(bias_, gen, -bound, bound);
  }
}
Tensor Conv3d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return conv3d(x, weight_, bias_, s_, p_, d_, groups_);
}
std::string Conv3d::type_name() const { return fmt::format("Conv3d(in={}, out={})", in_, out_); }

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

// ---- bilinear, unfold, fold, transposed 1-D convolution -------------------------------

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

Unfold::Unfold(std::array<int64_t, 2> k, const Conv2dOptions& o) : k_(k), o_(o) {}
Tensor Unfold::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  return unfold2d(x, k_, o_);
}
std::string Unfold::type_name() const { return "Unfold(kernel_size=" + pair_text(k_) + ")"; }

Fold::Fold(std::array<int64_t, 2> out, std::array<int64_t, 2> k, const Conv2dOptions& o) : out_(out), k_(k), o_(o) {}
Tensor Fold::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  if (x.dim() != 3 || x.size(1) % (k_[0] * k_[1]) != 0)
    throw ShapeError(fmt::format("{}: expected columns (N, C*{}, L), got {}", describe(), k_[0] * k_[1],
                                 shape_str(x.shape())));
  return fold2d(x, {x.size(0), x.size(1) / (k_[0] * k_[1]), out_[0], out_[1]}, k_, o_);
}
std::string Fold::type_name() const {
  return "Fold(output_size=" + pair_text(out_) + ", kernel_size=" + pair_text(k_) + ")";
}

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, int64_t k, Generator& gen, int64_t stride, int64_t padding,
                                 int64_t output_padding, int64_t groups, bool bias, int64_t dilation)
    : in_(in), out_(out), k_(k) {
  require(in >= 1 && out >= 1 && k >= 1 && groups >= 1 && in % groups == 0 && out % groups == 0,
          fmt::format("ConvTranspose1d: in {}, out {}, kernel_size {}, groups {}: expected sizes >= 1 and groups "
                      "dividing in and out",
                      in, out, k, groups));
  o_.stride = {1, stride};
  o_.padding = {0, padding};
  o_.output_padding = {0, output_padding};
  o_.dilation = {1, dilation};
  o_.groups = groups;
  // PyTorch's fan-in for a transposed convolution: the weight's second dimension times the kernel
  const double bound = 1.0 / std::sqrt(static_cast<double>(out / groups * k));
  weight_ = register_parameter("weight", empty({in, out / groups, k}));
  uniform_(weight_, gen, -bound, bound);
  if (bias) {
    bias_ = register_parameter("bias", empty({out}));
    uniform_(bias_, gen, -bound, bound);
  }
}
Tensor ConvTranspose1d::forward(const Tensor& x) {
  const auto named = scope();
  need_input(*this, x);
  if (x.dim() != 3 || x.size(1) != in_)
    throw ShapeError(fmt::format("{}: expected an input (N, {}, L), got {}", describe(), in_, shape_str(x.shape())));
  return squeeze(conv_transpose2d(unsqueeze(x, 2), unsqueeze(weight_, 2), bias_, o_), 2);
}
std::string ConvTranspose1d::type_name() const {
  return fmt::format("ConvTranspose1d(in={}, out={}, kernel_size={})", in_, out_, k_);
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
