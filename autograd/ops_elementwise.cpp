// Elementwise ops: forward kernel, and right below it the backward closure.
#include <cmath>
#include <type_traits>

#include "autograd/detail/impl.h"
#include "autograd/detail/kernels.h"
#include "autograd/detail/iter.h"
#include "autograd/ops.h"

namespace xg {

using detail::map;
using detail::unbroadcast;

namespace detail {
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw ShapeError(std::string(op) + ": dtype mismatch, " + dtype_name(a.dtype()) + " " + shape_str(a.shape()) +
                     " vs " + dtype_name(b.dtype()) + " " + shape_str(b.shape()) + " (convert one with .to())");
}

bool writable_alone(const Tensor& acc) {
  if (grad_enabled() || !acc.defined()) return false;
  const std::shared_ptr<TensorImpl>& impl = acc.impl();
  // Only this handle sees acc's values (no other tensor, view or saved
  // copy), they are xgrad's own storage, and no graph has recorded them.
  return impl.use_count() == 1 && impl->buf.use_count() == 1 && !impl->buf->owner && !impl->grad_fn &&
         !impl->requires_grad;
}

bool add_in_place(Tensor& acc, const Tensor& g) {
  if (!g.defined() || !writable_alone(acc) || acc.dtype() != g.dtype() || acc.shape() != g.shape() ||
      (acc.dtype() != f32 && acc.dtype() != f64))
    return false;
  // Both in one layout: row-major, or the same channel block (whose storage
  // has no padding: make_blocked), read as stored.
  const StoredView va = stored_view(acc), vg = stored_view(g);
  if (va.block != vg.block) return false;
  dispatch(acc.dtype(), [&](auto z) {
    using T = decltype(z);
    T* pa = va.block ? reinterpret_cast<T*>(va.p) : acc.data<T>();
    const T* pg = vg.block ? reinterpret_cast<const T*>(vg.p) : g.data<T>();
    parallel_for(acc.numel(), 2, [=](int64_t i0, int64_t i1) {
      if constexpr (std::is_same_v<T, float>)
        elementwise_range(i0, i1, [=](int64_t i) { pa[i] += pg[i]; });
      else
        for (int64_t i = i0; i < i1; ++i) pa[i] += pg[i];
    });
  });
  acc.impl()->buf->version.fetch_add(1, std::memory_order_relaxed);  // no saved tensor holds it: no global write counted
  return true;
}

}  // namespace detail

namespace {

// The channel block of binary_kernel's result (of shape `out`) from its
// operands' layouts ba and bb: that of a blocked operand when the other has
// its shape or is a scalar that leaves it unchanged, else 0 (a blocked
// operand is then read as row-major).
int common_block(const Tensor& a, int ba, const Tensor& b, int bb, const Shape& out) {
  if (a.shape() == b.shape()) return ba != 0 ? ba : bb;
  if (b.numel() == 1 && a.shape() == out) return ba;
  if (a.numel() == 1 && b.shape() == out) return bb;
  return 0;
}

// out = f(a, b) with NumPy broadcasting; no tape.
template <class F>
Tensor binary_kernel(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_defined(a, op);
  check_defined(b, op);
  detail::check_same_dtype(a, b, op);
  Shape out_shape = a.shape() == b.shape() ? a.shape() : detail::broadcast_shapes(a.shape(), b.shape(), op);
  detail::StoredView va = detail::stored_view(a), vb = detail::stored_view(b);
  const int block = common_block(a, va.block, b, vb.block, out_shape);
  Tensor out = block ? detail::make_blocked(out_shape, block) : make_tensor(out_shape, a.dtype());
  Tensor a_copy, b_copy;
  if (block == 0) {
    va = vb = {};  // read row-major below: a blocked operand's storage is freed when it is converted
  } else {
    // An operand of the result's shape in another layout is read from a
    // blocked copy, which keeps the rest of the chain (a residual's gradient
    // beside a convolution's) blocked; a scalar is read as it is.
    if (a.shape() == out_shape) va = detail::stored_in_block(a, block, a_copy);
    if (b.shape() == out_shape) vb = detail::stored_in_block(b, block, b_copy);
  }
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    // Blocked: the same layout on every side, so elementwise reads need no conversion.
    const T* pa = block ? reinterpret_cast<const T*>(va.p) : a.data<T>();
    const T* pb = block ? reinterpret_cast<const T*>(vb.p) : b.data<T>();
    T* po = block ? reinterpret_cast<T*>(detail::stored_view(out).p) : out.data<T>();
    const int64_t n = out.numel();
    if (a.shape() == b.shape()) {
      parallel_for(n, 2, [=](int64_t i0, int64_t i1) {
        const auto fl = f;
        if constexpr (std::is_same_v<T, float>)
          detail::elementwise_range(i0, i1, [=](int64_t i) { po[i] = fl(pa[i], pb[i]); });
        else
          for (int64_t i = i0; i < i1; ++i) po[i] = fl(pa[i], pb[i]);
      });
    } else if (b.numel() == 1) {
      const T y = pb[0];
      parallel_for(n, 2, [=](int64_t i0, int64_t i1) {
        const T yl = y;  // a local: the closure's copy could alias po[i]
        const auto fl = f;
        for (int64_t i = i0; i < i1; ++i) po[i] = fl(pa[i], yl);
      });
    } else if (a.numel() == 1) {
      const T x = pa[0];
      parallel_for(n, 2, [=](int64_t i0, int64_t i1) {
        const T xl = x;
        const auto fl = f;
        for (int64_t i = i0; i < i1; ++i) po[i] = fl(xl, pb[i]);
      });
    } else {
      auto sa = detail::broadcast_strides(a.shape(), out_shape);
      auto sb = detail::broadcast_strides(b.shape(), out_shape);
      detail::parallel_for_each_strided<2>(out_shape, {&sa, &sb}, 4, [&](int64_t o, const std::array<int64_t, 2>& off) {
        po[o] = f(pa[off[0]], pb[off[1]]);
      });
    }
  });
  return out;
}

