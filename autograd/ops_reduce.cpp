// Reductions over any set of axes. A contiguous block of reduced axes (the
// common case: last axis, leading axes, one axis) runs as a plain
// (outer, reduced, inner) loop; other sets go through the strided walker.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/ops.h"

namespace xg {

namespace {

struct ReducePlan {
  Shape keep_shape;  // the input's shape with reduced dimensions set to 1
  Shape out_shape;   // keep_shape, or without those dimensions
  std::vector<bool> reduced;
  int64_t count = 1;  // elements folded into each output
  // Set when the reduced axes are one contiguous block [first, last).
  bool block = false;
  int64_t outer = 1, mid = 1, inner = 1;
};

ReducePlan plan_reduce(const Shape& s, const std::vector<int64_t>& axes, bool keepdims, const char* op) {
  const int64_t nd = static_cast<int64_t>(s.size());
  ReducePlan p;
  p.reduced.assign(nd, axes.empty());
  for (int64_t ax : axes) {
    int64_t a = normalize_axis(ax, nd, op);
    if (p.reduced[a]) throw ShapeError(std::string(op) + ": axis " + std::to_string(ax) + " given twice for shape " + shape_str(s));
    p.reduced[a] = true;
  }
  int64_t first = -1, last = -1, blocks = 0;
  for (int64_t i = 0; i < nd; ++i) {
    if (p.reduced[i]) {
      p.keep_shape.push_back(1);
      if (keepdims) p.out_shape.push_back(1);
      p.count *= s[i];
      if (first < 0 || !p.reduced[i - 1]) ++blocks, first = first < 0 ? i : first;
      last = i + 1;
    } else {
      p.keep_shape.push_back(s[i]);
      p.out_shape.push_back(s[i]);
    }
  }
  if (blocks <= 1) {
    p.block = true;
    if (first < 0) first = last = nd;
    for (int64_t i = 0; i < first; ++i) p.outer *= s[i];
    for (int64_t i = first; i < last; ++i) p.mid *= s[i];
    for (int64_t i = last; i < nd; ++i) p.inner *= s[i];
  }
  return p;
}

// Sums accumulate in double (float32 inputs too): a float32 sum of n terms
// in float32 drifts by up to n roundings (a bias gradient over a batch of
// images sums thousands), where PyTorch's cascaded sum drifts by about log n;
// one rounding at the end keeps xgrad at or below that.
template <class T>
void sum_kernel(const T* x, const Shape& s, const ReducePlan& p, T* out) {
  const int64_t n_out = shape_numel(p.keep_shape);
  if (p.block) {
    std::vector<double> acc(p.inner == 1 ? 0 : static_cast<size_t>(p.inner));
    for (int64_t o = 0; o < p.outer; ++o) {
      T* dst = out + o * p.inner;
      const T* src = x + o * p.mid * p.inner;
      if (p.inner == 1) {
        double a = 0;
#pragma omp simd reduction(+ : a)
        for (int64_t r = 0; r < p.mid; ++r) a += static_cast<double>(src[r]);
        dst[0] = static_cast<T>(a);
      } else {
        std::fill(acc.begin(), acc.end(), 0.0);
        double* ap = acc.data();
        for (int64_t r = 0; r < p.mid; ++r) {
          const T* row = src + r * p.inner;
#pragma omp simd
          for (int64_t i = 0; i < p.inner; ++i) ap[i] += static_cast<double>(row[i]);
        }
        for (int64_t i = 0; i < p.inner; ++i) dst[i] = static_cast<T>(ap[i]);
      }
    }
    return;
  }
  std::vector<double> acc(static_cast<size_t>(n_out), 0.0);
  auto outs = detail::broadcast_strides(p.keep_shape, s);
  detail::for_each_strided<1>(s, {&outs}, [&](int64_t i, const std::array<int64_t, 1>& off) {
    acc[off[0]] += static_cast<double>(x[i]);
  });
  for (int64_t i = 0; i < n_out; ++i) out[i] = static_cast<T>(acc[i]);
}

// The trace's attributes of a reduction: the reduced axes and keepdims.
attr::Axes traced_axes(const ReducePlan& p, bool keepdims) {
  attr::Axes a{{}, keepdims};
  for (size_t i = 0; i < p.reduced.size(); ++i)
    if (p.reduced[i]) a.axes.push_back(static_cast<int64_t>(i));
  return a;
}

Tensor sum_forward(const Tensor& a, const ReducePlan& p) {
  Tensor out = make_tensor(p.out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    sum_kernel(a.data<T>(), a.shape(), p, out.data<T>());
  });
  return out;
}

}  // namespace

namespace detail {
Tensor unbroadcast(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const size_t lead = g.shape().size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  if (axes.empty()) return reshape(g, shape);
  return reshape(sum(g, axes, true), shape);
}
}  // namespace detail

Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdims) {
  ReducePlan p = plan_reduce(check_defined(a, "sum").shape(), axes, keepdims, "sum");
  Tensor out = sum_forward(a, p);
  Tensor r = record("sum", out, {a}, [in = a.shape(), keep = p.keep_shape](const Tensor& g) {
    return std::vector<Tensor>{broadcast_to(reshape(g, keep), in)};
  });
  return detail::traced(r, [&](TracedOp& t) { t.attrs = traced_axes(p, keepdims); });
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdims) {
  ReducePlan p = plan_reduce(check_defined(a, "mean").shape(), axes, keepdims, "mean");
  if (p.count == 0) throw ShapeError("mean: reducing over zero elements of shape " + shape_str(a.shape()));
  Tensor out = sum(a, axes, keepdims) * (1.0 / static_cast<double>(p.count));
  // Traced as one op rather than as the sum and its scaling.
  return detail::traced(out, [&](TracedOp& t) {
    t = TracedOp{"mean", t.scope, {a}, out, traced_axes(p, keepdims), {}};
  });
}

