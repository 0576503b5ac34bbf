// Fused, numerically stable ops: each one kernel forward and one backward,
// each checked in tests against the same thing composed from primitives.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"

namespace xg {

#if defined(__GNUC__) && defined(__x86_64__)
// GCC 12's AVX-512 headers start some intrinsics from a self-initialised
// "undefined" vector, which -Wall reports once they are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
// detail::softmax_exp on 16 lanes: fast_expf's operations in its order, with
// the FMAs the compiler makes of its a * b + c, so the same values bit for
// bit (tests/test_autograd_ops.cpp checks it against the scalar kernel).
XG_AVX512_TARGET __m512 softmax_exp16(__m512 z) {
  const __mmask16 number = _mm512_cmp_ps_mask(z, z, _CMP_ORD_Q);
  const __m512 c = _mm512_min_ps(_mm512_set1_ps(88.3f), _mm512_max_ps(_mm512_set1_ps(-87.3f), z));
  const __m512 safe = _mm512_maskz_mov_ps(number, c);
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(safe, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f),
                                   _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), safe));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720), r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(z, _mm512_set1_ps(88.3f), _CMP_GT_OQ),
                         _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  y = _mm512_mask_mov_ps(z, number, y);  // NaN stays NaN
  return _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(z, _mm512_set1_ps(-87.0f), _CMP_LT_OQ), y);
}

// The whole row in vectors of 16, the last one masked: on a ViT's rows of
// 50, the loop of the scalar lambda ran its last values one by one through
// fast_expf and the sum went through another pass.
XG_AVX512_TARGET float softmax_exp_sum_avx512(const float* x, float* y, int64_t n, float mx) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 total = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 lanes = n - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - k)) - 1);
    const __m512 e = softmax_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + k), m));
    _mm512_mask_storeu_ps(y + k, lanes, e);
    total = _mm512_mask_add_ps(total, lanes, total, e);
  }
  return _mm512_reduce_add_ps(total);
}

// R rows of n <= 64 in registers, each in one pass: the maximum, the
// exponentials and their sum in softmax_exp_sum_avx512's order, the scaling.
// Rows of a few dozen scores (attention over a ViT's 50 positions) spent
// most of their time waiting on the latency of each row's chain of steps,
// one row after another; R rows side by side overlap their chains.
template <int R>
XG_AVX512_TARGET void softmax_short_rows(float* P, int64_t n, float* stat) {
  const int nv = static_cast<int>((n + 15) / 16);
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 lanes[4];
  for (int c = 0; c < 4; ++c)
    lanes[c] = c >= nv ? __mmask16(0) : n - 16 * c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - 16 * c)) - 1);
  __m512 v[R][4], m[R];
  for (int r = 0; r < R; ++r) {
    m[r] = none;
    for (int c = 0; c < 4; ++c)
      if (c < nv) {
        v[r][c] = _mm512_mask_loadu_ps(none, lanes[c], P + r * n + 16 * c);
        m[r] = _mm512_max_ps(m[r], v[r][c]);
      }
  }
  float mx[R], inv[R];
  __m512 total[R];
  for (int r = 0; r < R; ++r) {
    mx[r] = _mm512_reduce_max_ps(m[r]);
    const __m512 mxv = _mm512_set1_ps(mx[r]);
    total[r] = _mm512_setzero_ps();
    for (int c = 0; c < 4; ++c)
      if (c < nv) {
        v[r][c] = softmax_exp16(_mm512_sub_ps(v[r][c], mxv));
        total[r] = _mm512_mask_add_ps(total[r], lanes[c], total[r], v[r][c]);
      }
  }
  for (int r = 0; r < R; ++r) {
    inv[r] = 1.0f / _mm512_reduce_add_ps(total[r]);
    const __m512 invv = _mm512_set1_ps(inv[r]);
    for (int c = 0; c < 4; ++c)
      if (c < nv) _mm512_mask_storeu_ps(P + r * n + 16 * c, lanes[c], _mm512_mul_ps(v[r][c], invv));
    if (stat) {
      stat[2 * r] = mx[r];
      stat[2 * r + 1] = inv[r];
    }
  }
}
}  // namespace
#pragma GCC diagnostic pop
#endif

bool detail::softmax_short_rows_in_place(float* P, int64_t rows, int64_t n, float* stat) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (n >= 1 && n <= 64 && avx512_loops()) {
    int64_t i = 0;
    for (; i + 4 <= rows; i += 4) softmax_short_rows<4>(P + i * n, n, stat ? stat + 2 * i : nullptr);
    for (; i < rows; ++i) softmax_short_rows<1>(P + i * n, n, stat ? stat + 2 * i : nullptr);
    return true;
  }
#endif
  (void)P, (void)rows, (void)n, (void)stat;
  return false;
}

