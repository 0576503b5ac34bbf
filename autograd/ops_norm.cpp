// Normalisation over the batch (batch_norm) and over groups of channels
// (group_norm), as torch.nn.functional writes them, for (N,C,...) inputs.
// group_norm is composed from differentiable ops (the fused layer_norm over
// each group). batch_norm is composed too in float64 and across processes;
// in float32 it is one fused op (two passes over the input forward, two
// backward, where the composite takes about eight each way) whose second
// order recomputes through the composite, so gradients of every order are
// exact. batch_norm_relu is relu(batch_norm(...)), the relu folded into the
// fused op's passes.
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/require.h"

namespace xg {

namespace {

// A per-channel tensor (C) or undefined, checked against x's C channels.
void check_channels(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  const int64_t c = x.size(1);
  if (t.shape() != Shape{c})
    throw ShapeError(std::string(op) + ": " + name + " " + shape_str(t.shape()) + " does not match the " +
                     std::to_string(c) + " channels of input " + shape_str(x.shape()) + ": expected (" +
                     std::to_string(c) + ",)");
  if (t.dtype() != x.dtype())
    throw ShapeError(std::string(op) + ": dtype mismatch, input " + dtype_name(x.dtype()) + " vs " + name + " " +
                     dtype_name(t.dtype()));
}

// The product of the spatial sizes of x (N,C,...), from the shape: N or C
// may be 0.
int64_t spatial_numel(const Tensor& x) { return shape_numel(Shape(x.shape().begin() + 2, x.shape().end())); }

// Each channel's values, as PyTorch counts them: N times the spatial sizes.
int64_t values_per_channel(const Tensor& x) { return x.size(0) * spatial_numel(x); }

// (1, C, 1, ...): a per-channel (C) tensor as it broadcasts against x.
Shape per_channel(const Tensor& x) {
  Shape s(x.dim(), 1);
  s[1] = x.size(1);
  return s;
}

// y * weight + bias per channel, either undefined.
Tensor channel_affine(Tensor y, const Tensor& weight, const Tensor& bias, const Tensor& x) {
  if (weight.defined()) y = y * reshape(weight, per_channel(x));
  if (bias.defined()) y = y + reshape(bias, per_channel(x));
  return y;
}

void check_eps(const char* op, double eps) {
  require(eps > 0, "eps " + fmt::format("{}", eps) + ": expected > 0", (std::string(op) + ": ").c_str());
}

// Every argument of batch_norm (or batch_norm_relu: `op`) checked, with the
// names PyTorch gives them.
void check_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                      const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  const std::string at = std::string(op) + ": ";
  check_defined(x, op);
  if (x.dim() < 2 || x.dim() > 4)
    throw ShapeError(at + "expected an input (N,C), (N,C,L) or (N,C,H,W), got " + shape_str(x.shape()));
  check_eps(op, eps);
  require(momentum >= 0 && momentum <= 1, "momentum " + fmt::format("{}", momentum) + ": expected in [0, 1]",
          at.c_str());
  check_channels(op, "running_mean", running_mean, x);
  check_channels(op, "running_var", running_var, x);
  check_channels(op, "weight", weight, x);
  check_channels(op, "bias", bias, x);
  require(training || (running_mean.defined() && running_var.defined()),
          "evaluation (training false) normalises with running_mean and running_var: both must be defined",
          at.c_str());
  if (training && values_per_channel(x) == 1)  // 0 is an empty batch, as PyTorch allows
    throw ShapeError(at + "training needs more than 1 value per channel, got input " + shape_str(x.shape()));
}

// r = (1 - momentum) r + momentum b, in place and off the tape.
void update_running(Tensor& running, const Tensor& batch, double momentum) {
  if (!running.defined()) return;
  NoGradGuard off;
  running.copy_(running.detach() * (1 - momentum) + reshape(batch.detach(), running.shape()) * momentum);
}

}  // namespace