Tensor scalar_like(double s, const Tensor& a) { return scalar(s, check_defined(a, "scalar op").dtype()); }

}  // namespace

// ---- binary ------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("add", a, b, [](auto x, auto y) { return x + y; });
  return record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(g, sa) : Tensor(),
                               needs_input_grad(1) ? unbroadcast(g, sb) : Tensor()};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("sub", a, b, [](auto x, auto y) { return x - y; });
  return record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(g, sa) : Tensor(),
                               needs_input_grad(1) ? unbroadcast(neg(g), sb) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("mul", a, b, [](auto x, auto y) { return x * y; });
  return record(
      "mul", out, {a, b},
      [a, b](const Tensor& g) {
        return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(mul(g, b), a.shape()) : Tensor(),
                                   needs_input_grad(1) ? unbroadcast(mul(g, a), b.shape()) : Tensor()};
      },
      {a, b});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("div", a, b, [](auto x, auto y) { return x / y; });
  return record(
      "div", out, {a, b},
      [a, b](const Tensor& g) {
        Tensor ga = div(g, b);  // d(a/b)/da = 1/b
        Tensor gb = needs_input_grad(1) ? neg(mul(ga, div(a, b))) : Tensor();  // d(a/b)/db = -a/b^2
        return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(ga, a.shape()) : Tensor(),
                                   gb.defined() ? unbroadcast(gb, b.shape()) : Tensor()};
      },
      {a, b});
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("pow", a, b, [](auto x, auto y) { return std::pow(x, y); });
  return record(
      "pow", out, {a, b},
      [a, b, out = out.detach()](const Tensor& g) {
        // d/da = b a^(b-1); d/db = a^b log a (defined for a > 0)
        Tensor ga, gb;
        if (needs_input_grad(0)) ga = unbroadcast(mul(g, mul(b, pow(a, sub(b, scalar_like(1.0, b))))), a.shape());
        if (needs_input_grad(1)) gb = unbroadcast(mul(g, mul(detail::saved_output(out), log(a))), b.shape());
        return std::vector<Tensor>{ga, gb};
      },
      {a, b, out});
}