float detail::softmax_exp_sum(const float* x, float* y, int64_t n, float mx) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (avx512_loops()) return softmax_exp_sum_avx512(x, y, n, mx);
#endif
  elementwise_range(0, n, [=](int64_t k) { y[k] = softmax_exp(x[k] - mx); });
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t k = 0; k < n; ++k) total += y[k];
  return total;
}

namespace {

// A tensor seen as (outer, n, inner) around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisView around(const Shape& s, int64_t ax) {
  AxisView v;
  for (int64_t i = 0; i < ax; ++i) v.outer *= s[i];
  v.n = s[ax];
  for (size_t i = ax + 1; i < s.size(); ++i) v.inner *= s[i];
  return v;
}

// One float32 row of n values along the last axis (contiguous): its max in
// vector registers, the exponentials on fast_expf (detail::softmax_exp) in
// vectorised loops, where glibc's expf is a call per element. y must not
// alias x: log_softmax reads x after y holds the exponentials.
void softmax_row(const float* x, float* y, int64_t n, bool log_form) {
  float mx = detail::row_max(x, n);
  if (mx == -std::numeric_limits<float>::infinity()) mx = 0;  // all -inf: keep it finite
  const float total = detail::softmax_exp_sum(x, y, n, mx);
  if (log_form) {
    const float lse = mx + std::log(total);
    detail::elementwise_range(0, n, [=](int64_t k) { y[k] = x[k] - lse; });
  } else {
    const float inv = 1.0f / total;
    detail::elementwise_range(0, n, [=](int64_t k) { y[k] *= inv; });
  }
}

// y = softmax or log_softmax of x along the middle axis of `v`.
template <class T>
void softmax_kernel(const T* x, T* y, const AxisView& v, bool log_form) {
  parallel_for(v.outer * v.inner, 8 * v.n, [=](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>)
      if (v.inner == 1) {
        for (int64_t r = r0; r < r1; ++r) softmax_row(x + r * v.n, y + r * v.n, v.n, log_form);
        return;
      }
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / v.inner, i = r % v.inner;
      const T* xr = x + o * v.n * v.inner + i;
      T* yr = y + o * v.n * v.inner + i;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < v.n; ++k) mx = std::max(mx, xr[k * v.inner]);
      if (mx == -std::numeric_limits<T>::infinity()) mx = 0;  // all -inf: keep it finite
      T total = 0;
      for (int64_t k = 0; k < v.n; ++k) {
        T e = std::exp(xr[k * v.inner] - mx);
        total += e;
        if (!log_form) yr[k * v.inner] = e;
      }
      if (log_form) {
        const T lse = mx + std::log(total);
        for (int64_t k = 0; k < v.n; ++k) yr[k * v.inner] = xr[k * v.inner] - lse;
      } else {
        const T inv = T(1) / total;
        for (int64_t k = 0; k < v.n; ++k) yr[k * v.inner] *= inv;
      }
    }
  });
}

// dx of one contiguous row of n values (the last axis), y the output:
//   softmax:     dx = y (g - sum_k g_k y_k),
//   log_softmax: dx = g - e^y sum_k g_k,
// in loops that vectorise; float32's e^y on fast_expf, as forward.
template <class T>
void softmax_backward_row(const T* y, const T* g, T* dx, int64_t n, bool log_form) {
  T dot = 0;
  if (log_form) {
#pragma omp simd reduction(+ : dot)
    for (int64_t k = 0; k < n; ++k) dot += g[k];
    if constexpr (std::is_same_v<T, float>)
      detail::elementwise_range(0, n, [=](int64_t k) { dx[k] = g[k] - detail::softmax_exp(y[k]) * dot; });
    else
      for (int64_t k = 0; k < n; ++k) dx[k] = g[k] - std::exp(y[k]) * dot;
  } else {
#pragma omp simd reduction(+ : dot)
    for (int64_t k = 0; k < n; ++k) dot += g[k] * y[k];
    for (int64_t k = 0; k < n; ++k) dx[k] = y[k] * (g[k] - dot);
  }
}

// The same along the middle axis of `v`, rows v.inner apart.
template <class T>
void softmax_backward_kernel(const T* py, const T* pg, T* px, const AxisView& v, bool log_form) {
  parallel_for(v.outer * v.inner, 6 * v.n, [=](int64_t r0, int64_t r1) {
    if (v.inner == 1) {
      for (int64_t r = r0; r < r1; ++r) softmax_backward_row(py + r * v.n, pg + r * v.n, px + r * v.n, v.n, log_form);
      return;
    }
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = (r / v.inner) * v.n * v.inner + r % v.inner;
      T dot = 0;
      for (int64_t k = 0; k < v.n; ++k) {
        const int64_t j = base + k * v.inner;
        dot += log_form ? pg[j] : pg[j] * py[j];
      }
      for (int64_t k = 0; k < v.n; ++k) {
        const int64_t j = base + k * v.inner;
        px[j] = log_form ? pg[j] - std::exp(py[j]) * dot : py[j] * (pg[j] - dot);
      }
    }
  });
}

