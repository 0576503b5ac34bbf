// Normalisation over the batch (batch_norm) and over groups of channels
// (group_norm), as torch.nn.functional writes them, for (N,C,...) inputs.
// group_norm is composed from differentiable ops (the fused layer_norm over
// each group). batch_norm is composed too in float64 and across processes;
// in float32 it is one fused op (two passes over the input forward, two
// backward, where the composite takes about eight each way) whose second
// order recomputes through the composite, so gradients of every order are
// exact.
#include <cmath>
#include <memory>
#include <string>
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

// Every argument of batch_norm checked, with the names PyTorch gives them.
void check_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                      const Tensor& bias, bool training, double momentum, double eps) {
  check_defined(x, "batch_norm");
  if (x.dim() < 2 || x.dim() > 4)
    throw ShapeError("batch_norm: expected an input (N,C), (N,C,L) or (N,C,H,W), got " + shape_str(x.shape()));
  check_eps("batch_norm", eps);
  require(momentum >= 0 && momentum <= 1, "momentum " + fmt::format("{}", momentum) + ": expected in [0, 1]",
          "batch_norm: ");
  check_channels("batch_norm", "running_mean", running_mean, x);
  check_channels("batch_norm", "running_var", running_var, x);
  check_channels("batch_norm", "weight", weight, x);
  check_channels("batch_norm", "bias", bias, x);
  require(training || (running_mean.defined() && running_var.defined()),
          "evaluation (training false) normalises with running_mean and running_var: both must be defined",
          "batch_norm: ");
  if (training && x.numel() / x.size(1) <= 1)
    throw ShapeError("batch_norm: training needs more than 1 value per channel, got input " + shape_str(x.shape()));
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
  double n = static_cast<double>(x.numel() / x.size(1));
  if (across) n = across(full({1}, n, x.dtype())).item();
  auto batch_mean = [&](const Tensor& t) { return across ? across(sum(t, axes, true)) / n : mean(t, axes, true); };
  const Tensor mu = batch_mean(x), d = x - mu, v = batch_mean(d * d);
  return {d * pow(v + eps, -0.5), mu, v, n};
}

// ---- the fused float32 path: two passes over x forward, two backward,
// in parallel over channels (each channel's sums run on one thread, so the
// results do not depend on the thread count).

// x (N,C,S...) as N images of C planes of S values each.
struct Planes {
  int64_t N, C, S;
  const float* plane(const float* p, int64_t n, int64_t c) const { return p + (n * C + c) * S; }
  float* plane(float* p, int64_t n, int64_t c) const { return p + (n * C + c) * S; }
  double count() const { return static_cast<double>(N * S); }
};

Planes planes_of(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1);
  return {N, C, x.numel() / (N * C)};
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
  ChannelStats s{std::vector<float>(p.C), std::vector<float>(p.C), std::vector<double>(p.C)};
  parallel_for(p.C, 3 * p.N * p.S, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double mean = 0, m2 = 0, seen = 0;
      for (int64_t n = 0; n < p.N; ++n) {
        const float* r = p.plane(x, n, c);
        float sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < p.S; ++j) sum += r[j];
        const float rm = sum / static_cast<float>(p.S);
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < p.S; ++j) sq += (r[j] - rm) * (r[j] - rm);
        const double k = static_cast<double>(p.S), delta = rm - mean, total = seen + k;
        mean += delta * k / total;
        m2 += sq + delta * delta * seen * k / total;
        seen = total;
      }
      s.mean[c] = static_cast<float>(mean);
      s.var[c] = m2 / seen;
      s.invstd[c] = static_cast<float>(1 / std::sqrt(s.var[c] + eps));
    }
  });
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

// y = (x - mean) * invstd * weight + bias, one fused multiply-add a value.
void normalise_planes(const float* x, const Planes& p, const ChannelStats& s, const float* w, const float* b,
                      float* y) {
  parallel_for(p.C, 2 * p.N * p.S, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float scale = s.invstd[c] * (w ? w[c] : 1.0f);
      const float shift = (b ? b[c] : 0.0f) - s.mean[c] * scale;
      for (int64_t n = 0; n < p.N; ++n) {
        const float* r = p.plane(x, n, c);
        float* o = p.plane(y, n, c);
#pragma omp simd
        for (int64_t j = 0; j < p.S; ++j) o[j] = r[j] * scale + shift;
      }
    }
  });
}