Tensor pow(const Tensor& a, double e) {
  Tensor out = detail::map(check_defined(a, "pow"), [e](auto x) { return static_cast<decltype(x)>(std::pow(x, e)); });
  return detail::traced(record(
                    "pow", out, {a},
                    [a, e](const Tensor& g) {
                      // a^0 is the constant 1, whose slope is 0 at a = 0 too (e a^(e-1) would be 0 * inf there)
                      if (e == 0) return std::vector<Tensor>{zeros(a.shape(), a.dtype())};
                      return std::vector<Tensor>{mul(g, mul(pow(a, e - 1.0), scalar_like(e, a)))};
                    },
                    {a}),
                [e](TracedOp& t) { t.attrs = attr::Scalar{e}; });
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("maximum", a, b, [](auto x, auto y) { return x >= y ? x : y; });
  return record(
      "maximum", out, {a, b},
      [a = a.detach(), b = b.detach()](const Tensor& g) {
        Tensor a_wins = binary_kernel("maximum", a, b, [](auto x, auto y) { return decltype(x)(x >= y ? 1 : 0); });
        Tensor ga = mul(g, a_wins);
        Tensor gb = needs_input_grad(1) ? unbroadcast(sub(g, ga), b.shape()) : Tensor();
        return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(ga, a.shape()) : Tensor(), gb};
      },
      {a, b});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
// Scalar forms: unary ops, so that backward does no work for the constant.
Tensor operator+(const Tensor& a, double s) {
  Tensor out = map(check_defined(a, "add"), [s](auto x) { return x + decltype(x)(s); });
  return detail::traced(record("add_scalar", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{g}; }),
                [s](TracedOp& t) { t.attrs = attr::Scalar{s}; });
}
Tensor operator+(double s, const Tensor& a) { return a + s; }
Tensor operator-(const Tensor& a, double s) { return a + (-s); }
Tensor operator-(double s, const Tensor& a) { return neg(a) + s; }
Tensor operator*(const Tensor& a, double s) {
  Tensor out = map(check_defined(a, "mul"), [s](auto x) { return x * decltype(x)(s); });
  return detail::traced(record("mul_scalar", out, {a}, [s](const Tensor& g) { return std::vector<Tensor>{g * s}; }),
                [s](TracedOp& t) { t.attrs = attr::Scalar{s}; });
}
Tensor operator*(double s, const Tensor& a) { return a * s; }
Tensor operator/(const Tensor& a, double s) { return a * (1.0 / s); }
Tensor operator/(double s, const Tensor& a) { return pow(a, -1.0) * s; }

// ---- unary -----------------------------------------------------------------------

