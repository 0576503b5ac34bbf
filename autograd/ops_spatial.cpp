// Padding, resampling and rearranging of the spatial axes, composed from
// differentiable ops (concat, slice, index_select, matmul, reshape and
// permute): every order of gradient follows from theirs. Resampling applies
// matrices of interpolation weights per axis (one (out, in) matrix, or one
// per chunk of a long axis), the weights computed as PyTorch 1.13's kernels
// compute them.
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

// Tensor `t` with axis `axis` moved last, f applied, and moved back.
template <class F>
Tensor along(const Tensor& t, int64_t axis, F f) {
  const int64_t last = t.dim() - 1;
  if (axis == last) return f(t);
  return transpose(f(transpose(t, axis, last)), axis, last);
}

Tensor index_of(const std::vector<int64_t>& idx) { return from_ints(idx, {static_cast<int64_t>(idx.size())}); }

// The positions of `size` input elements that make an axis padded by
// (before, after) in reflect, replicate or circular mode.
std::vector<int64_t> pad_index(const std::string& mode, int64_t size, int64_t before, int64_t after) {
  std::vector<int64_t> idx;
  for (int64_t i = -before; i < size + after; ++i) {
    int64_t j = i;
    if (mode == "reflect") {
      const int64_t period = 2 * (size - 1);
      j = period == 0 ? 0 : ((i % period) + period) % period;
      if (j >= size) j = period - j;
    } else if (mode == "replicate") {
      j = std::min(std::max(i, int64_t{0}), size - 1);
    } else {  // circular
      j = ((i % size) + size) % size;
    }
    idx.push_back(j);
  }
  return idx;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  check_defined(x, "pad");
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size()) > 2 * x.dim())
    throw ShapeError(fmt::format("pad: {} pad sizes for input {}: expected pairs (before, after), last dimension "
                                 "first, at most two per dimension",
                                 pads.size(), shape_str(x.shape())));
  require(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular",
          "pad: mode '" + mode + "': expected 'constant', 'reflect', 'replicate' or 'circular'");
  if (mode != "constant") {
    // PyTorch pads the last 1, 2 or 3 dimensions of a (batched) input this way.
    const int64_t axes = static_cast<int64_t>(pads.size()) / 2;
    if (axes > 3 || x.dim() < axes + 1)
      throw ShapeError(fmt::format("pad: mode '{}' pads the last 1 to 3 dimensions of an input with one more "
                                   "(a batch or channels), got {} pad sizes for {}",
                                   mode, pads.size(), shape_str(x.shape())));
  }
  Tensor y = x;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const int64_t axis = x.dim() - 1 - static_cast<int64_t>(k);
    const int64_t before = pads[2 * k], after = pads[2 * k + 1], n = y.size(axis);
    if (n + before + after < 0 || (mode != "constant" && n + before + after < 1))
      throw ShapeError(fmt::format("pad: dimension {} of size {} padded by ({}, {}) would have size {}", axis, n,
                                   before, after, n + before + after));
    if (mode == "constant") {
      // a negative pad crops, at most what the dimension holds (a larger crop
      // at one end would not be made up by padding at the other)
      const int64_t crop = std::max(-before, int64_t{0}) + std::max(-after, int64_t{0});
      if (crop > n)
        throw ShapeError(fmt::format("pad: pads ({}, {}) crop {} values from dimension {} of size {}: at most {}",
                                     before, after, crop, axis, n, n));
      y = slice(y, axis, std::max(-before, int64_t{0}), n - std::max(-after, int64_t{0}));
      std::vector<Tensor> parts;
      Shape s = y.shape();
      if (before > 0) {
        s[axis] = before;
        parts.push_back(full(s, value, x.dtype()));
      }
      parts.push_back(y);
      if (after > 0) {
        s[axis] = after;
        parts.push_back(full(s, value, x.dtype()));
      }
      if (parts.size() > 1) y = concat(parts, axis);
      continue;
    }
    if (mode == "reflect" && (before >= n || after >= n))
      throw ShapeError(fmt::format("pad: reflect padding ({}, {}) of dimension {} must be below its size {}", before,
                                   after, axis, n));
    if (mode == "circular" && (before > n || after > n))
      throw ShapeError(fmt::format("pad: circular padding ({}, {}) of dimension {} must be at most its size {}",
                                   before, after, axis, n));
    if (before < 0 || after < 0)
      throw ShapeError(fmt::format("pad: mode '{}' takes pad sizes >= 0, got ({}, {})", mode, before, after));
    y = index_select(y, axis, index_of(pad_index(mode, n, before, after)));
  }
  return y;
}

