// The rest of torch.nn.functional's layers, composed of xgrad's ops (so
// every order of gradient follows from theirs): 1-D pooling on the 2-D ops
// with a height of 1, adaptive max pooling, power-average pooling, instance
// norm, the bilinear form and the channel-wise and alpha dropouts.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/detail/window.h"
#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg {

namespace {

void check_rank(const Tensor& x, int64_t rank, const char* op, const char* layout) {
  check_defined(x, op);
  if (x.dim() != rank) throw ShapeError(fmt::format("{}: expected an input {}, got {}", op, layout, shape_str(x.shape())));
}

// [floor(i n / out), ceil((i + 1) n / out)): the window of output i (adaptive pooling).
std::pair<int64_t, int64_t> adaptive_window(int64_t i, int64_t n, int64_t out) {
  return {i * n / out, ((i + 1) * n + out - 1) / out};
}

}  // namespace

// ---- 1-D pooling and adaptive max pooling ------------------------------------------

namespace {

// A 1-D window's options on a height of 1 (checked as 1-D first, so that the
// messages name the 1-D op and its own values).
template <class Options2, class Options1>
Options2 height_one(const char* op, const Tensor& x, const Options1& o) {
  detail::window_axes(op, {x.size(2)}, detail::spec_of(o));
  return Options2({1, o.kernel_size()[0]}).stride({1, o.stride()[0]}).padding({0, o.padding()[0]}).ceil_mode(o.ceil_mode());
}

}  // namespace

Tensor avg_pool1d(const Tensor& x, const AvgPool1dOptions& o) {
  check_rank(x, 3, "avg_pool1d", "(N,C,L)");
  auto o2 = height_one<AvgPool2dOptions>("avg_pool1d", x, o).count_include_pad(o.count_include_pad());
  return squeeze(avg_pool2d(unsqueeze(x, 2), o2.divisor_override(o.divisor_override())), 2);
}

Tensor max_pool1d(const Tensor& x, const MaxPool1dOptions& o) {
  check_rank(x, 3, "max_pool1d", "(N,C,L)");
  const auto o2 = height_one<MaxPool2dOptions>("max_pool1d", x, o).dilation({1, o.dilation()[0]});
  return squeeze(max_pool2d(unsqueeze(x, 2), o2), 2);
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  check_rank(x, 3, "adaptive_avg_pool1d", "(N,C,L)");
  return squeeze(adaptive_avg_pool2d(unsqueeze(x, 2), {1, output_size}), 2);
}

Tensor adaptive_max_pool2d(const Tensor& x, ExpandingArray<2> output_size) {
  check_rank(x, 4, "adaptive_max_pool2d", "(N,C,H,W)");
  const int64_t H = x.size(2), W = x.size(3), Ho = output_size[0], Wo = output_size[1];
  detail::check_at_least("adaptive_max_pool2d", "output_size", detail::values(output_size), 1);
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < Ho; ++i) {
    const auto [h0, h1] = adaptive_window(i, H, Ho);
    std::vector<Tensor> cells;
    for (int64_t j = 0; j < Wo; ++j) {
      const auto [w0, w1] = adaptive_window(j, W, Wo);
      cells.push_back(max(slice(slice(x, 2, h0, h1), 3, w0, w1), {2, 3}, true));  // (N,C,1,1)
    }
    rows.push_back(concat(cells, 3));
  }
  return concat(rows, 2);  // (N,C,Ho,Wo)
}

Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size) {
  check_rank(x, 3, "adaptive_max_pool1d", "(N,C,L)");
  return squeeze(adaptive_max_pool2d(unsqueeze(x, 2), {1, output_size}), 2);
}

Tensor lp_pool2d(const Tensor& x, const LPPool2dOptions& o) {
  check_rank(x, 4, "lp_pool2d", "(N,C,H,W)");
  require(o.norm_type() > 0, fmt::format("lp_pool2d: norm_type {}: expected > 0", o.norm_type()));
  // PyTorch's: (the window's mean of x^p times its size)^(1/p), a negative
  // mean (odd p) clamped to 0
  const auto& k = o.kernel_size();
  const Tensor m = avg_pool2d(pow(x, o.norm_type()), AvgPool2dOptions(k).stride(o.stride()).ceil_mode(o.ceil_mode()));
  return pow(relu(m) * static_cast<double>(k[0] * k[1]), 1.0 / o.norm_type());
}

