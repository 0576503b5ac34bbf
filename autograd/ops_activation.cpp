// Activations and comparisons. An activation's value is one pass of its own
// kernel; its slope is written with ops right below it, so that backward
// with create_graph differentiates the slope in turn (every order). Pieces of
// a slope that are step functions are masks: constants with no history.
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg {

using detail::map;

namespace {

// y = value(a) elementwise, dy/da = slope(a), an op-built tensor of a's
// shape. `reals` are the op's attributes for a trace.
template <class F, class S>
Tensor pointwise(const char* op, const Tensor& a, F value, S slope, std::vector<double> reals = {}) {
  Tensor out = map(check_defined(a, op), value);
  return detail::traced(record(
                            op, out, {a},
                            [a, slope](const Tensor& g) { return std::vector<Tensor>{mul(g, slope(a))}; }, {a}),
                        [&reals](TracedOp& t) { t.attrs = attr::Params{reals}; });
}

// A constant mask of a's shape: f(x) at each element, no history.
template <class F>
Tensor mask_of(const Tensor& a, F f) {
  return map(a.detach(), [f](auto x) { return static_cast<decltype(x)>(f(static_cast<double>(x))); });
}

Tensor scalar_like(double s, const Tensor& a) { return scalar(s, a.dtype()); }

Tensor tanh_sech(const Tensor& a);

// 1 / cosh(a), from e^-|a| so that it neither overflows nor cancels: where
// tanh(a) nears 1, 1 - tanh(a)^2 keeps only the bits that tanh's rounding
// left, and sech(a)^2 keeps them all. Its slope -sech(a) tanh(a) stays
// bounded at every order.
Tensor sech(const Tensor& a) {
  return pointwise(
      "sech", a,
      [](auto x) {
        using T = decltype(x);
        T e;  // float32: the vectorisable exp of detail/kernels.h, as exp()'s
        if constexpr (std::is_same_v<T, float>) e = detail::fast_expf(-std::abs(x));
        else e = std::exp(-std::abs(x));
        return T(2) * e / (T(1) + e * e);
      },
      [](const Tensor& x) { return -(sech(x) * tanh_sech(x)); });
}

// tanh whose slope is sech(a)^2 (tanh's own is 1 - tanh(a)^2, read from its
// output, as PyTorch's): for slopes that must stay accurate where tanh
// saturates.
Tensor tanh_sech(const Tensor& a) {
  return pointwise(
      "tanh", a,
      [](auto x) {
        if constexpr (std::is_same_v<decltype(x), float>) return detail::fast_tanhf(x);  // as tanh()'s
        else return std::tanh(x);
      },
      [](const Tensor& x) {
        const Tensor s = sech(x);
        return s * s;
      });
}

// a with every element above 0 replaced by 0: the negative part, whose
// exponential cannot overflow (an elu slope's exp(a) where a > 0 is not
// used, but its inf would turn a zero gradient into NaN).
Tensor negative_part(const Tensor& a) { return clamp(a, -std::numeric_limits<double>::infinity(), 0.0); }

// scale (a > 0 ? a : alpha (e^(a k) - 1)): elu, selu and celu (k = 1/alpha).
Tensor elu_family(const char* op, const Tensor& a, double alpha, double scale, double k) {
  return pointwise(
      op, a,
      [alpha, scale, k](auto x) {
        using T = decltype(x);
        return x > 0 ? T(scale) * x : T(scale * alpha) * std::expm1(x * T(k));
      },
      [alpha, scale, k](const Tensor& x) {
        const Tensor pos = mask_of(x, [](double v) { return v > 0 ? 1.0 : 0.0; });
        const Tensor neg_slope = exp(negative_part(x) * k) * (scale * alpha * k);
        return where(pos, scalar_like(scale, x), neg_slope);
      },
      {alpha, scale, k});
}

// ln(1 + e^(beta a)) / beta without overflow: max(b, 0) + log1p(e^-|b|).
template <class T>
T softplus_value(T x, double beta, double threshold) {
  const T b = x * T(beta);
  if (b > T(threshold)) return x;
  return (std::max(b, T(0)) + std::log1p(std::exp(-std::abs(b)))) / T(beta);
}

Tensor softplus_unchecked(const Tensor& a, double beta, double threshold) {
  return pointwise(
      "softplus", a, [beta, threshold](auto x) { return softplus_value(x, beta, threshold); },
      [beta, threshold](const Tensor& x) {
        const Tensor above = mask_of(x, [=](double v) { return v * beta > threshold ? 1.0 : 0.0; });
        return where(above, scalar_like(1.0, x), sigmoid(x * beta));
      },
      {beta, threshold});
}

}  // namespace

// ---- piecewise linear ----------------------------------------------------------

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  return pointwise(
      "leaky_relu", a, [s = negative_slope](auto x) { return x > 0 ? x : x * decltype(x)(s); },
      [s = negative_slope](const Tensor& x) { return mask_of(x, [s](double v) { return v > 0 ? 1.0 : s; }); },
      {negative_slope});
}