Tensor neg(const Tensor& a) {
  Tensor out = map(check_defined(a, "neg"), [](auto x) { return -x; });
  return record("neg", out, {a}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor exp(const Tensor& a) {
  Tensor out = map(check_defined(a, "exp"), [](auto x) { return std::exp(x); });
  return record(
      "exp", out, {a},
      [out = out.detach()](const Tensor& g) { return std::vector<Tensor>{mul(g, detail::saved_output(out))}; }, {out});
}

Tensor log(const Tensor& a) {
  Tensor out = map(check_defined(a, "log"), [](auto x) { return std::log(x); });
  return record(
      "log", out, {a}, [a](const Tensor& g) { return std::vector<Tensor>{div(g, a)}; }, {a});
}

Tensor sqrt(const Tensor& a) {
  Tensor out = map(check_defined(a, "sqrt"), [](auto x) { return std::sqrt(x); });
  return record("sqrt", out, {a}, [out = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{div(mul(g, scalar_like(0.5, g)), detail::saved_output(out))};  // 1 / (2 sqrt(a))
  }, {out});
}

Tensor abs(const Tensor& a) {
  Tensor out = map(check_defined(a, "abs"), [](auto x) { return std::abs(x); });
  return record("abs", out, {a}, [a = a.detach()](const Tensor& g) {
    Tensor sign = map(a, [](auto x) { return decltype(x)((x > 0) - (x < 0)); });
    return std::vector<Tensor>{mul(g, sign)};
  }, {a});
}

Tensor relu(const Tensor& a) {
  Tensor out = map(check_defined(a, "relu"), [](auto x) { return x > 0 ? x : decltype(x)(0); });
  // Backward reads the output (out > 0 exactly where a > 0): the input need not stay alive.
  return record("relu", out, {a}, [out = out.detach()](const Tensor& g) {
    if (grad_enabled())  // second order: the mask is a constant factor
      return std::vector<Tensor>{mul(g, map(out, [](auto y) { return decltype(y)(y > 0 ? 1 : 0); }))};
    return std::vector<Tensor>{binary_kernel("relu", g, out, [](auto gi, auto y) { return y > 0 ? gi : decltype(gi)(0); })};
  }, {out});
}

namespace {
// d gelu / dx = Phi(x) + x phi(x), as an op of its own (for gelu's second
// order); its derivative phi(x) (2 - x^2) is written with ops, so every
// order follows. phi(x) = exp(-x^2/2) / sqrt(2 pi).
Tensor gelu_slope(const Tensor& a) {
  Tensor out = map(a, [](auto x) {
    using T = decltype(x);
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    return cdf + x * T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
  });
  return record(
      "gelu_slope", out, {a},
      [a](const Tensor& g) {
        const Tensor x2 = mul(a, a);
        const Tensor phi = exp(x2 * -0.5) * 0.39894228040143267794;
        return std::vector<Tensor>{mul(g, mul(phi, 2.0 - x2))};
      },
      {a});
}
}  // namespace

Tensor gelu(const Tensor& a) {
  // gelu(x) = x * Phi(x), Phi the standard normal CDF. float32 uses the
  // vectorisable erf and exp of detail/kernels.h (absolute error ~2e-7);
  // float64 the C library's, for gradient checks.
  Tensor out = map(check_defined(a, "gelu"), [](auto x) {
    if constexpr (std::is_same_v<decltype(x), float>) return 0.5f * x * (1.0f + detail::fast_erff(x * 0.70710678f));
    else return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440));
  });
  return record("gelu", out, {a}, [a](const Tensor& g) {
    if (grad_enabled()) return std::vector<Tensor>{mul(g, gelu_slope(a))};  // second order
    // g * d/dx, d/dx = Phi(x) + x * phi(x): one pass over g and the input.
    return std::vector<Tensor>{binary_kernel("gelu", g, a, [](auto gi, auto x) {
      if constexpr (std::is_same_v<decltype(x), float>) {
        // One exponential for both terms: e^(-z^2) with z = x / sqrt(2) is
        // erf's and phi's. fast_expf gives about 1e-38 where e^(-z^2) is
        // smaller, so x = +-inf would give +-inf; float64 and PyTorch give
        // inf * 0 = NaN there. x - x is 0 for finite x and NaN for +-inf
        // (kept: the build does not assume finite math), cheaper than a
        // test of e.
        const float z = x * 0.70710678f, e = detail::fast_expf(-z * z);
        const float cdf = 0.5f * (1.0f + detail::erff_given_exp(z, e));
        return gi * (cdf + x * 0.39894228f * e + (x - x));
      } else {
        const double cdf = 0.5 * (1.0 + std::erf(x * 0.70710678118654752440));
        return gi * (cdf + x * 0.39894228040143267794 * std::exp(-0.5 * x * x));
      }
    })};
  }, {a});
}

Tensor tanh(const Tensor& a) {
  // float32: the vectorisable tanh of detail/kernels.h (below 1e-6
  // relative); float64 the C library's, for gradient checks.
  Tensor out = map(check_defined(a, "tanh"), [](auto x) {
    if constexpr (std::is_same_v<decltype(x), float>) return detail::fast_tanhf(x);
    else return std::tanh(x);
  });
  return record("tanh", out, {a}, [out = out.detach()](const Tensor& g) {
    if (grad_enabled()) {  // second order: 1 - y^2 through the output itself
      const Tensor y = detail::saved_output(out);
      return std::vector<Tensor>{mul(g, 1.0 - mul(y, y))};
    }
    return std::vector<Tensor>{mul(g, map(out, [](auto y) { return 1 - y * y; }))};
  }, {out});
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = map(check_defined(a, "sigmoid"), [](auto x) {
    // float32 vectorisable (detail/kernels.h); float64 stable on both sides
    if constexpr (std::is_same_v<decltype(x), float>) return detail::fast_sigmoidf(x);
    else return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
  });
  return record("sigmoid", out, {a}, [out = out.detach()](const Tensor& g) {
    if (grad_enabled()) {  // second order: y (1 - y) through the output itself
      const Tensor y = detail::saved_output(out);
      return std::vector<Tensor>{mul(g, sub(y, mul(y, y)))};
    }
    return std::vector<Tensor>{mul(g, map(out, [](auto y) { return y * (1 - y); }))};
  }, {out});
}