namespace {

// The composite batch norm, differentiable to any order in every dtype: the
// float64 path, `across`, and the second order of the fused path.
// Normalises with the running statistics (constants here) unless training.
struct Normalised {
  Tensor y, mean, var;  // var: the batch's biased variance (1,C,1,...); both undefined in evaluation
  double count = 0;     // the values per channel, over every process
};

Normalised batch_norm_composed(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                               bool training, double eps, const std::function<Tensor(const Tensor&)>& across) {
  if (!training) {
    Tensor shift, scale;  // the running statistics are constants here
    {
      NoGradGuard off;
      shift = reshape(running_mean.detach(), per_channel(x));
      scale = reshape(pow(running_var.detach() + eps, -0.5), per_channel(x));
    }
    return {(x - shift) * scale, Tensor(), Tensor(), 0};
  }
  std::vector<int64_t> axes{0};  // every axis but C's
  for (int64_t i = 2; i < x.dim(); ++i) axes.push_back(i);
  // The batch's mean and biased variance per channel (1,C,1,...), over this
  // process's values or, through `across`, every process's.
  double n = static_cast<double>(values_per_channel(x));
  if (across) n = across(full({1}, n, x.dtype())).item();
  auto batch_mean = [&](const Tensor& t) { return across ? across(sum(t, axes, true)) / n : mean(t, axes, true); };
  const Tensor mu = batch_mean(x), d = x - mu, v = batch_mean(d * d);
  return {d * pow(v + eps, -0.5), mu, v, n};
}

// ---- the fused float32 path: two passes over x forward, two backward.
// Each plane's (one image's channel's) sums run on one thread and combine
// across images in a fixed order, so the results do not depend on the
// thread count. x is row-major, or blocked as a convolution left it
// (detail::channel_block): both layouts have their own loops over the
// planes, and share the rest.

// x (N,C,S...) as N images of C planes of S values each; in blocks of b
// channels (b > 0), tile (n, k) holds channels k b .. k b + b - 1, each of
// its S positions' b channels adjacent.
struct Planes {
  int64_t N, C, S;
  int64_t b = 0;
  double count() const { return static_cast<double>(N * S); }
  int64_t tiles() const { return N * (C / b); }
  int64_t tile_image(int64_t i) const { return i / (C / b); }
  int64_t tile_channel(int64_t i) const { return i % (C / b) * b; }  // its first channel
  int64_t tile_offset(int64_t i) const { return i * S * b; }
};

// x's planes, stored in `block` (0: row-major).
Planes planes_of(const Tensor& x, int block) {
  return {x.size(0), x.size(1), spatial_numel(x), block};
}

constexpr int64_t kMaxBlock = 16;

// f(std::integral_constant<int64_t, b>) for the layout's block b (8 or 16):
// the lane loops below then have a fixed length, and their per-lane sums
// stay in registers (with b read at run time they went through memory at
// every position, and the blocked layout's passes took longer than NCHW's).
template <class F>
void with_block(int64_t b, F&& f) {
  if (b == 8)
    f(std::integral_constant<int64_t, 8>{});
  else if (b == kMaxBlock)
    f(std::integral_constant<int64_t, kMaxBlock>{});
  else
    throw std::logic_error("batch_norm: channel block " + std::to_string(b) + ", expected 8 or 16");
}

// f(i, c, at) for every plane i of row-major values (its channel c, its
// values from offset at), in parallel at `cost` operations a value.
template <class F>
void for_planes(const Planes& p, int64_t cost, F&& f) {
  parallel_for(p.N * p.C, cost * p.S, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f(i, i % p.C, i * p.S);
  });
}

// f(block, i, c0, at) for every tile i of blocked values (its first channel
// c0, its values from offset at; block the layout's channel block as
// with_block gives it), in parallel at `cost` operations a value.
template <class F>
void for_tiles(const Planes& p, int64_t cost, F&& f) {
  with_block(p.b, [&](auto block) {
    parallel_for(p.tiles(), cost * p.S * decltype(block)::value, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) f(block, i, p.tile_channel(i), p.tile_offset(i));
    });
  });
}