Tensor hardtanh(const Tensor& a, double min_val, double max_val) {
  require(min_val <= max_val, fmt::format("hardtanh: min_val {} is above max_val {}", min_val, max_val));
  return pointwise(
      "hardtanh", a,
      [lo = min_val, hi = max_val](auto x) {
        using T = decltype(x);
        return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
      },
      [lo = min_val, hi = max_val](const Tensor& x) {
        return mask_of(x, [=](double v) { return v > lo && v < hi ? 1.0 : 0.0; });
      },
      {min_val, max_val});
}

Tensor relu6(const Tensor& a) { return hardtanh(a, 0.0, 6.0); }

Tensor hardsigmoid(const Tensor& a) {
  return pointwise(
      "hardsigmoid", a,
      [](auto x) {
        using T = decltype(x);
        return x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : x / T(6) + T(0.5));
      },
      [](const Tensor& x) { return mask_of(x, [](double v) { return v > -3 && v < 3 ? 1.0 / 6 : 0.0; }); });
}

Tensor hardswish(const Tensor& a) {
  return pointwise(
      "hardswish", a,
      [](auto x) {
        using T = decltype(x);
        return x <= T(-3) ? T(0) : (x >= T(3) ? x : x * (x + T(3)) / T(6));
      },
      [](const Tensor& x) {
        // a/3 + 1/2 inside (-3, 3), whose own slope 1/3 the second order
        // sees; PyTorch's constants at the ends and outside.
        const Tensor inside = mask_of(x, [](double v) { return v > -3 && v < 3 ? 1.0 : 0.0; });
        const Tensor rest = mask_of(x, [](double v) { return v == -3 ? -0.5 : v == 3 ? 1.5 : v > 3 ? 1.0 : 0.0; });
        return inside * (x * (1.0 / 3) + 0.5) + rest;
      });
}

Tensor softshrink(const Tensor& a, double lambd) {
  require(lambd >= 0, fmt::format("softshrink: lambd {}: expected >= 0", lambd));
  return pointwise(
      "softshrink", a,
      [l = lambd](auto x) {
        using T = decltype(x);
        return x > T(l) ? x - T(l) : (x < T(-l) ? x + T(l) : T(0));
      },
      [l = lambd](const Tensor& x) { return mask_of(x, [l](double v) { return v > l || v < -l ? 1.0 : 0.0; }); },
      {lambd});
}

Tensor hardshrink(const Tensor& a, double lambd) {
  require(lambd >= 0, fmt::format("hardshrink: lambd {}: expected >= 0", lambd));
  return pointwise(
      "hardshrink", a, [l = lambd](auto x) { return x > decltype(x)(l) || x < decltype(x)(-l) ? x : decltype(x)(0); },
      [l = lambd](const Tensor& x) { return mask_of(x, [l](double v) { return v > l || v < -l ? 1.0 : 0.0; }); },
      {lambd});
}

