// The fused attention core: per (batch row, head), one GEMM for the scores,
// masking and softmax in place, dropout by hash, one GEMM for the context.
// Heads are addressed inside the (B,T,C) projections through BLAS leading
// dimensions, so nothing is permuted or copied, and backward keeps only the
// weights. Checked in tests against the composition of matmul, masked_fill,
// softmax and dropout, and by finite differences.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"
#include "engine/gemm.h"

namespace xg {

namespace {

constexpr double kMasked = -1e9;

struct Geometry {
  int64_t B, T, S, H, D, C;
};

// Everything backward needs besides the tensors.
struct Plan {
  Geometry g;
  double scale;
  bool causal;
  std::shared_ptr<const std::vector<uint8_t>> masked;  // (B,S) or empty
  double p;                                            // dropout probability, 0 = none
  uint64_t key;
  bool own_kernels;  // heads run in parallel: small products avoid BLAS
  bool is_masked(int64_t b, int64_t i, int64_t j) const {
    return (causal && j > i) || (!masked->empty() && (*masked)[static_cast<size_t>(b * g.S + j)]);
  }
};

// Per-head products. At the short lengths of the toy tasks these are tiny
// (16x16x32). Run one after another, OpenBLAS is fastest; run on several
// threads at once, its calls contend on its buffer lock (measured: 640
// products of 10x10x64 took 478 us on 1 thread, 590 us on 2). So when heads
// run in parallel, products up to kSmall multiply-adds run here instead: 4 rows
// by 2 vectors of C accumulate in registers over k, reading B in place (or
// from a zero-padded panel when B is transposed or its rows are not whole
// vectors). On small@2t this took the attention core from 0.41/0.55-0.77 ms
// (forward/backward, plain loops) to 0.23-0.38/0.25-0.55 ms.
constexpr int64_t kSmall = 64 * 64 * 64;

template <class T>
struct Lanes;  // 32-byte vectors (GCC vector extensions; plain x86-64 builds split them)
template <>
struct Lanes<float> {
  typedef float V __attribute__((vector_size(32)));
  static constexpr int64_t n = 8;
};
template <>
struct Lanes<double> {
  typedef double V __attribute__((vector_size(32)));
  static constexpr int64_t n = 4;
};

// Rows [i0, i0+R) of C, columns [j0, j0+nj): alpha * sum_p A(i,p) B(p,j),
// with B(p, j0..j0+2L) contiguous at b + p*ldb + j0.
template <class T, int R>
void tile(int64_t i0, int64_t j0, int64_t nj, int64_t k, T alpha, const T* a, int64_t sai, int64_t sap,
          const T* b, int64_t ldb, T* c, int64_t ldc) {
  using V = typename Lanes<T>::V;
  constexpr int64_t L = Lanes<T>::n;
  V acc[R][2] = {};
  const T* bp = b + j0;
  const T* ap = a + i0 * sai;
  for (int64_t p = 0; p < k; ++p, bp += ldb, ap += sap) {
    V b0, b1;
    std::memcpy(&b0, bp, sizeof(V));
    std::memcpy(&b1, bp + L, sizeof(V));
    for (int r = 0; r < R; ++r) {
      const T ar = ap[r * sai];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int r = 0; r < R; ++r) {
    const V o[2] = {alpha * acc[r][0], alpha * acc[r][1]};
    T* cr = c + (i0 + r) * ldc + j0;
    if (nj == 2 * L) {
      std::memcpy(cr, o, sizeof(o));
    } else {  // the last, partial columns
      T out[2 * L];
      std::memcpy(out, o, sizeof(o));
      for (int64_t j = 0; j < nj; ++j) cr[j] = out[j];
    }
  }
}

// C (m,n) = alpha A B, C row-major with leading dimension ldc, where
// A(i,p) = a[i*sai + p*sap] (so A^T is a stride swap, no copy) and B is
// row-major with leading dimension ldb, or, with b_trans, B^T is (n,k)
// row-major. B is read in place when its rows hold whole vectors; otherwise
// it is packed into a zero-padded (k, np) panel first.
template <class T>
void small_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t sai, int64_t sap, const T* b,
                int64_t ldb, bool b_trans, T* c, int64_t ldc) {
  constexpr int64_t NR = 2 * Lanes<T>::n;
  const int64_t np = (n + NR - 1) / NR * NR;
  thread_local std::vector<T> panel;
  if (b_trans || np != n) {
    panel.assign(static_cast<size_t>(k * np), T(0));
    T* pp = panel.data();
    if (b_trans)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) pp[p * np + j] = b[j * ldb + p];
    else
      for (int64_t p = 0; p < k; ++p) std::memcpy(pp + p * np, b + p * ldb, static_cast<size_t>(n) * sizeof(T));
    b = pp;
    ldb = np;
  }
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const int64_t nj = std::min(NR, n - j0);
    int64_t i0 = 0;
    for (; i0 + 4 <= m; i0 += 4) tile<T, 4>(i0, j0, nj, k, alpha, a, sai, sap, b, ldb, c, ldc);
    for (; i0 < m; ++i0) tile<T, 1>(i0, j0, nj, k, alpha, a, sai, sap, b, ldb, c, ldc);
  }
}