Tensor softmax_impl(const Tensor& a, int64_t axis, bool log_form) {
  const char* op = log_form ? "log_softmax" : "softmax";
  const int64_t ax = normalize_axis(axis, check_defined(a, op).dim(), op);
  AxisView v = around(a.shape(), ax);
  Tensor out = make_tensor(a.shape(), a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    softmax_kernel(a.data<T>(), out.data<T>(), v, log_form);
  });
  return record(op, out, {a}, [y = out.detach(), v, ax, log_form](const Tensor& g) {
    // softmax:     dx = y * (g - sum_k g_k y_k)
    // log_softmax: dx = g - exp(y) * sum_k g_k
    if (grad_enabled()) {  // second order: the same formula as ops, through the output itself
      const Tensor yy = detail::saved_output(y);
      if (log_form) return std::vector<Tensor>{g - exp(yy) * sum(g, {ax}, true)};
      return std::vector<Tensor>{yy * (g - sum(g * yy, {ax}, true))};
    }
    Tensor gx = make_tensor(y.shape(), y.dtype());
    dispatch(y.dtype(), [&](auto z) {
      using T = decltype(z);
      softmax_backward_kernel(y.data<T>(), g.data<T>(), gx.data<T>(), v, log_form);
    });
    return std::vector<Tensor>{gx};
  }, {out});
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t axis) {
  return detail::traced(softmax_impl(a, axis, false),
                        [&](TracedOp& t) { t.attrs = attr::Axis{normalize_axis(axis, a.dim(), "softmax")}; });
}
Tensor log_softmax(const Tensor& a, int64_t axis) {
  return detail::traced(softmax_impl(a, axis, true),
                        [&](TracedOp& t) { t.attrs = attr::Axis{normalize_axis(axis, a.dim(), "log_softmax")}; });
}

namespace {
// layer_norm from ops (its second order).
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const Tensor d = x - mean(x, {-1}, true);
  Tensor y = d * pow(mean(d * d, {-1}, true) + eps, -0.5);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}
// One row of layer_norm's backward: its dx into xr (added to it with
// add_dx) and, when acc is not null, its terms of dw into acc[0, c) and of
// db into acc[c, 2c), while the row of g and of xhat is in cache (a second
// pass over both for the column sums took about a third of the backward's
// time). gh: c values of scratch.
template <class T>
void layer_norm_backward_row(const T* gr, const T* hr, const T* pw, T rstd, int64_t c, T* gh, T* xr, T* acc,
                             bool add_dx) {
  if (pw)
    for (int64_t j = 0; j < c; ++j) gh[j] = gr[j] * pw[j];
  else
    std::copy(gr, gr + c, gh);
  T m1 = 0, m2 = 0;
#pragma omp simd reduction(+ : m1, m2)
  for (int64_t j = 0; j < c; ++j) {
    m1 += gh[j];
    m2 += gh[j] * hr[j];
  }
  m1 /= T(c);
  m2 /= T(c);
  if (add_dx) {
    // dx rounded on its own, then added (a separate loop, so that the
    // compiler does not fuse the product and the sum into one rounding): the
    // same values as a new dx added by the walk.
    for (int64_t j = 0; j < c; ++j) gh[j] = rstd * (gh[j] - m1 - hr[j] * m2);
    for (int64_t j = 0; j < c; ++j) xr[j] += gh[j];
  } else {
    for (int64_t j = 0; j < c; ++j) xr[j] = rstd * (gh[j] - m1 - hr[j] * m2);
  }
  if (acc)
    for (int64_t j = 0; j < c; ++j) {
      acc[j] += gr[j] * hr[j];
      acc[c + j] += gr[j];
    }
}