Tensor threshold(const Tensor& a, double threshold, double value) {
  return pointwise(
      "threshold", a, [t = threshold, v = value](auto x) { return x > decltype(x)(t) ? x : decltype(x)(v); },
      [t = threshold](const Tensor& x) { return mask_of(x, [t](double v) { return v > t ? 1.0 : 0.0; }); },
      {threshold, value});
}

// ---- exponential family ------------------------------------------------------------

Tensor elu(const Tensor& a, double alpha) { return elu_family("elu", a, alpha, 1.0, 1.0); }

Tensor selu(const Tensor& a) {
  return elu_family("selu", a, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}

Tensor celu(const Tensor& a, double alpha) {
  require(alpha != 0, "celu: alpha must not be 0 (it divides the input)");
  return elu_family("celu", a, alpha, 1.0, 1.0 / alpha);
}

Tensor softplus(const Tensor& a, double beta, double threshold) {
  require(beta != 0, "softplus: beta must not be 0 (it divides the result)");
  return softplus_unchecked(a, beta, threshold);
}

Tensor silu(const Tensor& a) {
  return pointwise(
      "silu", a,
      [](auto x) {
        using T = decltype(x);
        return x >= 0 ? x / (T(1) + std::exp(-x)) : x * std::exp(x) / (T(1) + std::exp(x));
      },
      [](const Tensor& x) {
        const Tensor s = sigmoid(x);
        return s * (1.0 + x * (1.0 - s));  // s + x s (1 - s)
      });
}

Tensor mish(const Tensor& a) {
  const double inf = std::numeric_limits<double>::infinity();
  return pointwise(
      "mish", a, [inf](auto x) { return x * std::tanh(softplus_value(x, 1.0, inf)); },
      [inf](const Tensor& x) {
        const Tensor t = tanh(softplus_unchecked(x, 1.0, inf));
        return t + x * sigmoid(x) * (1.0 - t * t);
      });
}

Tensor gelu(const Tensor& a, const std::string& approximate) {
  if (approximate == "none") return gelu(a);
  require(approximate == "tanh", "gelu: approximate \"" + approximate + "\": expected \"none\" or \"tanh\"");
  constexpr double k = 0.79788456080286535588;  // sqrt(2 / pi)
  constexpr double c = 0.044715;
  return pointwise(
      "gelu_tanh", a,
      [](auto x) {
        using T = decltype(x);
        return T(0.5) * x * (T(1) + std::tanh(T(k) * (x + T(c) * x * x * x)));
      },
      [](const Tensor& x) {
        // tanh's slope as sech^2 rather than 1 - tanh^2, as PyTorch's second
        // derivative writes it: accurate where the inner value is large, at
        // every order
        const Tensor x2 = x * x, inner = (x + x2 * x * c) * k, s = sech(inner);
        return (1.0 + tanh_sech(inner)) * 0.5 + x * (s * s) * (1.0 + x2 * (3 * c)) * (0.5 * k);
      });
}

Tensor logsigmoid(const Tensor& a) {
  return pointwise(
      "logsigmoid", a,
      [](auto x) {
        using T = decltype(x);
        return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
      },
      [](const Tensor& x) { return sigmoid(-x); });
}

Tensor log1p(const Tensor& a) {
  return pointwise(
      "log1p", a, [](auto x) { return std::log1p(x); }, [](const Tensor& x) { return 1.0 / (x + 1.0); });
}

Tensor expm1(const Tensor& a) {
  // The slope e^a read from the output, as PyTorch (a gradient with respect
  // to the output sees it).
  Tensor out = map(check_defined(a, "expm1"), [](auto x) { return std::expm1(x); });
  return record(
      "expm1", out, {a},
      [out = out.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, detail::saved_output(out) + 1.0)}; },
      {out});
}

// ---- composed --------------------------------------------------------------------

Tensor softsign(const Tensor& a) { return check_defined(a, "softsign") / (abs(a) + 1.0); }

Tensor tanhshrink(const Tensor& a) { return check_defined(a, "tanhshrink") - tanh(a); }