// C (m,n) = alpha A B^T: A (m,k), B (n,k), rows contiguous in k.
template <class T>
void gemm_nt(bool own, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
             int64_t ldc) {
  if (!own || m * n * k > kSmall) return engine::gemm(false, true, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  small_gemm(m, n, k, alpha, a, lda, 1, b, ldb, true, c, ldc);
}

// C (m,n) = alpha A B: A (m,k), B (k,n), rows of B and C contiguous in n.
template <class T>
void gemm_nn(bool own, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
             int64_t ldc) {
  if (!own || m * n * k > kSmall) return engine::gemm(false, false, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  small_gemm(m, n, k, alpha, a, lda, 1, b, ldb, false, c, ldc);
}

// C (m,n) = alpha A^T B: A (k,m), B (k,n), rows of B and C contiguous in n.
template <class T>
void gemm_tn(bool own, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
             int64_t ldc) {
  if (!own || m * n * k > kSmall) return engine::gemm(true, false, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  small_gemm(m, n, k, alpha, a, 1, lda, b, ldb, false, c, ldc);
}

// dst[idx] = src[idx] * dropout scale of flat element base + idx, for idx < n.
template <class T>
void apply_dropout(const Plan& pl, int64_t base, int64_t n, const T* src, T* dst) {
  const T keep = T(1.0 / (1.0 - pl.p));
  const uint64_t thr = detail::dropout_threshold(pl.p);
  const uint32_t lo = static_cast<uint32_t>(pl.key), hi = static_cast<uint32_t>(pl.key >> 32);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = detail::dropout_hash(static_cast<uint32_t>(base + i), lo, hi);
    const T s = static_cast<uint64_t>(h) >= thr ? keep : T(0);
    dst[i] = src[i] * s;
  }
}

template <class T>
void forward_heads(const Plan& pl, const T* q, const T* k, const T* v, T* out, T* w, int64_t bh0, int64_t bh1) {
  const auto [B, Tq, S, H, D, C] = pl.g;
  (void)B;
  std::vector<T> dropped(pl.p > 0 ? static_cast<size_t>(Tq * S) : 0);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const T* qb = q + b * Tq * C + h * D;
    const T* kb = k + b * S * C + h * D;
    const T* vb = v + b * S * C + h * D;
    T* P = w + bh * Tq * S;
    gemm_nt<T>(pl.own_kernels, Tq, S, D, T(pl.scale), qb, C, kb, C, P, S);  // (T,S)
    for (int64_t i = 0; i < Tq; ++i) {
      T* row = P + i * S;
      T mx = -std::numeric_limits<T>::infinity();  // not kMasked: unmasked scores may lie below it
      for (int64_t j = 0; j < S; ++j) {
        if (pl.is_masked(b, i, j)) row[j] = T(kMasked);
        mx = std::max(mx, row[j]);
      }
      T total = 0;
      for (int64_t j = 0; j < S; ++j) {
        row[j] = std::exp(row[j] - mx);
        total += row[j];
      }
      const T inv = T(1) / total;
      for (int64_t j = 0; j < S; ++j) row[j] *= inv;
    }
    const T* Pv = P;
    if (pl.p > 0) {
      apply_dropout(pl, bh * Tq * S, Tq * S, P, dropped.data());
      Pv = dropped.data();
    }
    gemm_nn<T>(pl.own_kernels, Tq, D, S, T(1), Pv, S, vb, C, out + b * Tq * C + h * D, C);  // (T,D)
  }
}

template <class T>
void backward_heads(const Plan& pl, const T* q, const T* k, const T* v, const T* w, const T* g, T* dq, T* dk, T* dv,
                    int64_t bh0, int64_t bh1) {
  const auto [B, Tq, S, H, D, C] = pl.g;
  (void)B;
  std::vector<T> dP(static_cast<size_t>(Tq * S)), dropped(pl.p > 0 ? static_cast<size_t>(Tq * S) : 0);
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const int64_t qo = b * Tq * C + h * D, ko = b * S * C + h * D;
    const T* P = w + bh * Tq * S;
    // d(dropped weights) = g v^T; dv = dropped^T g
    gemm_nt<T>(pl.own_kernels, Tq, S, D, T(1), g + qo, C, v + ko, C, dP.data(), S);
    const T* Pv = P;
    if (pl.p > 0) {
      apply_dropout(pl, bh * Tq * S, Tq * S, P, dropped.data());
      Pv = dropped.data();
      apply_dropout(pl, bh * Tq * S, Tq * S, dP.data(), dP.data());
    }
    gemm_tn<T>(pl.own_kernels, S, D, Tq, T(1), Pv, S, g + qo, C, dv + ko, C);
    // softmax backward, zero where the score was masked: dS = P (dP - <dP, P>)
    for (int64_t i = 0; i < Tq; ++i) {
      const T* pr = P + i * S;
      T* dr = dP.data() + i * S;
      T dot = 0;
      for (int64_t j = 0; j < S; ++j) dot += dr[j] * pr[j];
      for (int64_t j = 0; j < S; ++j) dr[j] = pl.is_masked(b, i, j) ? T(0) : pr[j] * (dr[j] - dot);
    }
    // dq = scale dS k; dk = scale dS^T q
    gemm_nn<T>(pl.own_kernels, Tq, D, S, T(pl.scale), dP.data(), S, k + ko, C, dq + qo, C);
    gemm_tn<T>(pl.own_kernels, S, D, Tq, T(pl.scale), dP.data(), S, q + qo, C, dk + ko, C);
  }
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  check_defined(q, "attention");
  check_defined(k, "attention");
  check_defined(v, "attention");
  auto shapes = [&] {
    return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape());
  };
  if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(2) != k.size(2))
    throw ShapeError("attention: expected q (B,T,C) and k, v (B,S,C), got " + shapes());
  detail::check_same_dtype(q, k, "attention");
  detail::check_same_dtype(q, v, "attention");
  const int64_t B = q.size(0), Tq = q.size(1), S = k.size(1), C = q.size(2), H = o.heads;
  if (H < 1 || C < 1 || C % H != 0)
    throw ShapeError("attention: width C=" + std::to_string(C) + " does not split into " + std::to_string(H) +
                     " heads of positive width (" + shapes() + ")");
  const int64_t D = C / H;
  if (S == 0) throw ShapeError("attention: no keys to attend to (" + shapes() + ")");
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw ShapeError("attention: dropout must be in [0, 1), got " + std::to_string(o.dropout));
  if (o.dropout > 0 && !o.gen) throw ShapeError("attention: dropout " + std::to_string(o.dropout) + " needs a Generator");

  auto masked = std::make_shared<std::vector<uint8_t>>();
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    if (m.shape() != Shape{B, S})
      throw ShapeError("attention: key_padding_mask " + shape_str(m.shape()) + " must be (B,S) = " +
                       shape_str({B, S}) + " for " + shapes());
    masked->resize(static_cast<size_t>(B * S));
    dispatch(m.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* pm = m.data<T>();
      for (int64_t i = 0; i < B * S; ++i) (*masked)[static_cast<size_t>(i)] = pm[i] != T(0);
    });
  }
  Plan pl{{B, Tq, S, H, D, C},
          o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(D)),
          o.causal,
          masked,
          o.dropout,
          o.dropout > 0 ? o.gen->engine()() : 0,
          num_threads() > 1};

  Tensor out = make_tensor({B, Tq, C}, q.dtype());
  Tensor w = make_tensor({B, H, Tq, S}, q.dtype());
  const int64_t cost = 4 * Tq * S * D + 8 * Tq * S;
  dispatch(q.dtype(), [&](auto z) {
    using T = decltype(z);
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
    T *po = out.data<T>(), *pw = w.data<T>();
    parallel_for(B * H, cost, [&](int64_t bh0, int64_t bh1) { forward_heads<T>(pl, pq, pk, pv, po, pw, bh0, bh1); });
  });
  if (o.weights) *o.weights = w;
  return record("attention", out, {q, k, v},
                [q = q.detach(), k = k.detach(), v = v.detach(), w, pl, cost](const Tensor& g) {
                  Tensor dq = make_tensor(q.shape(), q.dtype());
                  Tensor dk = make_tensor(k.shape(), k.dtype());
                  Tensor dv = make_tensor(v.shape(), v.dtype());
                  dispatch(q.dtype(), [&](auto z) {
                    using T = decltype(z);
                    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>(), *pw = w.data<T>(),
                            *pg = g.data<T>();
                    T *gq = dq.data<T>(), *gk = dk.data<T>(), *gv = dv.data<T>();
                    parallel_for(pl.g.B * pl.g.H, 2 * cost, [&](int64_t bh0, int64_t bh1) {
                      backward_heads<T>(pl, pq, pk, pv, pw, pg, gq, gk, gv, bh0, bh1);
                    });
                  });
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

}  // namespace xg