// First-order backward of layer_norm from its saved xhat (rows, C) and rstd;
// dx is added into `into` when it is defined (the gradient already waiting
// for x: detail::accumulating_grad), else written to a new tensor.
std::vector<Tensor> layer_norm_backward(const Tensor& xhat, const Tensor& rstd, const Tensor& w, bool has_b,
                                        int64_t rows, int64_t c, const Tensor& g, const Tensor& into) {
  // With gh = g * w:  dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
  //                   dw = sum_rows g * xhat,  db = sum_rows g
  const bool add_dx = into.defined();
  Tensor gx = add_dx ? into : make_tensor(xhat.shape(), xhat.dtype());
  Tensor gw = w.defined() ? make_tensor({c}, xhat.dtype()) : Tensor();  // both written whole below
  Tensor gb = has_b ? make_tensor({c}, xhat.dtype()) : Tensor();
  dispatch(xhat.dtype(), [&](auto z) {
    using T = decltype(z);
    const T *pg = g.data<T>(), *ph = xhat.data<T>(), *pr = rstd.data<T>();
    const T* pw = data_or_null<T>(w);
    T* px = gx.data<T>();
    const auto row = [=](int64_t r, T* gh, T* acc) {
      layer_norm_backward_row(pg + r * c, ph + r * c, pw, pr[r], c, gh, px + r * c, acc, add_dx);
    };
    if (!gw.defined() && !gb.defined()) {
      parallel_for(rows, 8 * c, [=](int64_t r0, int64_t r1) {
        std::vector<T> gh(c);  // one row of g * w
        for (int64_t r = r0; r < r1; ++r) row(r, gh.data(), nullptr);
      });
      return;
    }
    // row_sums gives each block of rows its own partial [dw | db] row, added
    // in order; a row costs about 10 c (dx's 8, the sums' 2).
    std::vector<T> total(static_cast<size_t>(2 * c), T(0));
    detail::row_sums<T>(
        rows, 2 * c, total.data(),
        [=](int64_t r, T* acc) {
          thread_local std::vector<T> gh;
          gh.resize(c);
          row(r, gh.data(), acc);
        },
        10 * c);
    if (T* pgw = data_or_null<T>(gw)) std::copy(total.begin(), total.begin() + c, pgw);
    if (T* pgb = data_or_null<T>(gb)) std::copy(total.begin() + c, total.end(), pgb);
  });
  return std::vector<Tensor>{gx, gw, gb};
}

// layer_norm's forward over (rows, C): xhat = (x + res - mean) * rstd, y =
// xhat * w + b, each row's rstd into pr; res, w and b may be null.
template <class T>
void layer_norm_forward(const T* px, const T* pres, const T* pw, const T* pb, T* py, T* ph, T* pr, int64_t rows,
                        int64_t c, double eps) {
  parallel_for(rows, (pres ? 7 : 6) * c, [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = px + r * c;
      T* hr = ph + r * c;
      T* yr = py + r * c;
      if (pres) {  // the sum, in the row of xhat that it becomes
        const T* rr = pres + r * c;
        for (int64_t j = 0; j < c; ++j) hr[j] = xr[j] + rr[j];
        xr = hr;
      }
      T mu = 0;
#pragma omp simd reduction(+ : mu)
      for (int64_t j = 0; j < c; ++j) mu += xr[j];
      mu /= T(c);
      T v = 0;
#pragma omp simd reduction(+ : v)
      for (int64_t j = 0; j < c; ++j) v += (xr[j] - mu) * (xr[j] - mu);
      const T rs = T(1) / std::sqrt(v / T(c) + T(eps));
      pr[r] = rs;
      for (int64_t j = 0; j < c; ++j) hr[j] = (xr[j] - mu) * rs;
      if (pw && pb)
        for (int64_t j = 0; j < c; ++j) yr[j] = hr[j] * pw[j] + pb[j];
      else if (pw)
        for (int64_t j = 0; j < c; ++j) yr[j] = hr[j] * pw[j];
      else if (pb)
        for (int64_t j = 0; j < c; ++j) yr[j] = hr[j] + pb[j];
      else
        std::copy(hr, hr + c, yr);
    }
  });
}
}  // namespace