Tensor softmin(const Tensor& a, int64_t dim) { return softmax(-check_defined(a, "softmin"), dim); }

Tensor glu(const Tensor& a, int64_t dim) {
  check_defined(a, "glu");
  if (a.dim() == 0) throw ShapeError("glu: a scalar input cannot be halved (expected at least one dimension)");
  const int64_t d = normalize_axis(dim, a.dim(), "glu");
  if (a.size(d) % 2 != 0)
    throw ShapeError(fmt::format("glu: dimension {} of input {} has odd size {} (it is halved)", dim,
                                 shape_str(a.shape()), a.size(d)));
  const std::vector<Tensor> halves = chunk(a, 2, d);
  return halves[0] * sigmoid(halves[1]);
}

Tensor prelu(const Tensor& a, const Tensor& weight) {
  check_defined(a, "prelu");
  check_defined(weight, "prelu");
  const int64_t channels = a.dim() >= 2 ? a.size(1) : 1;
  if (weight.dim() > 1 || (weight.numel() != 1 && weight.numel() != channels))
    throw ShapeError(fmt::format("prelu: weight {} must hold 1 value or one per channel ({}, dimension 1 of input {})",
                                 shape_str(weight.shape()), channels, shape_str(a.shape())));
  Tensor w = weight.dim() == 0 ? weight : reshape(weight, {weight.numel()});
  if (weight.numel() > 1) {  // (C) -> (C, 1, ..., 1) against (N, C, ...)
    Shape s(static_cast<size_t>(a.dim() - 1), 1);
    s[0] = channels;
    w = reshape(w, s);
  } else {
    w = reshape(w, {});
  }
  return where(gt(a, 0.0), a, a * w);
}

Tensor rrelu(const Tensor& a, double lower, double upper, bool training, Generator* gen) {
  check_defined(a, "rrelu");
  require(lower <= upper, fmt::format("rrelu: lower {} is above upper {}", lower, upper));
  if (!training) return leaky_relu(a, (lower + upper) / 2);
  Generator& g = generator_or_default(gen);
  std::vector<double> slopes(static_cast<size_t>(a.numel()));
  const std::vector<double> x = a.to_vector();
  for (size_t i = 0; i < slopes.size(); ++i) slopes[i] = x[i] >= 0 ? 1.0 : g.uniform(lower, upper);
  return a * from_vector(slopes, a.shape(), a.dtype());
}

// ---- comparisons -------------------------------------------------------------------

namespace {

template <class F>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_defined_any(a, op);
  check_defined_any(b, op);
  detail::check_same_dtype(a, b, op);
  const Shape out_shape = detail::broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = make_tensor(out_shape, a.dtype());
  dispatch_any(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    const auto sa = detail::broadcast_strides(a.shape(), out_shape);
    const auto sb = detail::broadcast_strides(b.shape(), out_shape);
    detail::for_each_strided<2>(out_shape, {&sa, &sb}, [&](int64_t o, const std::array<int64_t, 2>& off) {
      po[o] = f(pa[off[0]], pb[off[1]]) ? T(1) : T(0);
    });
  });
  // No history: a mask. An export trace lists it with its operands as `extra`.
  return detail::traced(record(op, out, {}, [](const Tensor&) { return std::vector<Tensor>{}; }),
                        [&](TracedOp& t) { t.extra = {a, b}; });
}

Tensor scalar_of(const Tensor& a, double b, const char* op) { return scalar(b, check_defined_any(a, op).dtype()); }

}  // namespace

Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", a, b, [](auto x, auto y) { return x > y; }); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", a, b, [](auto x, auto y) { return x >= y; }); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", a, b, [](auto x, auto y) { return x < y; }); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", a, b, [](auto x, auto y) { return x <= y; }); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", a, b, [](auto x, auto y) { return x == y; }); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", a, b, [](auto x, auto y) { return x != y; }); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_of(a, b, "gt")); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_of(a, b, "ge")); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_of(a, b, "lt")); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_of(a, b, "le")); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_of(a, b, "eq")); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_of(a, b, "ne")); }

}  // namespace xg