// ---- resampling -------------------------------------------------------------------

namespace {

constexpr double kCubicA = -0.75;  // PyTorch's bicubic kernel parameter

double cubic1(double x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; }             // |x| <= 1
double cubic2(double x) { return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA; }  // 1 < |x| < 2

// One output position's reads: at most 4 input positions and their weights.
struct Taps {
  int64_t idx[4];
  double w[4];
  int n = 0;
  void add(int64_t i, double weight) {
    for (int k = 0; k < n; ++k)
      if (idx[k] == i) {  // a clamped tap adds to the edge's weight
        w[k] += weight;
        return;
      }
    idx[n] = i, w[n] = weight, ++n;
  }
};

// The reads of every output position o of one axis.
std::vector<Taps> axis_taps(const std::string& mode, int64_t in, int64_t out, double scale_given, bool align_corners) {
  // The source coordinate's step, as PyTorch's area_pixel_compute_scale.
  const double scale = align_corners ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0)
                       : scale_given > 0 ? 1.0 / scale_given
                                         : double(in) / double(out);
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    Taps& t = taps[o];
    if (mode == "nearest" || mode == "nearest-exact") {
      const double src = mode == "nearest" ? o * scale : (o + 0.5) * scale;
      t.add(std::min(static_cast<int64_t>(std::floor(src)), in - 1), 1);
    } else if (mode == "bicubic") {
      const double src = align_corners ? scale * o : scale * (o + 0.5) - 0.5;
      const int64_t i = static_cast<int64_t>(std::floor(src));
      const double f = src - std::floor(src);
      const double w[4] = {cubic2(f + 1), cubic1(f), cubic1(1 - f), cubic2(2 - f)};
      for (int k = 0; k < 4; ++k) t.add(std::min(std::max(i - 1 + k, int64_t{0}), in - 1), w[k]);
    } else {  // linear, bilinear, trilinear
      double src = align_corners ? scale * o : scale * (o + 0.5) - 0.5;
      if (src < 0) src = 0;
      const int64_t i0 = static_cast<int64_t>(src);
      const int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
      const double l1 = src - i0;
      t.add(i0, 1 - l1);
      t.add(i1, l1);
    }
  }
  return taps;
}

// Whether every output reads its own position with weight 1 (and others
// with weight 0, as a linear tap at a whole coordinate does).
bool is_identity(const std::vector<Taps>& taps, int64_t in) {
  if (static_cast<int64_t>(taps.size()) != in) return false;
  for (int64_t o = 0; o < in; ++o)
    for (int k = 0; k < taps[o].n; ++k)
      if (taps[o].w[k] != (taps[o].idx[k] == o ? 1.0 : 0.0)) return false;
  return true;
}

// Weights a chunk of outputs may hold as one dense (rows, span) matrix. An
// axis whose out x in is within it is one matrix (64 -> 128, 180 -> 360);
// a longer one goes in chunks of outputs, each reading only the input span
// it needs: one (out, in) matrix for 16,000 -> 48,000 samples would be 6 GB.
constexpr int64_t kChunkWeights = int64_t{1} << 16;