namespace {
// The rows and width C of layer_norm's input x (rows, C), its arguments
// checked: x of at least one dimension, r (if defined) of x's shape and
// dtype, weight and bias (if defined) (C) of x's dtype.
struct NormRows {
  int64_t rows, c;
};
NormRows check_layer_norm(const char* op, const Tensor& x, const Tensor& r, const Tensor& weight,
                          const Tensor& bias) {
  check_defined(x, op);
  const std::string who(op);
  if (x.dim() < 1) throw ShapeError(who + ": input must have at least one dimension, got " + shape_str(x.shape()));
  if (r.defined()) {
    if (r.shape() != x.shape())
      throw ShapeError(who + ": residual " + shape_str(r.shape()) + " must have the input's shape " +
                       shape_str(x.shape()));
    if (r.dtype() != x.dtype())
      throw ShapeError(who + ": dtype mismatch, input " + dtype_name(x.dtype()) + " vs residual " +
                       dtype_name(r.dtype()));
  }
  const int64_t c = x.size(-1), rows = c ? x.numel() / c : 0;
  for (const Tensor* p : {&weight, &bias})
    if (p->defined()) {
      if (p->shape() != Shape{c})
        throw ShapeError(who + ": " + std::string(p == &weight ? "weight " : "bias ") + shape_str(p->shape()) +
                         " does not match the normalised dimension of input " + shape_str(x.shape()) +
                         ": expected (" + std::to_string(c) + ",)");
      if (p->dtype() != x.dtype())
        throw ShapeError(who + ": dtype mismatch, input " + dtype_name(x.dtype()) + " vs " +
                         (p == &weight ? "weight " : "bias ") + dtype_name(p->dtype()));
    }
  return {rows, c};
}

// layer_norm(x + r) when r is defined, else layer_norm(x): one pass forward
// (the sum is formed in the row being normalised, never stored), and
// backward gives x and r the same gradient.
Tensor layer_norm_impl(const char* op, const Tensor& x, const Tensor& r, const Tensor& weight, const Tensor& bias,
                       double eps) {
  const NormRows n = check_layer_norm(op, x, r, weight, bias);
  const int64_t rows = n.rows, c = n.c;
  const bool has_r = r.defined();
  // (rows, C): xhat = (x - mean) * rstd; y = xhat * w + b
  Tensor out = make_tensor(x.shape(), x.dtype());
  Tensor xhat = make_tensor(x.shape(), x.dtype());
  Tensor rstd = make_tensor({rows}, x.dtype());
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.data<T>();
    const T* pres = has_r ? r.data<T>() : nullptr;
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    T *py = out.data<T>(), *ph = xhat.data<T>(), *pr = rstd.data<T>();
    layer_norm_forward<T>(px, pres, pw, pb, py, ph, pr, rows, c, eps);
  });
  const std::vector<Tensor> inputs = has_r ? std::vector<Tensor>{x, r, weight, bias} : std::vector<Tensor>{x, weight, bias};
  // {gx, gw, gb} -> the gradients of `inputs`: x and r get the same one.
  auto of_inputs = [has_r](std::vector<Tensor> g) {
    if (has_r) g.insert(g.begin() + 1, g[0]);
    return g;
  };
  // xhat stays float32 under Autocast(bf16) too: a bf16 copy would halve
  // its bytes but slowed bf16 training (docs/performance.md, "What is saved
  // for backward").
  return record(op, out, inputs,
                [of_inputs, has_r, xhat, rstd, w = weight, b = bias, has_b = bias.defined(), rows, c,
                 eps](const Tensor& g) {
                  if (grad_enabled()) {
                    // Second order by recomputation from ops. x itself is not
                    // saved; x - mean = xhat / rstd has its values up to a shift
                    // per row, to which layer norm is blind. With a residual,
                    // those values stand for x + r: x takes them, r zeros.
                    Tensor centred;
                    {
                      NoGradGuard off;
                      centred = reshape(div(reshape(xhat, {rows, c}), reshape(rstd, {rows, 1})), xhat.shape());
                    }
                    if (has_r)
                      return detail::vjp_by_recompute(
                          [eps](const std::vector<Tensor>& in) {
                            return layer_norm_composed(in[0] + in[1], in[2], in[3], eps);
                          },
                          {detail::input_with_values(0, centred),
                           detail::input_with_values(1, zeros(centred.shape(), centred.dtype())), w, b},
                          g);
                    return detail::vjp_by_recompute(
                        [eps](const std::vector<Tensor>& in) { return layer_norm_composed(in[0], in[1], in[2], eps); },
                        {detail::input_with_values(0, centred), w, b}, g);
                  }
                  // With a residual, x and r share one dx: nothing is added
                  // into a gradient already waiting for x.
                  const Tensor into = has_r ? Tensor() : detail::accumulating_grad(0);
                  return of_inputs(layer_norm_backward(xhat, rstd, w, has_b, rows, c, g, into));
                }, {weight});
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return detail::traced(layer_norm_impl("layer_norm", x, Tensor(), weight, bias, eps),
                        [eps](TracedOp& t) { t.attrs = attr::Scalar{eps}; });
}

Tensor add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(residual, "add_layer_norm");
  return detail::traced(layer_norm_impl("add_layer_norm", x, residual, weight, bias, eps),
                        [eps](TracedOp& t) { t.attrs = attr::Scalar{eps}; });
}

namespace {
// The classes V and rows of cross_entropy's logits (rows, V) and how many
// rows count (their target is not ignore_index), the arguments checked.
struct CountedRows {
  int64_t v, rows, count;
};
CountedRows counted_rows(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index,
                         double label_smoothing) {
  check_defined(logits, "cross_entropy");
  if (logits.dim() < 1) throw ShapeError("cross_entropy: logits must have a class dimension, got " + shape_str(logits.shape()));
  const int64_t v = logits.size(-1), rows = v ? logits.numel() / v : 0;
  if (static_cast<int64_t>(targets.size()) != rows)
    throw ShapeError("cross_entropy: logits " + shape_str(logits.shape()) + " have " + std::to_string(rows) +
                     " rows but " + std::to_string(targets.size()) + " targets were given");
  detail::check_label_smoothing(label_smoothing, "cross_entropy");
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= v)
      throw ShapeError("cross_entropy: target " + std::to_string(t) + " at row " + std::to_string(r) +
                       " is out of range for " + std::to_string(v) + " classes (logits " + shape_str(logits.shape()) +
                       ")");
    ++count;
  }
  return {v, rows, count};
}