Tensor max(const Tensor& a, const std::vector<int64_t>& axes, bool keepdims) {
  ReducePlan p = plan_reduce(check_defined(a, "max").shape(), axes, keepdims, "max");
  if (p.count == 0) throw ShapeError("max: reducing over zero elements of shape " + shape_str(a.shape()));
  Tensor out = make_tensor(p.out_shape, a.dtype());
  const int64_t n_out = out.numel();
  auto arg = std::make_shared<std::vector<int64_t>>(n_out, -1);  // flat input index of each maximum
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* x = a.data<T>();
    T* o = out.data<T>();
    auto outs = detail::broadcast_strides(p.keep_shape, a.shape());
    detail::for_each_strided<1>(a.shape(), {&outs}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      int64_t& k = (*arg)[off[0]];
      if (k < 0 || x[i] > o[off[0]] || (std::isnan(x[i]) && !std::isnan(o[off[0]]))) {
        k = i;
        o[off[0]] = x[i];
      }
    });
  });
  // Backward scatters g to each maximum: put_add, whose own backward (the
  // gather) serves the second order.
  const Tensor y = record("max", out, {a}, [arg, in = a.shape()](const Tensor& g) {
    return std::vector<Tensor>{detail::put_add(g, arg, in)};
  });
  return detail::traced(y, [&](TracedOp& t) { t.attrs = traced_axes(p, keepdims); });
}

Tensor var(const Tensor& a, const std::vector<int64_t>& axes, int64_t correction, bool keepdims) {
  ReducePlan p = plan_reduce(check_defined(a, "var").shape(), axes, keepdims, "var");
  if (correction < 0) throw ShapeError("var: correction " + std::to_string(correction) + ": expected >= 0");
  const int64_t dof = p.count - correction;
  if (dof <= 0)
    throw ShapeError("var: " + std::to_string(p.count) + " elements per output of shape " + shape_str(a.shape()) +
                     (correction ? " leave no degree of freedom (correction " + std::to_string(correction) + ")"
                                 : " is empty"));
  Tensor d = a - mean(a, axes, true);  // composed: the gradient comes from sub, mul, sum
  return sum(d * d, axes, keepdims) * (1.0 / static_cast<double>(dof));
}

Tensor std(const Tensor& a, const std::vector<int64_t>& axes, int64_t correction, bool keepdims) {
  return sqrt(var(a, axes, correction, keepdims));
}

Tensor vector_norm(const Tensor& a, double ord, const std::vector<int64_t>& axes, bool keepdims) {
  const ReducePlan p = plan_reduce(check_defined(a, "vector_norm").shape(), axes, keepdims, "vector_norm");
  if (!(ord > 0))
    throw std::invalid_argument("vector_norm: ord " + std::to_string(ord) + ": expected > 0 or infinity");
  if (std::isinf(ord)) return max(abs(a), axes, keepdims);
  if (ord == 1) return sum(abs(a), axes, keepdims);
  Tensor out;
  {
    NoGradGuard no_tape;  // the value; backward below reads it, as PyTorch's does
    out = ord == 2 ? sqrt(sum(a * a, axes, keepdims)) : pow(sum(pow(abs(a), ord), axes, keepdims), 1.0 / ord);
  }
  const attr::Axes axes_traced = traced_axes(p, keepdims);
  return detail::traced(record(
      "vector_norm", out, {a},
      [a, out = out.detach(), ord, keep = p.keep_shape](const Tensor& g) {
        // d||a||/da = sign(a) |a|^(ord-1) / ||a||^(ord-1); 0 where the norm is 0
        const Tensor n = reshape(detail::saved_output(out), keep), gk = reshape(g, keep);
        const Tensor zero = detail::map(n.detach(), [](auto x) { return decltype(x)(x == 0 ? 1 : 0); });
        if (ord == 2) return std::vector<Tensor>{a * (gk / (n + zero))};
        const Tensor sign = detail::map(a.detach(), [](auto x) { return decltype(x)((x > 0) - (x < 0)); });
        return std::vector<Tensor>{sign * pow(abs(a), ord - 1) * (gk / (pow(n, ord - 1) + zero))};
      },
      {a, out}), [&](TracedOp& t) {
        t.attrs = attr::Norm{axes_traced.axes, keepdims, ord};
      });
}

std::vector<int64_t> argmax(const Tensor& a, int64_t axis) {
  const int64_t ax = normalize_axis(axis, check_defined(a, "argmax").dim(), "argmax");
  const Shape& s = a.shape();
  int64_t outer = 1, n = s[ax], inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= s[i];
  for (int64_t i = ax + 1; i < a.dim(); ++i) inner *= s[i];
  if (n == 0) throw ShapeError("argmax: axis " + std::to_string(axis) + " of shape " + shape_str(s) + " is empty");
  std::vector<int64_t> r(outer * inner);
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* x = a.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = x + o * n * inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k)
          if (base[k * inner] > base[best * inner]) best = k;
        r[o * inner + i] = best;
      }
  });
  return r;
}

}  // namespace xg