// t resampled along `axis` by `taps`: for each chunk of outputs, the input
// span its taps read times the chunk's (rows, span) weights, then the
// chunks concatenated.
Tensor resample_axis(const Tensor& t, int64_t axis, const std::vector<Taps>& taps, int64_t in) {
  const int64_t out = static_cast<int64_t>(taps.size());
  std::vector<Tensor> chunks;
  for (int64_t o0 = 0; o0 < out;) {
    int64_t lo = in, hi = 0, o1 = o0;
    while (o1 < out) {  // grow the chunk while its matrix stays within the budget (at least one row)
      int64_t l = lo, h = hi;
      for (int k = 0; k < taps[o1].n; ++k) l = std::min(l, taps[o1].idx[k]), h = std::max(h, taps[o1].idx[k] + 1);
      if (o1 > o0 && (o1 + 1 - o0) * (h - l) > kChunkWeights) break;
      lo = l, hi = h, ++o1;
    }
    std::vector<double> w(static_cast<size_t>((o1 - o0) * (hi - lo)), 0.0);
    for (int64_t o = o0; o < o1; ++o)
      for (int k = 0; k < taps[o].n; ++k) w[(o - o0) * (hi - lo) + taps[o].idx[k] - lo] += taps[o].w[k];
    const Tensor m = from_vector(w, {o1 - o0, hi - lo}, t.dtype());  // (rows, span)
    const Tensor span = lo == 0 && hi == in ? t : slice(t, axis, lo, hi);
    chunks.push_back(along(span, axis, [&](const Tensor& s) { return matmul(s, transpose(m, 0, 1)); }));
    o0 = o1;
  }
  return chunks.size() == 1 ? chunks[0] : concat(chunks, axis);
}

int64_t spatial_rank(const std::string& mode) {
  if (mode == "linear") return 1;
  if (mode == "bilinear" || mode == "bicubic") return 2;
  if (mode == "trilinear") return 3;
  return 0;  // nearest, nearest-exact, area: any
}

// x resampled to `out` along each spatial axis in turn, by the matrices of
// that axis's weights (linear, bilinear, bicubic, trilinear and nearest).
Tensor resample(const Tensor& x, const std::string& mode, const std::vector<int64_t>& out,
                const std::vector<double>& scales, bool align_corners) {
  Tensor y = x;
  const Autocast full(Precision::f32);  // resampling stays float32 under Autocast, as PyTorch's upsampling does
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t in = x.size(static_cast<int64_t>(d) + 2);
    const std::vector<Taps> taps = axis_taps(mode, in, out[d], scales[d], align_corners);
    if (is_identity(taps, in)) continue;  // an axis whose weights are the identity is left as it is
    y = resample_axis(y, static_cast<int64_t>(d) + 2, taps, in);
  }
  return y.impl() == x.impl() ? x.clone() : y;  // a new tensor, as PyTorch's, even when nothing moved
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* op = "interpolate";
  check_defined(x, op);
  const std::string& mode = o.mode();
  require(mode == "nearest" || mode == "nearest-exact" || mode == "linear" || mode == "bilinear" ||
              mode == "bicubic" || mode == "trilinear" || mode == "area",
          "interpolate: mode '" + mode + "': expected nearest, nearest-exact, linear, bilinear, bicubic, trilinear or area");
  const int64_t dims = x.dim() - 2;
  if (dims < 1 || dims > 3)
    throw ShapeError("interpolate: expected an input (N,C,L), (N,C,H,W) or (N,C,D,H,W), got " + shape_str(x.shape()));
  if (spatial_rank(mode) != 0 && spatial_rank(mode) != dims)
    throw ShapeError(fmt::format("interpolate: got a {}-D input, but mode '{}' needs a {}-D input", x.dim(), mode,
                                 spatial_rank(mode) + 2));
  const bool linear_like = mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
  require(linear_like || !o.align_corners(),
          "interpolate: align_corners is for the linear, bilinear, bicubic and trilinear modes, not '" + mode + "'");
  require(o.size().empty() != o.scale_factor().empty(), "interpolate: give either size or scale_factor, not both");
  auto per_axis = [&](const auto& v, const char* what) {
    using V = std::decay_t<decltype(v)>;
    if (v.size() == 1) return V(static_cast<size_t>(dims), v[0]);
    if (static_cast<int64_t>(v.size()) != dims)
      throw ShapeError(fmt::format("interpolate: {} has {} values for {} spatial dimensions of {}", what, v.size(),
                                   dims, shape_str(x.shape())));
    return v;
  };
  std::vector<int64_t> out(static_cast<size_t>(dims));
  std::vector<double> scales(static_cast<size_t>(dims), 0.0);
  if (!o.size().empty()) {
    require(!o.recompute_scale_factor(), "interpolate: recompute_scale_factor is not meaningful with an explicit size");
    out = per_axis(o.size(), "size");
  } else {
    const std::vector<double> f = per_axis(o.scale_factor(), "scale_factor");
    for (int64_t d = 0; d < dims; ++d) {
      const double size = std::floor(static_cast<double>(x.size(d + 2)) * f[d]);
      require(f[d] > 0 && size < 0x1p62,
              fmt::format("interpolate: scale_factor {}: expected > 0 and an output size below 2^62", f[d]));
      out[d] = static_cast<int64_t>(size);
      if (!o.recompute_scale_factor()) scales[d] = f[d];  // the coordinates follow the factor, as PyTorch
    }
  }
  detail::check_spatial(op, std::vector<int64_t>(x.shape().begin() + 2, x.shape().end()));
  for (int64_t d = 0; d < dims; ++d)
    if (out[d] < 1)
      throw ShapeError(fmt::format("interpolate: output size {} along dimension {} of {}: expected at least 1", out[d],
                                   d + 2, shape_str(x.shape())));
  if (mode == "area") {  // adaptive average pooling to the output size
    if (dims == 2) return adaptive_avg_pool2d(x, {out[0], out[1]});
    require(dims == 1, "interpolate: mode 'area' is built for 3-D and 4-D inputs");
    return squeeze(adaptive_avg_pool2d(unsqueeze(x, 2), {1, out[0]}), 2);
  }
  return resample(x, mode, out, scales, o.align_corners());
}