// q (rows, V), the target weights of cross_entropy's rows: (1-e) on the
// target and e/V on every class; zero rows where the target is ignore_index.
Tensor target_weights(const Tensor& logp, const std::vector<int64_t>& targets, int64_t ignore_index, double e) {
  const int64_t v = logp.size(1);
  Tensor q = zeros({logp.size(0), v}, logp.dtype());
  dispatch(q.dtype(), [&](auto z) {
    using T = decltype(z);
    T* pq = q.data<T>();
    for (size_t r = 0; r < targets.size(); ++r) {
      if (targets[r] == ignore_index) continue;
      std::fill(pq + r * v, pq + (r + 1) * v, T(e / v));
      pq[r * v + targets[r]] += T(1 - e);
    }
  });
  return q;
}
}  // namespace

Tensor detail::cross_entropy_rows(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index,
                                  double label_smoothing) {
  const CountedRows n = counted_rows(logits, targets, ignore_index, label_smoothing);
  const int64_t v = n.v, rows = n.rows, count = n.count;
  // Per row: loss = -(1-e) logp[t] - (e/V) sum_j logp[j]; mean over counted rows.
  Tensor logp = make_tensor({rows, v}, logits.dtype());
  double total = 0;
  const double e = label_smoothing;
  dispatch(logits.dtype(), [&](auto z) {
    using T = decltype(z);
    softmax_kernel(logits.data<T>(), logp.data<T>(), AxisView{rows, v, 1}, true);
    const T* lp = logp.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      if (targets[r] == ignore_index) continue;
      const T* row = lp + r * v;
      double all = 0;
      if (e != 0)
        for (int64_t j = 0; j < v; ++j) all += row[j];
      total -= (1 - e) * row[targets[r]] + e / v * all;
    }
  });
  Tensor out = scalar(count ? total / count : 0.0, logits.dtype());
  return record("cross_entropy", out, {logits},
                [logp, targets, ignore_index, e, count, shape = logits.shape()](const Tensor& g) {
                  // dlogits = (softmax - q) * g / count, q = (1-e) onehot(t) + e/V
                  Tensor gl = zeros(shape, logp.dtype());
                  if (count == 0) return std::vector<Tensor>{gl};
                  if (grad_enabled()) {
                    // Second order by recomputation: -sum(log_softmax(logits) * q) / count
                    // with q the rows' target weights. The logits are not saved;
                    // log p has their values up to a shift per row, to which
                    // log_softmax is blind.
                    const int64_t v = logp.size(1);
                    Tensor q = target_weights(logp, targets, ignore_index, e);
                    return detail::vjp_by_recompute(
                        [q, count, v](const std::vector<Tensor>& in) {
                          return sum(log_softmax(reshape(in[0], {-1, v}), -1) * q) * (-1.0 / count);
                        },
                        {detail::input_with_values(0, reshape(logp, shape))}, g);
                  }
                  dispatch(logp.dtype(), [&](auto z) {
                    using T = decltype(z);
                    const int64_t v = logp.size(1);
                    const T scale = T(g.item() / count);
                    const T* lp = logp.data<T>();
                    T* pg = gl.data<T>();
                    for (size_t r = 0; r < targets.size(); ++r) {
                      if (targets[r] == ignore_index) continue;
                      for (int64_t j = 0; j < v; ++j) pg[r * v + j] = (std::exp(lp[r * v + j]) - T(e / v)) * scale;
                      pg[r * v + targets[r]] -= T(1 - e) * scale;
                    }
                  });
                  return std::vector<Tensor>{gl};
                });
}