// The first-order gradients {dx, dweight, dbias} of the fused batch norm.
// With xhat = (x - mean) invstd, per channel over its M = N S values:
//   dbias = sum g,  dweight = sum g xhat,
//   training:   dx = weight invstd (g - dbias / M - xhat dweight / M)
//               (the mean and variance depend on x: the last two terms),
//   evaluation: dx = weight invstd g.
// As dx = k1 g + k2 x + k3 per channel, the second pass is one line.
std::vector<Tensor> fused_backward(const Tensor& x, const ChannelStats& s, const Tensor& weight, bool has_bias,
                                   bool training, const Tensor& g) {
  const Planes p = planes_of(x);
  Tensor gx = needs_input_grad(0) ? make_tensor(x.shape(), f32) : Tensor();
  Tensor gw = weight.defined() && needs_input_grad(1) ? make_tensor({p.C}, f32) : Tensor();
  Tensor gb = has_bias && needs_input_grad(2) ? make_tensor({p.C}, f32) : Tensor();
  const float *px = x.data<float>(), *pg = g.data<float>(), *w = weight.defined() ? weight.data<float>() : nullptr;
  float* dx = gx.defined() ? gx.data<float>() : nullptr;
  float* dw = gw.defined() ? gw.data<float>() : nullptr;
  float* db = gb.defined() ? gb.data<float>() : nullptr;
  parallel_for(p.C, 5 * p.N * p.S, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float mu = s.mean[c], is = s.invstd[c];
      double sg = 0, sgd = 0;  // sum g, sum g (x - mean)
      for (int64_t n = 0; n < p.N; ++n) {
        const float *r = p.plane(px, n, c), *d = p.plane(pg, n, c);
        float a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
        for (int64_t j = 0; j < p.S; ++j) a += d[j], b += d[j] * (r[j] - mu);
        sg += a, sgd += b;
      }
      if (db) db[c] = static_cast<float>(sg);
      if (dw) dw[c] = static_cast<float>(sgd * is);
      if (!dx) continue;
      const double M = p.count(), k1 = is * (w ? w[c] : 1.0f);
      const double k2 = training ? -k1 * is * is * sgd / M : 0.0;
      const double k3 = training ? -k1 * sg / M - k2 * mu : 0.0;
      const float f1 = static_cast<float>(k1), f2 = static_cast<float>(k2), f3 = static_cast<float>(k3);
      for (int64_t n = 0; n < p.N; ++n) {
        const float *r = p.plane(px, n, c), *d = p.plane(pg, n, c);
        float* o = p.plane(dx, n, c);
#pragma omp simd
        for (int64_t j = 0; j < p.S; ++j) o[j] = f1 * d[j] + f2 * r[j] + f3;
      }
    }
  });
  return {gx, gw, gb};
}

// The fused float32 batch norm: statistics and normalisation in two passes,
// its first-order backward in two; the second order recomputes through
// batch_norm_composed (as the direct convolution does through im2col).
Tensor batch_norm_fused(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                        const Tensor& bias, bool training, double momentum, double eps) {
  const Planes p = planes_of(x);
  auto stats = std::make_shared<ChannelStats>(training ? batch_stats(x.data<float>(), p, eps)
                                                       : running_stats(running_mean, running_var, eps));
  Tensor y = make_tensor(x.shape(), f32);
  normalise_planes(x.data<float>(), p, *stats, weight.defined() ? weight.data<float>() : nullptr,
                   bias.defined() ? bias.data<float>() : nullptr, y.data<float>());
  // Evaluation reads the running statistics as they are now: copied into stats.
  Tensor rm = training ? Tensor() : running_mean.detach().clone(), rv = training ? Tensor() : running_var.detach().clone();
  y = record(
      "batch_norm", y, {x, weight, bias},
      [x, weight, bias, stats, training, rm, rv, eps](const Tensor& g) {
        if (grad_enabled())
          return detail::vjp_by_recompute(
              [&](const std::vector<Tensor>& in) {
                return channel_affine(batch_norm_composed(in[0], rm, rv, training, eps, {}).y, in[1], in[2], in[0]);
              },
              {x, weight, bias}, g);
        return fused_backward(x, *stats, weight, bias.defined(), training, g);
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

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps,
                  const std::function<Tensor(const Tensor&)>& across) {
  check_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
  // The fused path serves float32 on one process; `across` needs its sums
  // between the passes, and an export trace lists the composite's ops.
  if (x.dtype() == f32 && !across && x.numel() > 0 && !detail::g_trace)
    return batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum, eps);
  const Normalised r = batch_norm_composed(x, running_mean, running_var, training, eps, across);
  if (!training) {
    const Tensor y = channel_affine(r.y, weight, bias, x);
    // Exported as one ONNX BatchNormalization reading the running statistics
    // themselves (initializers under their buffers' names), not constants.
    return detail::traced(y, [&](TracedOp& t) {
      t = TracedOp{"batch_norm", t.scope, {x, running_mean, running_var, weight, bias}, y, {}, {eps}, {}};
    });
  }
  {
    Tensor rm = running_mean, rv = running_var;
    update_running(rm, r.mean, momentum);
    update_running(rv, r.var.detach() * (r.count / (r.count - 1)), momentum);  // the unbiased variance, as PyTorch keeps it
  }
  return channel_affine(r.y, weight, bias, x);
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