// ---- rearranging ------------------------------------------------------------------------

Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  check_defined_any(x, "pixel_shuffle");
  const int64_t r = upscale_factor;
  require(r >= 1 && r < (int64_t{1} << 31), fmt::format("pixel_shuffle: upscale_factor {}: expected in [1, 2^31)", r));
  if (x.dim() < 3 || x.size(-3) % (r * r) != 0)
    throw ShapeError(fmt::format("pixel_shuffle: expected an input (*, C*{}, H, W), got {}", r * r,
                                 shape_str(x.shape())));
  const Shape lead(x.shape().begin(), x.shape().end() - 3);
  const int64_t C = x.size(-3) / (r * r), H = x.size(-2), W = x.size(-1);
  Tensor t = reshape(x, {-1, C, r, r, H, W});
  t = permute(t, {0, 1, 4, 2, 5, 3});  // (B, C, H, r, W, r)
  Shape s = lead;
  s.insert(s.end(), {C, H * r, W * r});
  return reshape(t, s);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  check_defined_any(x, "pixel_unshuffle");
  const int64_t r = downscale_factor;
  require(r >= 1 && r < (int64_t{1} << 31),
          fmt::format("pixel_unshuffle: downscale_factor {}: expected in [1, 2^31)", r));
  if (x.dim() < 3 || x.size(-2) % r != 0 || x.size(-1) % r != 0)
    throw ShapeError(fmt::format("pixel_unshuffle: expected an input (*, C, H, W) with H and W divisible by {}, got {}",
                                 r, shape_str(x.shape())));
  const Shape lead(x.shape().begin(), x.shape().end() - 3);
  const int64_t C = x.size(-3), H = x.size(-2) / r, W = x.size(-1) / r;
  Tensor t = reshape(x, {-1, C, H, r, W, r});
  t = permute(t, {0, 1, 3, 5, 2, 4});  // (B, C, r, r, H, W)
  Shape s = lead;
  s.insert(s.end(), {C * r * r, H, W});
  return reshape(t, s);
}

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  check_defined_any(x, "channel_shuffle");
  if (x.dim() < 3 || groups < 1 || x.size(1) % groups != 0)
    throw ShapeError(fmt::format("channel_shuffle: expected an input (N,C,*) with C divisible by groups {}, got {}",
                                 groups, shape_str(x.shape())));
  Shape s = x.shape();
  const int64_t C = s[1];
  Shape split{s[0], groups, C / groups};
  split.insert(split.end(), s.begin() + 2, s.end());
  return reshape(transpose(reshape(x, split), 1, 2), s);
}

}  // namespace xg