Tensor lp_pool1d(const Tensor& x, const LPPool1dOptions& o) {
  check_rank(x, 3, "lp_pool1d", "(N,C,L)");
  require(o.norm_type() > 0, fmt::format("lp_pool1d: norm_type {}: expected > 0", o.norm_type()));
  const int64_t k = o.kernel_size()[0], s = o.stride()[0];
  detail::window_axes("lp_pool1d", {x.size(2)}, {{k}, {s}, {0}, {1}, {}, o.ceil_mode(), true});
  const auto o2 = LPPool2dOptions(o.norm_type(), {1, k}).stride({1, s}).ceil_mode(o.ceil_mode());
  return squeeze(lp_pool2d(unsqueeze(x, 2), o2), 2);
}

// ---- 3-D pooling: separable, (H, W) by the 2-D op, then D by the 1-D one ----------

namespace {

// x (N,C,D,H,W): f2 on (N, C D, H, W), then f1 along D on (N, C Ho Wo, D).
template <class F2, class F1>
Tensor separable3d(const Tensor& x, const char* op, F2 f2, F1 f1) {
  check_rank(x, 5, op, "(N,C,D,H,W)");
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2);
  const Tensor hw = f2(reshape(x, {N, C * D, x.size(3), x.size(4)}));  // (N, C D, Ho, Wo)
  const int64_t Ho = hw.size(2), Wo = hw.size(3);
  const Tensor cols = reshape(permute(reshape(hw, {N, C, D, Ho * Wo}), {0, 1, 3, 2}), {N, C * Ho * Wo, D});
  const Tensor d = f1(cols);  // (N, C Ho Wo, Do)
  const int64_t Do = d.size(2);
  return reshape(permute(reshape(d, {N, C, Ho * Wo, Do}), {0, 1, 3, 2}), {N, C, Do, Ho, Wo});
}

}  // namespace

Tensor avg_pool3d(const Tensor& x, const AvgPool3dOptions& o) {
  check_rank(x, 5, "avg_pool3d", "(N,C,D,H,W)");
  detail::window_axes("avg_pool3d", {x.size(2), x.size(3), x.size(4)}, detail::spec_of(o));
  const auto &k = o.kernel_size(), &s = o.stride(), &p = o.padding();
  const auto divisor = o.divisor_override();
  // mean over a box = mean over D of the (H, W) means, padding counted or not
  // per axis alike; with a divisor, the sum over D of the (H, W) sums, divided
  auto o2 = AvgPool2dOptions({k[1], k[2]}).stride({s[1], s[2]}).padding({p[1], p[2]});
  auto o1 = AvgPool1dOptions(k[0]).stride(s[0]).padding(p[0]);
  o2.ceil_mode(o.ceil_mode()).count_include_pad(o.count_include_pad());
  o1.ceil_mode(o.ceil_mode()).count_include_pad(o.count_include_pad()).divisor_override(divisor);
  if (divisor) o2.divisor_override(1);
  return separable3d(
      x, "avg_pool3d", [&](const Tensor& t) { return avg_pool2d(t, o2); },
      [&](const Tensor& t) { return avg_pool1d(t, o1); });
}

Tensor max_pool3d(const Tensor& x, const MaxPool3dOptions& o) {
  check_rank(x, 5, "max_pool3d", "(N,C,D,H,W)");
  detail::window_axes("max_pool3d", {x.size(2), x.size(3), x.size(4)}, detail::spec_of(o));
  const auto &k = o.kernel_size(), &s = o.stride(), &p = o.padding(), &d = o.dilation();
  return separable3d(
      x, "max_pool3d",
      [&](const Tensor& t) {
        return max_pool2d(t, MaxPool2dOptions({k[1], k[2]})
                                 .stride({s[1], s[2]})
                                 .padding({p[1], p[2]})
                                 .dilation({d[1], d[2]})
                                 .ceil_mode(o.ceil_mode()));
      },
      [&](const Tensor& t) {
        return max_pool1d(t, MaxPool1dOptions(k[0]).stride(s[0]).padding(p[0]).dilation(d[0]).ceil_mode(o.ceil_mode()));
      });
}