// Per tile of blocked values (B lanes), per lane l (channel c0 + l): f(l,
// value at position j) for every j of the S, lanes innermost.
template <int64_t B, class F>
void over_lanes(const float* t, int64_t S, F&& f) {
  for (int64_t j = 0; j < S; ++j) {
    const float* r = t + j * B;
#pragma omp simd
    for (int64_t l = 0; l < B; ++l) f(l, r[l]);
  }
}

// Per channel: the statistics that normalise it, y = x * scale + shift.
struct ChannelStats {
  std::vector<float> mean, invstd;  // 1 / sqrt(var + eps)
  std::vector<double> var;          // biased (empty in evaluation)
};

// The batch's mean and biased variance of each channel. Each plane's mean
// and squared deviation come from two float passes over it (in cache), and
// planes combine in double by Chan et al.'s pairwise update, which stays
// exact when the mean is large against the deviation (sums of squares
// would cancel).
ChannelStats batch_stats(const float* x, const Planes& p, double eps) {
  // Each plane's mean and squared deviation from it, (n, c) at n C + c.
  std::vector<float> pm(static_cast<size_t>(p.N * p.C)), pq(pm.size());
  if (p.b == 0) {
    for_planes(p, 3, [&](int64_t i, int64_t, int64_t at) {
      const float* r = x + at;
      float sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < p.S; ++j) sum += r[j];
      const float rm = sum / static_cast<float>(p.S);
#pragma omp simd reduction(+ : sq)
      for (int64_t j = 0; j < p.S; ++j) sq += (r[j] - rm) * (r[j] - rm);
      pm[i] = rm, pq[i] = sq;
    });
  } else {
    for_tiles(p, 3, [&](auto block, int64_t i, int64_t c0, int64_t at) {
      constexpr int64_t B = decltype(block)::value;
      const float* t = x + at;
      float sum[B] = {}, sq[B] = {}, rm[B];
      over_lanes<B>(t, p.S, [&](int64_t l, float v) { sum[l] += v; });
      for (int64_t l = 0; l < B; ++l) rm[l] = sum[l] / static_cast<float>(p.S);
      over_lanes<B>(t, p.S, [&](int64_t l, float v) { sq[l] += (v - rm[l]) * (v - rm[l]); });
      const int64_t to = p.tile_image(i) * p.C + c0;
      for (int64_t l = 0; l < B; ++l) pm[to + l] = rm[l], pq[to + l] = sq[l];
    });
  }
  ChannelStats s{std::vector<float>(p.C), std::vector<float>(p.C), std::vector<double>(p.C)};
  for (int64_t c = 0; c < p.C; ++c) {
    double mean = 0, m2 = 0, seen = 0;
    for (int64_t n = 0; n < p.N; ++n) {
      const double k = static_cast<double>(p.S), delta = pm[n * p.C + c] - mean, total = seen + k;
      mean += delta * k / total;
      m2 += pq[n * p.C + c] + delta * delta * seen * k / total;
      seen = total;
    }
    s.mean[c] = static_cast<float>(mean);
    s.var[c] = m2 / seen;
    s.invstd[c] = static_cast<float>(1 / std::sqrt(s.var[c] + eps));
  }
  return s;
}

// The running statistics as ChannelStats, for evaluation.
ChannelStats running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
  const int64_t C = running_mean.numel();
  ChannelStats s{std::vector<float>(C), std::vector<float>(C), {}};
  const float *m = running_mean.data<float>(), *v = running_var.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    s.mean[c] = m[c];
    s.invstd[c] = static_cast<float>(1 / std::sqrt(static_cast<double>(v[c]) + eps));
  }
  return s;
}

// The normalisation as one line per channel: y = x * scale + shift, with
// scale = invstd * weight and shift = bias - mean * scale.
struct ChannelLine {
  std::vector<float> scale, shift;
};

ChannelLine line_of(const ChannelStats& s, const float* w, const float* b) {
  const size_t C = s.mean.size();
  ChannelLine k{std::vector<float>(C), std::vector<float>(C)};
  for (size_t c = 0; c < C; ++c) {
    k.scale[c] = s.invstd[c] * (w ? w[c] : 1.0f);
    k.shift[c] = (b ? b[c] : 0.0f) - s.mean[c] * k.scale[c];
  }
  return k;
}