Tensor gather_rows(const Tensor& table, const std::vector<int64_t>& ids, const Shape& ids_shape) {
  check_defined(table, "gather_rows");
  if (table.dim() != 2) throw ShapeError("gather_rows: table must be (V, C), got " + shape_str(table.shape()));
  if (static_cast<int64_t>(ids.size()) != shape_numel(ids_shape))
    throw ShapeError("gather_rows: " + std::to_string(ids.size()) + " ids do not fill shape " + shape_str(ids_shape));
  const int64_t v = table.size(0), c = table.size(1);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= v)
      throw ShapeError("gather_rows: id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is out of range for a table of " + std::to_string(v) + " rows " + shape_str(table.shape()));
  Shape out_shape = ids_shape;
  out_shape.push_back(c);
  Tensor out = make_tensor(out_shape, table.dtype());
  dispatch(table.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* src = table.data<T>();
    T* dst = out.data<T>();
    for (size_t i = 0; i < ids.size(); ++i) std::copy(src + ids[i] * c, src + (ids[i] + 1) * c, dst + i * c);
  });
  Tensor r = record("gather_rows", out, {table}, [ids, shape = table.shape()](const Tensor& g) {
    if (grad_enabled()) {  // second order: the scatter as an op
      auto idx = std::make_shared<std::vector<int64_t>>();
      idx->reserve(ids.size() * shape[1]);
      for (int64_t id : ids)
        for (int64_t j = 0; j < shape[1]; ++j) idx->push_back(id * shape[1] + j);
      return std::vector<Tensor>{detail::put_add(g, idx, shape)};
    }
    Tensor gt = zeros(shape, g.dtype());  // rows hit twice add up
    dispatch(g.dtype(), [&](auto z) {
      using T = decltype(z);
      const int64_t c = shape[1];
      const T* pg = g.data<T>();
      T* pt = gt.data<T>();
      for (size_t i = 0; i < ids.size(); ++i)
        for (int64_t j = 0; j < c; ++j) pt[ids[i] * c + j] += pg[i * c + j];
    });
    return std::vector<Tensor>{gt};
  });
  // The ids as a tensor of their own: the overload below names the caller's.
  return detail::traced(r, [&](TracedOp& t) { t.extra = {from_ints(ids, ids_shape)}; });
}

namespace {
// The values of an int64 tensor of ids or targets; any other dtype is an error.
std::vector<int64_t> int_values(const Tensor& t, const char* op, const char* what) {
  check_defined_any(t, op);
  if (t.dtype() != Dtype::i64)
    throw ShapeError(std::string(op) + ": " + what + " must be an int64 tensor, got " + dtype_name(t.dtype()) + " " +
                     shape_str(t.shape()) + " (convert with .to(xg::i64))");
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}
}  // namespace

Tensor gather_rows(const Tensor& table, const Tensor& ids) {
  return detail::traced(gather_rows(table, int_values(ids, "gather_rows", "ids"), ids.shape()),
                        [&](TracedOp& t) { t.extra = {ids}; });
}

Tensor index_select(const Tensor& a, int64_t axis, const Tensor& index) {
  check_defined(a, "index_select");
  const int64_t ax = normalize_axis(axis, a.dim(), "index_select");
  if (index.defined() && index.dim() > 1)
    throw ShapeError("index_select: index must be 1-D, got " + shape_str(index.shape()));
  const std::vector<int64_t> idx = int_values(index, "index_select", "index");
  const Shape& s = a.shape();
  const int64_t n = s[ax], m = static_cast<int64_t>(idx.size());
  for (int64_t i = 0; i < m; ++i)
    if (idx[i] < 0 || idx[i] >= n)
      throw ShapeError("index_select: index " + std::to_string(idx[i]) + " at position " + std::to_string(i) +
                       " is out of range for axis " + std::to_string(ax) + " of size " + std::to_string(n) + " (input " +
                       shape_str(s) + ")");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= s[d];
  for (int64_t d = ax + 1; d < a.dim(); ++d) inner *= s[d];
  Shape out_shape = s;
  out_shape[ax] = m;
  Tensor out = make_tensor(out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < m; ++i)
        std::copy(src + (o * n + idx[i]) * inner, src + (o * n + idx[i] + 1) * inner, dst + (o * m + i) * inner);
  });
  return record("index_select", out, {a}, [idx, s, outer, inner, n, m](const Tensor& g) {
    if (grad_enabled()) {  // second order: the scatter as an op
      auto flat = std::make_shared<std::vector<int64_t>>();
      flat->reserve(outer * m * inner);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < inner; ++j) flat->push_back((o * n + idx[static_cast<size_t>(i)]) * inner + j);
      return std::vector<Tensor>{detail::put_add(g, flat, s)};
    }
    Tensor ga = zeros(s, g.dtype());  // slices picked twice add up
    dispatch(g.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* pg = g.data<T>();
      T* pa = ga.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < m; ++i) {
          T* row = pa + (o * n + idx[static_cast<size_t>(i)]) * inner;
          const T* gr = pg + (o * m + i) * inner;
          for (int64_t j = 0; j < inner; ++j) row[j] += gr[j];
        }
    });
    return std::vector<Tensor>{ga};
  });
}