Tensor adaptive_avg_pool3d(const Tensor& x, ExpandingArray<3> out) {
  return separable3d(
      x, "adaptive_avg_pool3d", [&](const Tensor& t) { return adaptive_avg_pool2d(t, {out[1], out[2]}); },
      [&](const Tensor& t) { return adaptive_avg_pool1d(t, out[0]); });
}

Tensor adaptive_max_pool3d(const Tensor& x, ExpandingArray<3> out) {
  return separable3d(
      x, "adaptive_max_pool3d", [&](const Tensor& t) { return adaptive_max_pool2d(t, {out[1], out[2]}); },
      [&](const Tensor& t) { return adaptive_max_pool1d(t, out[0]); });
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  check_defined(x, "local_response_norm");
  if (x.dim() < 3)
    throw ShapeError("local_response_norm: expected an input (N,C,...) of 3 or more dimensions, got " +
                     shape_str(x.shape()));
  require(size >= 1, fmt::format("local_response_norm: size {}: expected >= 1", size));
  // x / (k + alpha * mean of x^2 over `size` channels around it, zeros past the ends)^beta, as PyTorch
  const int64_t C = x.size(1);
  Shape pads(static_cast<size_t>(2 * (x.dim() - 1)), 0);  // (before, after) pairs, the last dimension first
  pads[pads.size() - 2] = size / 2;
  pads[pads.size() - 1] = (size - 1) / 2;
  const Tensor sq = pad(x * x, std::vector<int64_t>(pads.begin(), pads.end()));
  Tensor window = slice(sq, 1, 0, C);
  for (int64_t j = 1; j < size; ++j) window = window + slice(sq, 1, j, j + C);
  return x / pow(window * (alpha / static_cast<double>(size)) + k, beta);
}

// ---- instance norm, bilinear ------------------------------------------------------

Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(x, "instance_norm");
  if (x.dim() < 3)
    throw ShapeError("instance_norm: expected an input (N,C,...) with at least one spatial axis, got " +
                     shape_str(x.shape()));
  require(eps > 0, fmt::format("instance_norm: eps {}: expected > 0", eps));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  const Tensor d = x - mean(x, axes, true);
  Tensor y = d / sqrt(mean(d * d, axes, true) + eps);  // the biased variance, per (n, c)
  Shape per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = x.size(1);
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && t->shape() != Shape{x.size(1)})
      throw ShapeError(fmt::format("instance_norm: weight and bias must be (C) = ({}), got {}", x.size(1),
                                   shape_str(t->shape())));
  if (weight.defined()) y = y * reshape(weight, per_channel);
  if (bias.defined()) y = y + reshape(bias, per_channel);
  return y;
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  const char* op = "bilinear";
  check_defined(x1, op);
  check_defined(x2, op);
  check_defined(weight, op);
  if (weight.dim() != 3 || x1.dim() < 1 || x1.size(-1) != weight.size(1) || x2.dim() != x1.dim() ||
      x2.size(-1) != weight.size(2) || Shape(x1.shape().begin(), x1.shape().end() - 1) !=
                                           Shape(x2.shape().begin(), x2.shape().end() - 1))
    throw ShapeError(fmt::format("bilinear: expected inputs (..., I1) and (..., I2) and a weight (O, I1, I2), got {}, "
                                 "{} and {}",
                                 shape_str(x1.shape()), shape_str(x2.shape()), shape_str(weight.shape())));
  const int64_t O = weight.size(0), I1 = weight.size(1), I2 = weight.size(2);
  if (bias.defined() && bias.shape() != Shape{O})
    throw ShapeError(fmt::format("bilinear: bias {} must be (O) = ({})", shape_str(bias.shape()), O));
  const Tensor a = reshape(x1, {-1, I1}), b = reshape(x2, {-1, I2});  // (M, I1), (M, I2)
  // y[m, o] = sum_ij a[m, i] W[o, i, j] b[m, j]; float32 under Autocast, as
  // PyTorch's autocast leaves bilinear
  const Autocast full(Precision::f32);
  const Tensor t = reshape(matmul(a, reshape(permute(weight, {1, 0, 2}), {I1, O * I2})), {-1, O, I2});
  Tensor y = sum(t * unsqueeze(b, 1), {2});  // (M, O)
  if (bias.defined()) y = y + bias;
  Shape out(x1.shape().begin(), x1.shape().end() - 1);
  out.push_back(O);
  return reshape(y, out);
}