Tensor clamp(const Tensor& a, double lo, double hi) {
  if (lo > hi)
    throw ShapeError("clamp: lower bound " + std::to_string(lo) + " is above upper bound " + std::to_string(hi));
  Tensor out = map(check_defined(a, "clamp"), [lo, hi](auto x) {
    using T = decltype(x);
    return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
  });
  const Tensor y = record("clamp", out, {a}, [a = a.detach(), lo, hi](const Tensor& g) {
    Tensor inside = map(a, [lo, hi](auto x) {
      using T = decltype(x);
      return T(x >= T(lo) && x <= T(hi) ? 1 : 0);
    });
    return std::vector<Tensor>{mul(g, inside)};
  }, {a});
  return detail::traced(y, [&](TracedOp& t) { t.attrs = attr::Params{{lo, hi}}; });  // exported as hardtanh is
}

// ---- where / masked_fill ---------------------------------------------------------------

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where");
  Shape ab = detail::broadcast_shapes(check_defined(a, "where").shape(), check_defined(b, "where").shape(), "where");
  Shape out_shape = detail::broadcast_shapes(cond.shape(), ab, "where");
  detail::check_same_dtype(a, b, "where");
  Tensor c = cond.dtype() == a.dtype() ? cond : cond.detach().to(a.dtype());
  // Select with an exact 0/1 mask: where(c, a, b) = a*m + b*(1-m) would turn 0*inf into nan.
  Tensor pick_a = map(c, [](auto x) { return decltype(x)(x != 0 ? 1 : 0); });
  Tensor out = make_tensor(out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T *pc = pick_a.data<T>(), *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    auto sc = detail::broadcast_strides(c.shape(), out_shape);
    auto sa = detail::broadcast_strides(a.shape(), out_shape);
    auto sb = detail::broadcast_strides(b.shape(), out_shape);
    detail::for_each_strided<3>(out_shape, {&sc, &sa, &sb}, [&](int64_t o, const std::array<int64_t, 3>& off) {
      po[o] = pc[off[0]] != 0 ? pa[off[1]] : pb[off[2]];
    });
  });
  Tensor r = record("where", out, {a, b}, [m = pick_a, sa = a.shape(), sb = b.shape()](const Tensor& g) {
    Tensor ga = mul(g, m);
    Tensor gb = needs_input_grad(1) ? unbroadcast(sub(g, ga), sb) : Tensor();
    return std::vector<Tensor>{needs_input_grad(0) ? unbroadcast(ga, sa) : Tensor(), gb};
  });
  return detail::traced(r, [&cond](TracedOp& t) { t.extra = {cond}; });
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  check_defined(a, "masked_fill");
  check_defined(mask, "masked_fill");
  Shape out_shape = detail::broadcast_shapes(a.shape(), mask.shape(), "masked_fill");
  if (out_shape != a.shape())
    throw ShapeError("masked_fill: mask " + shape_str(mask.shape()) + " must broadcast to the input's shape " +
                     shape_str(a.shape()) + ", not enlarge it to " + shape_str(out_shape));
  Tensor m = mask.dtype() == a.dtype() ? mask.detach() : mask.detach().to(a.dtype());
  Tensor keep = map(m, [](auto x) { return decltype(x)(x != 0 ? 0 : 1); });
  Tensor out = make_tensor(a.shape(), a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T *pk = keep.data<T>(), *pa = a.data<T>();
    T* po = out.data<T>();
    const T v = static_cast<T>(value);
    auto sk = detail::broadcast_strides(keep.shape(), out_shape);
    auto sa = detail::broadcast_strides(a.shape(), out_shape);
    detail::for_each_strided<2>(out_shape, {&sk, &sa}, [&](int64_t o, const std::array<int64_t, 2>& off) {
      po[o] = pk[off[0]] != 0 ? pa[off[1]] : v;
    });
  });
  // The trace reads the fill value and the mask.
  return detail::traced(
      record("masked_fill", out, {a}, [keep](const Tensor& g) { return std::vector<Tensor>{mul(g, keep)}; }),
      [&](TracedOp& t) {
        t.attrs = attr::Scalar{value};
        t.extra = {mask};
      });
}

}  // namespace xg