namespace {
// out[i] = f(in[i]) * (kept(i) ? 1/(1-p) : 0), kept(i) a hash of (i, key),
// f the identity or (Relu) max(x, 0).
template <bool Relu = false>
void dropout_kernel(const Tensor& in, Tensor& out, double p, uint64_t key) {
  dispatch(in.dtype(), [&](auto z) {
    using T = decltype(z);
    const T keep = p < 1 ? T(1.0 / (1.0 - p)) : T(0);
    const uint32_t threshold = detail::dropout_threshold(p);
    const uint32_t lo = static_cast<uint32_t>(key), hi = static_cast<uint32_t>(key >> 32);
    T* po = out.data<T>();
    const T* px = in.data<T>();
    parallel_for(in.numel(), 12, [=](int64_t i0, int64_t i1) {
      // Locals, not the closure's members: a store through `o` could alias
      // those, which keeps the loop from vectorising.
      T* __restrict o = po;
      const T* __restrict x = px;
      const T kp = keep;
      const uint32_t thr = threshold;
      const uint32_t klo = lo, khi = hi;
      for (int64_t i = i0; i < i1; ++i) {
        const uint32_t h = detail::dropout_hash(static_cast<uint32_t>(i), klo, khi);
        const T scale = h >= thr ? kp : T(0);
        const T v = Relu ? (x[i] > 0 ? x[i] : T(0)) : x[i];
        o[i] = v * scale;
      }
    });
  });
}
// One bit per element, bit i of word i / 64 set where out[i] > 0: where
// relu_dropout passes its gradient.
using Bits = Scratch<uint64_t>;
std::shared_ptr<const Bits> positive_bits(const Tensor& out) {
  const int64_t n = out.numel(), words = (n + 63) / 64;
  auto bits = std::make_shared<Bits>(words);
  dispatch(out.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* py = out.data<T>();
    uint64_t* pb = bits->data();
    parallel_for(words, 64 * 2, [=](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t i0 = w * 64, m = std::min<int64_t>(64, n - i0);
        uint64_t word = 0;
        for (int64_t j = 0; j < m; ++j) word |= uint64_t(py[i0 + j] > 0) << j;
        pb[w] = word;
      }
    });
  });
  return bits;
}
// g * (bit i ? keep : 0), elementwise, in g's dtype.
Tensor masked_scale(const Tensor& g, const Bits& bits, double keep) {
  Tensor gx = make_tensor(g.shape(), g.dtype());
  dispatch(g.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.data<T>();
    const uint64_t* pb = bits.data();
    T* px = gx.data<T>();
    const T k = T(keep);
    const int64_t n = g.numel();
    parallel_for((n + 63) / 64, 64 * 3, [=](int64_t w0, int64_t w1) {
      const T kl = k;
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t i0 = w * 64, m = std::min<int64_t>(64, n - i0);
        const uint64_t word = pb[w];
        for (int64_t j = 0; j < m; ++j) px[i0 + j] = pg[i0 + j] * ((word >> j) & 1 ? kl : T(0));
      }
    });
  });
  return gx;
}

}  // namespace

Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_defined(x, "relu_dropout");
  if (!(p >= 0 && p < 1)) throw ShapeError("relu_dropout: probability must be in [0, 1), got " + std::to_string(p));
  if (!training || p == 0) return relu(x);
  const uint64_t key = gen.engine()();
  Tensor out = make_tensor(x.shape(), x.dtype());
  dropout_kernel<true>(x, out, p, key);
  // out > 0 exactly where x > 0 and the element was kept, where the
  // derivative is 1/(1-p); it is 0 everywhere else. So one bit per element is
  // saved, not out: under Autocast(bf16) the next product keeps only a bf16
  // copy of out, and out itself can go.
  return record("relu_dropout", out, {x}, [bits = positive_bits(out), p](const Tensor& g) {
    const double keep = 1.0 / (1.0 - p);
    if (grad_enabled()) {  // second order: the mask is a constant factor
      Tensor factor;
      {
        NoGradGuard off;
        factor = masked_scale(ones(g.shape(), g.dtype()), *bits, keep);
      }
      return std::vector<Tensor>{mul(g, factor)};
    }
    return std::vector<Tensor>{masked_scale(g, *bits, keep)};
  });
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_defined(x, "dropout");
  if (!(p >= 0 && p <= 1)) throw ShapeError("dropout: probability must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0) return x;
  // One 64-bit draw from `gen` per call (the generator advances by exactly one
  // value, whatever the size) keys a counter-based hash: element i is kept
  // where murmur3's 32-bit finaliser of (i ^ key_hi) * golden + key_lo is at
  // least p * 2^32. Branch-free 32-bit arithmetic, so the loop vectorises.
  // The mask is recomputed from the key in backward rather than stored.
  return detail::dropout_keyed(x, p, gen.engine()());
}

namespace detail {
Tensor dropout_keyed(const Tensor& x, double p, uint64_t key) {
  Tensor out = make_tensor(x.shape(), x.dtype());
  dropout_kernel(x, out, p, key);
  // Linear in x: its backward is itself, with the same mask (so every order is).
  return record("dropout", out, {x}, [p, key](const Tensor& g) { return std::vector<Tensor>{dropout_keyed(g, p, key)}; });
}
}  // namespace detail

}  // namespace xg