// ---- dropouts --------------------------------------------------------------------------

namespace {

// A keep mask of `shape`: 1 with probability 1 - p, drawn with gen.
Tensor keep_mask(const Shape& shape, double p, Generator& gen, Dtype dtype) {
  std::vector<double> m(static_cast<size_t>(shape_numel(shape)));
  for (double& v : m) v = gen.uniform() >= p ? 1.0 : 0.0;
  return from_vector(m, shape, dtype);
}

// The mask's shape for x: one draw per element, or per channel (N, C, 1, ...)
// with `features` (an unbatched input (C, ...) has rank `batched_rank` - 1).
Shape mask_shape(const Tensor& x, bool features, int64_t batched_rank) {
  if (!features) return x.shape();
  Shape s = x.shape();
  const int64_t lead = x.dim() == batched_rank ? 2 : 1;
  for (int64_t d = lead; d < x.dim(); ++d) s[d] = 1;
  return s;
}

void check_p(double p, const char* op) { require(p >= 0 && p <= 1, fmt::format("{}: p {}: expected in [0, 1]", op, p)); }

Tensor scaled_dropout(const char* op, const Tensor& x, double p, bool training, Generator* gen, bool features,
                      int64_t batched_rank) {
  check_defined(x, op);
  check_p(p, op);
  if (features && x.dim() != batched_rank && x.dim() != batched_rank - 1)
    throw ShapeError(fmt::format("{}: expected an input of {} or {} dimensions (N,C,...) or (C,...), got {}", op,
                                 batched_rank, batched_rank - 1, shape_str(x.shape())));
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  Generator& g = generator_or_default(gen);
  return x * (keep_mask(mask_shape(x, features, batched_rank), p, g, x.dtype()) * (1.0 / (1 - p)));
}

Tensor alpha_dropout_impl(const char* op, const Tensor& x, double p, bool training, Generator* gen, bool features) {
  check_defined(x, op);
  check_p(p, op);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // PyTorch's: a dropped value becomes SELU's negative saturation -alpha,
  // then an affine map a x + b keeps the mean and variance
  constexpr double alpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((alpha * alpha * p + 1) * (1 - p));
  const Tensor keep = keep_mask(mask_shape(x, features, x.dim()), p, generator_or_default(gen), x.dtype());
  return x * (keep * a) + ((keep - 1.0) * (alpha * a) + alpha * a * p);
}

}  // namespace

Tensor dropout1d(const Tensor& x, double p, bool training, Generator* gen) {
  return scaled_dropout("dropout1d", x, p, training, gen, true, 3);
}
Tensor dropout2d(const Tensor& x, double p, bool training, Generator* gen) {
  return scaled_dropout("dropout2d", x, p, training, gen, true, 4);
}
Tensor dropout3d(const Tensor& x, double p, bool training, Generator* gen) {
  return scaled_dropout("dropout3d", x, p, training, gen, true, 5);
}
Tensor alpha_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  return alpha_dropout_impl("alpha_dropout", x, p, training, gen, false);
}
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, Generator* gen) {
  if (x.defined() && x.dim() < 2)
    throw ShapeError("feature_alpha_dropout: expected an input (N,C,...), got " + shape_str(x.shape()));
  return alpha_dropout_impl("feature_alpha_dropout", x, p, training, gen, true);
}

}  // namespace xg