// batch_norm_relu's value before the relu, v = x * scale + shift, as one
// rounding (std::fma): the forward clamps it and the backward's mask tests
// v > 0 by the same expression, so both see the same bits. (A build with
// XG_MARCH empty has no FMA instruction: std::fma is then a library call,
// exact but not vectorised.)
inline float relu_line(float x, float scale, float shift) { return std::fma(x, scale, shift); }

// The relu's output gradient g as it reaches batch norm (R): g where the
// forward's relu_line(x, scale, shift) > 0, else 0. g is read unconditionally,
// so that the vector loops load it plainly rather than under a mask.
template <bool R>
inline float relu_masked(float g, float x, float scale, float shift) {
  return !R || relu_line(x, scale, shift) > 0 ? g : 0.0f;
}

// f(std::true_type) when `on`, else f(std::false_type): a loop's variant
// chosen once, outside it.
template <class F>
void with_flag(bool on, F&& f) {
  if (on)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// One value of channel_lines, x's r (and with D, the gradient's g).
template <bool D, bool R>
inline float line_value(float r, float g, float f1, float f2, float f3, float ms, float mt) {
  if constexpr (D) {
    return f1 * relu_masked<R>(g, r, ms, mt) + f2 * r + f3;
  } else if constexpr (R) {
    const float v = relu_line(r, f1, f2);
    return v > 0 ? v : 0.0f;
  } else {
    return r * f1 + f2;
  }
}

// y = x * k1 + k2 per channel (one fused multiply-add a value), or, with
// d, y = d * k1 + x * k2 + k3: the normalisation and the gradient's last
// pass. With a relu line m (batch_norm_relu): forward, y =
// relu(relu_line(x, k1, k2)) (k1, k2 are then m's); backward, d counts only
// where relu_line(x, m) > 0, the forward's own test.
void channel_lines(const float* d, const float* x, const Planes& p, const std::vector<float>& k1,
                   const std::vector<float>& k2, const std::vector<float>& k3, float* y,
                   const ChannelLine* m = nullptr) {
  with_flag(d != nullptr, [&](auto grad) {
    with_flag(m != nullptr, [&](auto relu) {
      constexpr bool D = decltype(grad)::value, R = decltype(relu)::value;
      if (p.b == 0) {
        for_planes(p, 2, [&](int64_t, int64_t c, int64_t at) {
          const float f1 = k1[c], f2 = k2[c], f3 = D ? k3[c] : 0.0f;
          const float ms = R ? m->scale[c] : 0.0f, mt = R ? m->shift[c] : 0.0f;
          const float *r = x + at, *g = D ? d + at : nullptr;
          float* o = y + at;
#pragma omp simd
          for (int64_t j = 0; j < p.S; ++j) o[j] = line_value<D, R>(r[j], D ? g[j] : 0.0f, f1, f2, f3, ms, mt);
        });
        return;
      }
      for_tiles(p, 2, [&](auto block, int64_t, int64_t c0, int64_t at) {
        constexpr int64_t B = decltype(block)::value;
        float f1[B], f2[B], f3[B], ms[B], mt[B];  // the tile's channels' factors, in registers
        for (int64_t l = 0; l < B; ++l) {
          f1[l] = k1[c0 + l], f2[l] = k2[c0 + l], f3[l] = D ? k3[c0 + l] : 0.0f;
          ms[l] = R ? m->scale[c0 + l] : 0.0f, mt[l] = R ? m->shift[c0 + l] : 0.0f;
        }
        for (int64_t j = 0; j < p.S; ++j) {
          const float *r = x + at + j * B, *g = D ? d + at + j * B : nullptr;
          float* o = y + at + j * B;
#pragma omp simd
          for (int64_t l = 0; l < B; ++l)
            o[l] = line_value<D, R>(r[l], D ? g[l] : 0.0f, f1[l], f2[l], f3[l], ms[l], mt[l]);
        }
      });
    });
  });
}

// Each plane's sum g (into pa) and sum g (x - mean) (into pb), (n, c) at
// n C + c: the sums of batch norm's backward, x and g in the layout p says.
// With a relu line m, g counts only where relu_line(x, m) > 0 (as in
// channel_lines).
void plane_grad_sums(const float* px, const float* pg, const Planes& p, const std::vector<float>& mean,
                     std::vector<float>& pa, std::vector<float>& pb, const ChannelLine* m = nullptr) {
  pa.resize(static_cast<size_t>(p.N * p.C));
  pb.resize(pa.size());
  with_flag(m != nullptr, [&](auto relu) {
    constexpr bool R = decltype(relu)::value;
    if (p.b == 0) {
      for_planes(p, 3, [&](int64_t i, int64_t c, int64_t at) {
        const float mu = mean[c], *r = px + at, *d = pg + at;
        const float ms = R ? m->scale[c] : 0.0f, mt = R ? m->shift[c] : 0.0f;
        float a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
        for (int64_t j = 0; j < p.S; ++j) {
          const float gj = relu_masked<R>(d[j], r[j], ms, mt);
          a += gj, b += gj * (r[j] - mu);
        }
        pa[i] = a, pb[i] = b;
      });
      return;
    }
    for_tiles(p, 3, [&](auto block, int64_t i, int64_t c0, int64_t at) {
      constexpr int64_t B = decltype(block)::value;
      float mu[B], ms[B], mt[B], a[B] = {}, b[B] = {};
      for (int64_t l = 0; l < B; ++l) {
        mu[l] = mean[c0 + l];
        ms[l] = R ? m->scale[c0 + l] : 0.0f, mt[l] = R ? m->shift[c0 + l] : 0.0f;
      }
      for (int64_t j = 0; j < p.S; ++j) {
        const float *r = px + at + j * B, *d = pg + at + j * B;
#pragma omp simd
        for (int64_t l = 0; l < B; ++l) {
          const float gl = relu_masked<R>(d[l], r[l], ms[l], mt[l]);
          a[l] += gl, b[l] += gl * (r[l] - mu[l]);
        }
      }
      const int64_t to = p.tile_image(i) * p.C + c0;
      for (int64_t l = 0; l < B; ++l) pa[to + l] = a[l], pb[to + l] = b[l];
    });
  });
}

// The first-order gradients {dx, dweight, dbias} of the fused batch norm.
// With xhat = (x - mean) invstd, per channel over its M = N S values:
//   dbias = sum g,  dweight = sum g xhat,
//   training:   dx = weight invstd (g - dbias / M - xhat dweight / M)
//               (the mean and variance depend on x: the last two terms),
//   evaluation: dx = weight invstd g.
// As dx = k1 g + k2 x + k3 per channel, the second pass is one line.
// g is read in x's layout (a copy when it comes in the other); dx is in it.
// With a relu line m (batch_norm_relu), g is the relu's output gradient and
// counts only where the forward's relu passed its value.
std::vector<Tensor> fused_backward(const Tensor& x, const ChannelStats& s, const Tensor& weight, bool has_bias,
                                   bool training, const Tensor& g, const ChannelLine* m) {
  const detail::StoredView vx = detail::stored_view(x);
  const Planes p = planes_of(x, vx.block);
  detail::StoredView vg;  // g in x's layout, when that is blocked
  Tensor g_copy;
  if (p.b != 0) vg = detail::stored_in_block(g, static_cast<int>(p.b), g_copy);
  Tensor gx = !needs_input_grad(0) ? Tensor()
              : p.b != 0           ? detail::make_blocked(x.shape(), static_cast<int>(p.b))
                                   : make_tensor(x.shape(), f32);
  Tensor gw = weight.defined() && needs_input_grad(1) ? make_tensor({p.C}, f32) : Tensor();
  Tensor gb = has_bias && needs_input_grad(2) ? make_tensor({p.C}, f32) : Tensor();
  const float *px = vx.p, *pg = p.b != 0 ? vg.p : g.data<float>();
  const float* w = data_or_null<float>(weight);
  std::vector<float> pa, pb;
  plane_grad_sums(px, pg, p, s.mean, pa, pb, m);
  std::vector<float> k1(p.C), k2(p.C), k3(p.C);
  for (int64_t c = 0; c < p.C; ++c) {
    double sg = 0, sgd = 0;  // sum g, sum g (x - mean)
    for (int64_t n = 0; n < p.N; ++n) sg += pa[n * p.C + c], sgd += pb[n * p.C + c];
    if (gb.defined()) gb.data<float>()[c] = static_cast<float>(sg);
    if (gw.defined()) gw.data<float>()[c] = static_cast<float>(sgd * s.invstd[c]);
    const float is = s.invstd[c];
    const double M = p.count(), f1 = is * (w ? w[c] : 1.0f);
    const double f2 = training ? -f1 * is * is * sgd / M : 0.0;
    k1[c] = static_cast<float>(f1);
    k2[c] = static_cast<float>(f2);
    k3[c] = static_cast<float>(training ? -f1 * sg / M - f2 * s.mean[c] : 0.0);
  }
  if (gx.defined()) channel_lines(pg, px, p, k1, k2, k3, detail::stored_view(gx).p, m);
  return {gx, gw, gb};
}

// 1 where batch_norm_relu's forward passed a value (relu_line > 0), else 0,
// in x's layout: the relu's mask for the second order, which recomputes the
// normalisation through the composite (whose own rounding could flip a
// value next to 0).
Tensor relu_mask(const Tensor& x, const ChannelLine& line) {
  const detail::StoredView vx = detail::stored_view(x);
  const Planes p = planes_of(x, vx.block);
  Tensor m = p.b != 0 ? detail::make_blocked(x.shape(), static_cast<int>(p.b)) : make_tensor(x.shape(), f32);
  float* o = detail::stored_view(m).p;
  channel_lines(nullptr, vx.p, p, line.scale, line.shift, {}, o, &line);
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = o[i] > 0 ? 1.0f : 0.0f;
  return m;
}

// The fused float32 batch norm: statistics and normalisation in two passes,
// its first-order backward in two; the second order recomputes through
// batch_norm_composed (as the direct convolution does through im2col).
// With `relu`, relu(batch_norm(...)) in the same passes: the backward
// recomputes the relu's mask from x and the normalisation's line, so it
// keeps no tensor more than batch_norm.
Tensor batch_norm_fused(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                        const Tensor& bias, bool training, double momentum, double eps, bool relu) {
  const detail::StoredView vx = detail::stored_view(x);
  const Planes p = planes_of(x, vx.block);  // x as it is stored, blocked or row-major; y alike
  auto stats = std::make_shared<ChannelStats>(training ? batch_stats(vx.p, p, eps)
                                                       : running_stats(running_mean, running_var, eps));
  auto line = std::make_shared<const ChannelLine>(
      line_of(*stats, data_or_null<float>(weight), data_or_null<float>(bias)));
  Tensor y = p.b != 0 ? detail::make_blocked(x.shape(), static_cast<int>(p.b)) : make_tensor(x.shape(), f32);
  channel_lines(nullptr, vx.p, p, line->scale, line->shift, {}, detail::stored_view(y).p,
                relu ? line.get() : nullptr);
  // The relu's line, as the forward used it (weight and bias as they are now), for the backward's mask.
  std::shared_ptr<const ChannelLine> mask_line = relu ? line : nullptr;
  // Evaluation reads the running statistics as they are now: copied into stats.
  Tensor rm = training ? Tensor() : running_mean.detach().clone(), rv = training ? Tensor() : running_var.detach().clone();
  y = record(
      relu ? "batch_norm_relu" : "batch_norm", y, {x, weight, bias},
      [x, weight, bias, stats, mask_line, training, rm, rv, eps](const Tensor& g) {
        if (grad_enabled()) {
          const Tensor mask = mask_line ? relu_mask(x, *mask_line) : Tensor();
          return detail::vjp_by_recompute(
              [&](const std::vector<Tensor>& in) {
                const Tensor z = batch_norm_composed(in[0], rm, rv, training, eps, {}).y;
                const Tensor y = channel_affine(z, in[1], in[2], in[0]);
                return mask.defined() ? y * mask : y;
              },
              {x, weight, bias}, g);
        }
        return fused_backward(x, *stats, weight, bias.defined(), training, g, mask_line.get());
      },
      {x, weight});
  if (training) {  // after record(), so that an OpProfile charges the kernels above to batch_norm
    Tensor mean = make_tensor({p.C}, f32), unbiased = make_tensor({p.C}, f32);
    const double M = p.count();
    for (int64_t c = 0; c < p.C; ++c) {
      mean.data<float>()[c] = stats->mean[c];
      unbiased.data<float>()[c] = static_cast<float>(stats->var[c] * M / (M - 1));  // as PyTorch keeps it
    }
    update_running(running_mean, mean, momentum);
    update_running(running_var, unbiased, momentum);
  }
  return y;
}

// The composite batch norm of every dtype, its running statistics updated.
Tensor batch_norm_composite(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                            const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                            const std::function<Tensor(const Tensor&)>& across) {
  const Normalised r = batch_norm_composed(x, running_mean, running_var, training, eps, across);
  if (!training) {
    const Tensor y = channel_affine(r.y, weight, bias, x);
    // Traced as one op reading the running statistics themselves (so that an
    // exporter can name them after their buffers), not constants.
    return detail::traced(y, [&](TracedOp& t) {
      t = TracedOp{"batch_norm", t.scope, {x, running_mean, running_var, weight, bias}, y, attr::Scalar{eps}, {}};
    });
  }
  {
    Tensor rm = running_mean, rv = running_var;
    update_running(rm, r.mean, momentum);
    update_running(rv, r.var.detach() * (r.count / (r.count - 1)), momentum);  // the unbiased variance, as PyTorch keeps it
  }
  return channel_affine(r.y, weight, bias, x);
}

// batch_norm, or with `relu` batch_norm_relu: fused in float32 on one
// process; `across` needs its sums between the passes, and an export trace
// lists the composite's ops (and the relu after them).
Tensor batch_norm_maybe_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                             const std::function<Tensor(const Tensor&)>& across, bool relu) {
  check_batch_norm(relu ? "batch_norm_relu" : "batch_norm", x, running_mean, running_var, weight, bias, training,
                   momentum, eps);
  if (training && !across && values_per_channel(x) == 0) {
    // An empty batch: an empty result, the running statistics left as they
    // are (PyTorch's num_batches_tracked still counts it, as the module does).
    const Tensor y = channel_affine(x * 1.0, weight, bias, x);
    return relu ? xg::relu(y) : y;
  }
  if (x.dtype() == f32 && !across && x.numel() > 0 && !detail::g_trace)
    return batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum, eps, relu);
  const Tensor y = batch_norm_composite(x, running_mean, running_var, weight, bias, training, momentum, eps, across);
  return relu ? xg::relu(y) : y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps,
                  const std::function<Tensor(const Tensor&)>& across) {
  return batch_norm_maybe_relu(x, running_mean, running_var, weight, bias, training, momentum, eps, across, false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum, double eps,
                       const std::function<Tensor(const Tensor&)>& across) {
  return batch_norm_maybe_relu(x, running_mean, running_var, weight, bias, training, momentum, eps, across, true);
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(x, "group_norm");
  if (x.dim() < 2) throw ShapeError("group_norm: expected an input (N,C,...), got " + shape_str(x.shape()));
  require(groups >= 1, "groups " + std::to_string(groups) + ": expected at least 1", "group_norm: ");
  if (x.size(1) % groups != 0)
    throw ShapeError("group_norm: groups " + std::to_string(groups) + " does not divide the " +
                     std::to_string(x.size(1)) + " channels of input " + shape_str(x.shape()));
  check_eps("group_norm", eps);
  check_channels("group_norm", "weight", weight, x);
  check_channels("group_norm", "bias", bias, x);
  const int64_t N = x.size(0), per_group = N ? x.numel() / (N * groups) : 0;
  // (N, G, C/G * ...): each group's values are one row of layer_norm.
  const Tensor y = layer_norm(reshape(x, {N, groups, per_group}), Tensor(), Tensor(), eps);
  return channel_affine(reshape(y, x.shape()), weight, bias, x);
}

}  // namespace xg
