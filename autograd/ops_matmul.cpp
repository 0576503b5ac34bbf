// matmul and linear on the matrix engine (engine/gemm.h: oneDNN or OpenBLAS
// for float32, OpenBLAS for float64). Transposed operands are passed as
// transposed forms, never copied. A batched matmul whose batch items lie at
// regular strides is one engine call per thread (a batch dimension on oneDNN).
#include <algorithm>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"
#include "engine/gemm.h"

namespace xg {

namespace {


// C (m,n) = op(A) op(B) + beta C, split across the thread pool into blocks of
// rows of C when A is the larger operand (m >= n), else of columns: each
// thread packs its share of the larger operand and all of the smaller one.
// (Splitting a 64x512 by 512x512 product by rows made both threads pack all
// of B: a quarter of decoding's time went to that packing.) Each block is one
// single-threaded BLAS call; every element of C is computed by the same
// kernel over the same k order whatever the split.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  constexpr int64_t kUnit = 16;  // split on multiples of the kernels' register blocks
  const bool by_rows = m >= n;
  const int64_t units = ((by_rows ? m : n) + kUnit - 1) / kUnit;
  parallel_for(units, 2 * kUnit * (by_rows ? n : m) * k, [=](int64_t u0, int64_t u1) {
    if (by_rows) {
      const int64_t i0 = u0 * kUnit, i1 = std::min(m, u1 * kUnit);
      engine::gemm(ta, tb, i1 - i0, n, k, T(1), ta ? a + i0 : a + i0 * lda, lda, b, ldb, beta, c + i0 * ldc, ldc);
    } else {
      const int64_t j0 = u0 * kUnit, j1 = std::min(n, u1 * kUnit);
      engine::gemm(ta, tb, m, j1 - j0, k, T(1), a, lda, tb ? b + j0 * ldb : b + j0, ldb, beta, c + j0, ldc);
    }
  });
}

// The step between consecutive batch items if `str` is linear in the flat
// batch index (every item `size` apart, or 0 when broadcast), else -1.
int64_t linear_step(const Shape& batch, const std::vector<int64_t>& str, int64_t size) {
  if (std::all_of(str.begin(), str.end(), [](int64_t s) { return s == 0; })) return 0;
  auto contiguous = contiguous_strides(batch);
  for (size_t i = 0; i < str.size(); ++i)
    if (batch[i] != 1 && str[i] != contiguous[i] * size) return -1;
  return size;
}

// C[i] (+)= op(A[ia]) op(B[ib]) for every batch index; A, B, C row-major
// matrices stored as (rows, cols) = (ar, ac), (br, bc), (m, n).
// `astr`/`bstr`/`cstr` map the batch shape to matrix offsets (0 = broadcast).
template <class T>
void batched_gemm(const Shape& batch, const std::vector<int64_t>& astr, const std::vector<int64_t>& bstr,
                  const std::vector<int64_t>& cstr, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T* C, bool accumulate) {
  const T beta = accumulate ? T(1) : T(0);
  const int64_t count = shape_numel(batch);
  const int64_t sa = linear_step(batch, astr, m * k), sb = linear_step(batch, bstr, k * n),
                sc = linear_step(batch, cstr, m * n);
  if (count > 1 && count >= num_threads() && sa >= 0 && sb >= 0 && sc > 0) {
    // One engine call (a batch dimension on oneDNN) per thread's share of the items.
    parallel_for(count, 2 * m * n * k, [=](int64_t i0, int64_t i1) {
      engine::gemm_batched(i1 - i0, ta, tb, m, n, k, T(1), A + i0 * sa, lda, sa, B + i0 * sb, ldb, sb, beta,
                           C + i0 * sc, n, sc);
    });
    return;
  }
  // Otherwise (a few large products, or C broadcast in a gradient, where the
  // items accumulate into one matrix): one product after another, each split
  // across the pool when large enough.
  detail::for_each_strided<3>(batch, {&astr, &bstr, &cstr}, [&](int64_t, const std::array<int64_t, 3>& off) {
    gemm(ta, tb, m, n, k, A + off[0], lda, B + off[1], ldb, beta, C + off[2], n);
  });
}

std::vector<int64_t> scaled(std::vector<int64_t> s, int64_t f) {
  for (auto& x : s) x *= f;
  return s;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined(a, "matmul");
  check_defined(b, "matmul");
  if (a.dim() < 2 || b.dim() < 2)
    throw ShapeError("matmul: expected tensors of at least 2 dimensions, got " + shape_str(a.shape()) + " and " +
                     shape_str(b.shape()));
  detail::check_same_dtype(a, b, "matmul");
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2)
    throw ShapeError("matmul: cannot multiply " + shape_str(a.shape()) + " by " + shape_str(b.shape()) +
                     ": inner dimensions " + std::to_string(k) + " != " + std::to_string(k2));
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = detail::broadcast_shapes(ab, bb, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError("matmul: cannot multiply " + shape_str(a.shape()) + " by " + shape_str(b.shape()) +
                     ": batch dimensions " + shape_str(ab) + " and " + shape_str(bb) + " do not broadcast");
  }
  auto astr = scaled(detail::broadcast_strides(ab, batch), m * k);
  auto bstr = scaled(detail::broadcast_strides(bb, batch), k * n);
  auto cstr = scaled(contiguous_strides(batch), m * n);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = make_tensor(out_shape, a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    batched_gemm<T>(batch, astr, bstr, cstr, false, false, m, n, k, a.data<T>(), k, b.data<T>(), n, out.data<T>(), false);
  });
  return record("matmul", out, {a, b},
                [a = a.detach(), b = b.detach(), batch, astr, bstr, cstr, m, n, k](const Tensor& g) {
                  // dA = g Bᵀ (M,N)x(N,K), dB = Aᵀ g (K,M)x(M,N); where an operand was
                  // broadcast over the batch, gemm accumulates (beta = 1) into one slice.
                  Tensor ga = zeros(a.shape(), a.dtype()), gb = zeros(b.shape(), b.dtype());
                  dispatch(a.dtype(), [&](auto z) {
                    using T = decltype(z);
                    batched_gemm<T>(batch, cstr, bstr, astr, false, true, m, k, n, g.data<T>(), n, b.data<T>(), n,
                                    ga.data<T>(), true);
                    batched_gemm<T>(batch, astr, cstr, bstr, true, false, k, n, m, a.data<T>(), k, g.data<T>(), n,
                                    gb.data<T>(), true);
                  });
                  return std::vector<Tensor>{ga, gb};
                });
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined(x, "linear");
  check_defined(w, "linear");
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1))
    throw ShapeError("linear: input " + shape_str(x.shape()) + " does not fit weight " + shape_str(w.shape()) +
                     ": expected input (..., " + std::to_string(w.dim() == 2 ? w.size(1) : -1) +
                     ") and weight (out, in)");
  detail::check_same_dtype(x, w, "linear");
  const int64_t in = w.size(1), out_f = w.size(0), rows = x.numel() / std::max<int64_t>(in, 1);
  if (b.defined()) {
    detail::check_same_dtype(x, b, "linear");
    if (b.dim() != 1 || b.size(0) != out_f)
      throw ShapeError("linear: bias " + shape_str(b.shape()) + " does not fit weight " + shape_str(w.shape()) +
                       ": expected (" + std::to_string(out_f) + ",)");
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor out = make_tensor(out_shape, x.dtype());
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    T* y = out.data<T>();
    if (b.defined()) {  // y = 1·b then y += x Wᵀ
      const T* pb = b.data<T>();
      parallel_for(rows, out_f, [=](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) std::copy(pb, pb + out_f, y + r * out_f);
      });
    }
    gemm(false, true, rows, out_f, in, x.data<T>(), in, w.data<T>(), in, b.defined() ? T(1) : T(0), y, out_f);
  });
  return record("linear", out, {x, w, b},
                [x = x.detach(), w = w.detach(), has_b = b.defined(), rows, in, out_f](const Tensor& g) {
                  // (rows,O): dx = g W (rows,O)x(O,I); dW = gᵀ x (O,rows)x(rows,I); db = column sums of g.
                  Tensor gx = make_tensor(x.shape(), x.dtype()), gw = make_tensor(w.shape(), w.dtype());
                  Tensor gb;
                  dispatch(x.dtype(), [&](auto z) {
                    using T = decltype(z);
                    const T* pg = g.data<T>();
                    gemm(false, false, rows, in, out_f, pg, out_f, w.data<T>(), in, T(0), gx.data<T>(), in);
                    gemm(true, false, out_f, in, rows, pg, out_f, x.data<T>(), in, T(0), gw.data<T>(), in);
                    if (has_b) {
                      gb = zeros({out_f}, x.dtype());
                      T* s = gb.data<T>();
                      detail::column_sums<T>(rows, out_f, s, [=](int64_t r, int64_t o) { return pg[r * out_f + o]; });
                    }
                  });
                  return std::vector<Tensor>{gx, gw, gb};
                });
}

}  // namespace xg
