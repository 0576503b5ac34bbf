// The fused attention core: for each thread's block of (batch row, head)
// pairs, one batched product for the scores, masking and softmax in place,
// dropout by hash, one batched product for the context. Heads are addressed
// inside the (B,T,C) projections through strides (batch rows T*C apart, heads
// D apart), so nothing is permuted or copied; backward keeps q, k, v and the
// weights (bf16 copies of q, k and v under Autocast(bf16), which the products
// then read; small heads without dropout then run one head at a time in one
// pass, engine/attention_bf16.cpp). Checked in tests against the composition
// of matmul, masked_fill, softmax and dropout, and by finite differences.
#include <algorithm>
#include <cmath>
#include <type_traits>
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
// Above this many bytes of weights, attention keeps each row's statistics
// instead and recomputes the scores in backward (AttentionMemory::automatic).
constexpr double kKeepWeightsBytes = 64.0 * (1 << 20);

struct Geometry {
  int64_t B, T, S, H, D, C;
  int64_t Skv;  // positions per batch row in the k and v buffers (S, or more for a preallocated cache)
};

// Everything backward needs besides the tensors.
struct Plan {
  Geometry g;
  double scale;
  bool causal;
  std::shared_ptr<const std::vector<uint8_t>> masked;  // (B,S) or empty
  double p;                                            // dropout probability, 0 = none
  uint64_t key;
  // Memory linear in T: the weights are not kept; each row's max and 1/sum
  // are, and backward recomputes the scores head by head.
  bool recompute = false;
};

// The heads [bh0, bh1) of the (B, H) grid, as at most three blocks of nb
// batch rows by nh heads each: f(b, h, nb, nh) with (b, h) the first head.
template <class F>
void head_blocks(int64_t bh0, int64_t bh1, int64_t H, F f) {
  while (bh0 < bh1) {
    const int64_t b = bh0 / H, h = bh0 % H;
    if (h != 0 || bh1 - bh0 < H) {
      const int64_t nh = std::min(H - h, bh1 - bh0);
      f(b, h, int64_t(1), nh);
      bh0 += nh;
    } else {
      const int64_t nb = (bh1 - bh0) / H;
      f(b, int64_t(0), nb, H);
      bh0 += nb * H;
    }
  }
}

// Heads [bh0, bh1) in runs whose (T,S) scratch stays within 16 MiB: what
// bounds the memory of the recomputing form (one run of the whole range
// when the weights are kept).
template <class F>
void head_runs(const Plan& pl, int64_t bh0, int64_t bh1, int64_t bytes_per_head, F f) {
  const int64_t most = pl.recompute ? std::max<int64_t>(1, (int64_t(16) << 20) / std::max<int64_t>(1, bytes_per_head))
                                    : bh1 - bh0;
  for (int64_t c0 = bh0; c0 < bh1; c0 += most) f(c0, std::min(bh1, c0 + most));
}

// A matrix of every head of a block: head (i, j) of the block at
// p + i*s0 + j*s1, rows ld apart.
template <class T>
struct Heads {
  T* p;
  int64_t ld, s0, s1;
};
// Heads inside a (B,rows,C) projection (q, k, v, the output, their gradients):
// rows C apart, batch rows rows*C apart, heads D apart.
template <class T>
Heads<T> in_projection(const Geometry& g, T* p, int64_t rows) {
  return {p, g.C, rows * g.C, g.D};
}
// Heads inside (B,H,T,S) score-shaped storage (the weights, or a thread's
// dropped or gradient copies of its share, laid out alike).
template <class T>
Heads<T> in_scores(const Geometry& g, T* p) {
  return {p, g.S, g.H * g.T * g.S, g.T * g.S};
}

// C = alpha op(A) op(B) for every head of an nb x nh block: one batched
// engine call (oneDNN: one primitive with two batch dimensions). It beats
// per-head calls and kernels of our own for small heads, forward and backward
// (bench/results/README.md, "full benchmark after batching the attention
// products"). The operands are In: T itself, or bf16 under Autocast(bf16)
// (accumulated in float32, as PyTorch's autocast runs its bmm).
template <class T, class In>
void block_gemm(int64_t nb, int64_t nh, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                Heads<const In> a, Heads<const In> b, Heads<T> c) {
  const engine::Batch batch{nb, nh, a.s0, a.s1, b.s0, b.s1, c.s0, c.s1};
  if constexpr (std::is_same_v<In, T>)
    engine::gemm_batched(batch, ta, tb, m, n, k, alpha, a.p, a.ld, b.p, b.ld, T(0), c.p, c.ld);
  else
    engine::gemm_bf16_batched(batch, ta, tb, m, n, k, alpha, a.p, a.ld, b.p, b.ld, T(0), c.p, c.ld);
}

// The n values at x as a product reads them: x itself, or their bf16 copy
// written to narrow[offset, offset + n) (the weights and their gradient under
// Autocast(bf16), which softmax and its backward compute in float32 between
// the products).
template <class In, class T>
const In* as_operand(const T* x, Scratch<In>& narrow, int64_t offset, int64_t n) {
  if constexpr (std::is_same_v<In, T>) {
    (void)narrow, (void)offset, (void)n;
    return x;
  } else {
    In* to = narrow.data() + offset;
    engine::to_bf16(x, to, n);
    return to;
  }
}

// dst[idx] = src[idx] * dropout scale of flat element base + idx, for idx < n.
template <class T>
void apply_dropout(const Plan& pl, int64_t base, int64_t n, const T* src, T* dst) {
  const T keep = T(1.0 / (1.0 - pl.p));
  const uint32_t thr = detail::dropout_threshold(pl.p);
  const uint32_t lo = static_cast<uint32_t>(pl.key), hi = static_cast<uint32_t>(pl.key >> 32);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = detail::dropout_hash(static_cast<uint32_t>(base + i), lo, hi);
    const T s = h >= thr ? keep : T(0);
    dst[i] = src[i] * s;
  }
}

// row[j] = value where query i of batch row b may not see key j: j > i under
// the causal mask, and the keys the padding mask names. One loop per kind of
// mask rather than a test per element. The fused kernels and the composed
// path (the reference for dtypes and orders they do not cover) both use it.
template <class T>
void fill_masked(const Plan& pl, int64_t b, int64_t i, T* row, T value) {
  const int64_t S = pl.g.S;
  if (pl.causal)
    for (int64_t j = i + 1; j < S; ++j) row[j] = value;
  if (!pl.masked->empty()) {
    const uint8_t* key_masked = pl.masked->data() + b * S;
    for (int64_t j = 0; j < S; ++j)
      if (key_masked[j]) row[j] = value;
  }
}

// Softmax of each score row in place, masked scores first set to kMasked.
// With `stat`, each row's max and 1/sum go to stat[2i], stat[2i+1]; with
// `from_stat`, they are read from there instead (the same weights, bit for
// bit, from the same scores).
template <class T>
void softmax_rows(const Plan& pl, int64_t b, T* P, T* stat = nullptr, const T* from_stat = nullptr) {
  const int64_t Tq = pl.g.T, S = pl.g.S;
  for (int64_t i = 0; i < Tq; ++i) fill_masked(pl, b, i, P + i * S, T(kMasked));
  if constexpr (std::is_same_v<T, float>) {
    // short rows, side by side in registers where the CPU has AVX-512
    if (!from_stat && detail::softmax_short_rows_in_place(P, Tq, S, stat)) return;
  }
  for (int64_t i = 0; i < Tq; ++i) {
    T* row = P + i * S;
    // The row's own max, not kMasked: unmasked scores may lie below it. (A
    // NaN score makes the whole row NaN whether or not row_max skips it.)
    const T mx = from_stat ? from_stat[2 * i] : detail::row_max(row, S);
    // Scores more than 87 below the row's largest (masked ones among them)
    // get weight 0, in both dtypes as detail::softmax_exp does for float32
    // (below that, glibc's exp takes a slow path).
    T total = 0;
    if constexpr (std::is_same_v<T, float>) {
      total = detail::softmax_exp_sum(row, row, S, mx);
    } else {
      for (int64_t j = 0; j < S; ++j) {
        const T z = row[j] - mx;
        row[j] = z < -87.0 ? 0.0 : std::exp(z);
      }
#pragma omp simd reduction(+ : total)
      for (int64_t j = 0; j < S; ++j) total += row[j];
    }
    const T inv = from_stat ? from_stat[2 * i + 1] : T(1) / total;
    if (stat) {
      stat[2 * i] = mx;
      stat[2 * i + 1] = inv;
    }
    for (int64_t j = 0; j < S; ++j) row[j] *= inv;
  }
}

// Softmax backward of one head's (T,S) weights P of batch row b, in place
// of their gradient dP: dS = P (dP - <dP, P>), zero where the score was
// masked.
template <class T>
void softmax_backward_rows(const Plan& pl, int64_t b, const T* P, T* dP) {
  const int64_t S = pl.g.S;
  for (int64_t i = 0; i < pl.g.T; ++i) {
    const T* pr = P + i * S;
    T* dr = dP + i * S;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < S; ++j) dot += dr[j] * pr[j];
    for (int64_t j = 0; j < S; ++j) dr[j] = pr[j] * (dr[j] - dot);
    fill_masked(pl, b, i, dr, T(0));
  }
}

// Whether each head runs in one pass that stays in cache, forward and
// backward (engine::attention_head_bf16 and its backward, under
// Autocast(bf16)): where the weights are kept (backward's recomputed scores
// come from the batched products, and must equal forward's bit for bit),
// not dropped, and a head's (T,S) scores fit kOnePassScores: the pass pays
// only while they stay in cache, and the calling thread's buffers, which
// grow to one head's size and are kept, stay small.
constexpr int64_t kOnePassScores = 64 * 1024;  // 256 KiB of float32
bool one_pass_heads(const Plan& pl) {
  return pl.p == 0 && !pl.recompute && pl.g.T * pl.g.S <= kOnePassScores && engine::small_heads_bf16(pl.g.D);
}

// Heads [bh0, bh1) of forward_heads in one pass each.
void one_pass_forward(const Plan& pl, const engine::bf16_t* q, const engine::bf16_t* k, const engine::bf16_t* v,
                      float* out, float* w, float* stats, int64_t bh0, int64_t bh1) {
  const int64_t Tq = pl.g.T, S = pl.g.S, H = pl.g.H, D = pl.g.D, C = pl.g.C, Skv = pl.g.Skv;
  struct Rows {
    const Plan& pl;
    int64_t b;
    float* stat;
  };
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / H, h = bh % H, qo = b * Tq * C + h * D, ko = b * Skv * C + h * D;
    Rows rows{pl, b, stats ? stats + bh * Tq * 2 : nullptr};
    engine::attention_head_bf16(
        Tq, S, D, static_cast<float>(pl.scale), q + qo, C, k + ko, v + ko, C, w + bh * Tq * S,
        [](void* ctx, float* P) {
          const Rows& r = *static_cast<const Rows*>(ctx);
          softmax_rows(r.pl, r.b, P, r.stat);
        },
        &rows, out + qo, C);
  }
}

// Heads [bh0, bh1) of backward_heads in one pass each, from forward's weights w.
void one_pass_backward(const Plan& pl, const engine::bf16_t* q, const engine::bf16_t* k, const engine::bf16_t* v,
                       const float* w, const engine::bf16_t* g, float* dq, float* dk, float* dv, int64_t bh0,
                       int64_t bh1) {
  const int64_t Tq = pl.g.T, S = pl.g.S, H = pl.g.H, D = pl.g.D, C = pl.g.C, Skv = pl.g.Skv;
  struct Rows {
    const Plan& pl;
    int64_t b;
    const float* P;
  };
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / H, h = bh % H, qo = b * Tq * C + h * D, ko = b * Skv * C + h * D;
    const float* P = w + bh * Tq * S;
    Rows rows{pl, b, P};
    engine::attention_head_backward_bf16(
        Tq, S, D, static_cast<float>(pl.scale), q + qo, C, k + ko, v + ko, C, P, g + qo,
        [](void* ctx, float* dP) {
          const Rows& r = *static_cast<const Rows*>(ctx);
          softmax_backward_rows(r.pl, r.b, r.P, dP);
        },
        &rows, dq + qo, dk + ko, dv + ko);
  }
}

// Heads [bh0, bh1): scores into w, softmax in place, then the context into
// out. Each block of heads is one batched product for the scores and one for
// the context.
template <class T, class In>
void forward_heads(const Plan& pl, const In* q, const In* k, const In* v, T* out, T* w, T* stats, int64_t bh0,
                   int64_t bh1) {
  // Plain copies, not a structured binding: lambdas may not capture those before C++20 (clang refuses).
  const int64_t B = pl.g.B, Tq = pl.g.T, S = pl.g.S, H = pl.g.H, D = pl.g.D, C = pl.g.C, Skv = pl.g.Skv;
  (void)B;
  const int64_t TS = Tq * S;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<In, engine::bf16_t>) {
    if (one_pass_heads(pl)) return one_pass_forward(pl, q, k, v, out, w, stats, bh0, bh1);
  }
  const int64_t narrow_bytes = std::is_same_v<In, T> ? 0 : TS * int64_t(sizeof(In));
  head_runs(pl, bh0, bh1, (pl.p > 0 ? 2 : 1) * TS * int64_t(sizeof(T)) + narrow_bytes, [&](int64_t c0, int64_t c1) {
    // The weights: kept (w), or a scratch of this run's heads.
    Scratch<T> scratch(pl.recompute ? (c1 - c0) * TS : 0), dropped(pl.p > 0 ? (c1 - c0) * TS : 0);
    Scratch<In> narrow(std::is_same_v<In, T> ? 0 : (c1 - c0) * TS);
    head_blocks(c0, c1, H, [&](int64_t b, int64_t h, int64_t nb, int64_t nh) {
      const int64_t bh = b * H + h, qo = b * Tq * C + h * D, ko = b * Skv * C + h * D;
      T* P = pl.recompute ? scratch.data() + (bh - c0) * TS : w + bh * TS;
      block_gemm<T, In>(nb, nh, false, true, Tq, S, D, T(pl.scale), in_projection(pl.g, q + qo, Tq),
                        in_projection(pl.g, k + ko, Skv), in_scores(pl.g, P));  // (T,S) per head
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t j = 0; j < nh; ++j)
          softmax_rows(pl, b + i, P + (i * H + j) * TS, stats ? stats + (bh + i * H + j) * Tq * 2 : nullptr);
      const T* Pv = P;
      if (pl.p > 0) {
        T* d = dropped.data() + (bh - c0) * TS;
        for (int64_t i = 0; i < nb; ++i)
          apply_dropout(pl, (bh + i * H) * TS, nh * TS, P + i * H * TS, d + i * H * TS);
        Pv = d;
      }
      // The block's heads are contiguous: nb > 1 only with every head of a row.
      const In* Pn = as_operand<In>(Pv, narrow, (bh - c0) * TS, nb * nh * TS);
      block_gemm<T, In>(nb, nh, false, false, Tq, D, S, T(1), in_scores(pl.g, Pn), in_projection(pl.g, v + ko, Skv),
                        in_projection(pl.g, out + qo, Tq));  // (T,D) per head
    });
  });
}

template <class T, class In>
void backward_heads(const Plan& pl, const In* q, const In* k, const In* v, const T* w, const T* stats, const In* g,
                    T* dq, T* dk, T* dv, int64_t bh0, int64_t bh1) {
  // Plain copies, not a structured binding: lambdas may not capture those before C++20 (clang refuses).
  const int64_t B = pl.g.B, Tq = pl.g.T, S = pl.g.S, H = pl.g.H, D = pl.g.D, C = pl.g.C, Skv = pl.g.Skv;
  (void)B;
  const int64_t TS = Tq * S;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<In, engine::bf16_t>) {
    if (one_pass_heads(pl)) return one_pass_backward(pl, q, k, v, w, g, dq, dk, dv, bh0, bh1);
  }
  const int64_t narrow_bytes = std::is_same_v<In, T> ? 0 : TS * int64_t(sizeof(In));
  head_runs(pl, bh0, bh1, (pl.recompute ? 3 : 2) * TS * int64_t(sizeof(T)) + narrow_bytes, [&](int64_t c0, int64_t c1) {
  Scratch<T> dPs((c1 - c0) * TS), dropped(pl.p > 0 ? (c1 - c0) * TS : 0), scratch(pl.recompute ? (c1 - c0) * TS : 0);
  Scratch<In> narrow(std::is_same_v<In, T> ? 0 : (c1 - c0) * TS);
  head_blocks(c0, c1, H, [&](int64_t b, int64_t h, int64_t nb, int64_t nh) {
    const int64_t bh = b * H + h, qo = b * Tq * C + h * D, ko = b * Skv * C + h * D;
    const T* P = w ? w + bh * TS : scratch.data() + (bh - c0) * TS;
    if (pl.recompute) {  // the weights again, from the scores and each row's saved max and 1/sum
      T* R = scratch.data() + (bh - c0) * TS;
      block_gemm<T, In>(nb, nh, false, true, Tq, S, D, T(pl.scale), in_projection(pl.g, q + qo, Tq),
                        in_projection(pl.g, k + ko, Skv), in_scores(pl.g, R));
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t j = 0; j < nh; ++j)
          softmax_rows(pl, b + i, R + (i * H + j) * TS, static_cast<T*>(nullptr), stats + (bh + i * H + j) * Tq * 2);
    }
    T* dP = dPs.data() + (bh - c0) * TS;
    // d(dropped weights) = g v^T; dv = dropped^T g
    block_gemm<T, In>(nb, nh, false, true, Tq, S, D, T(1), in_projection(pl.g, g + qo, Tq),
                      in_projection(pl.g, v + ko, Skv), in_scores(pl.g, dP));
    const T* Pv = P;
    if (pl.p > 0) {
      T* d = dropped.data() + (bh - c0) * TS;
      for (int64_t i = 0; i < nb; ++i) {
        apply_dropout(pl, (bh + i * H) * TS, nh * TS, P + i * H * TS, d + i * H * TS);
        apply_dropout(pl, (bh + i * H) * TS, nh * TS, dP + i * H * TS, dP + i * H * TS);
      }
      Pv = d;
    }
    const In* Pn = as_operand<In>(Pv, narrow, (bh - c0) * TS, nb * nh * TS);
    block_gemm<T, In>(nb, nh, true, false, S, D, Tq, T(1), in_scores(pl.g, Pn), in_projection(pl.g, g + qo, Tq),
                      in_projection(pl.g, dv + ko, Skv));
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t hj = 0; hj < nh; ++hj)
        softmax_backward_rows(pl, b + bi, P + (bi * H + hj) * TS, dP + (bi * H + hj) * TS);
    // dq = scale dS k; dk = scale dS^T q
    const In* dS = as_operand<In>(static_cast<const T*>(dP), narrow, (bh - c0) * TS, nb * nh * TS);
    block_gemm<T, In>(nb, nh, false, false, Tq, D, S, T(pl.scale), in_scores(pl.g, dS),
                      in_projection(pl.g, k + ko, Skv), in_projection(pl.g, dq + qo, Tq));
    block_gemm<T, In>(nb, nh, true, false, S, D, Tq, T(pl.scale), in_scores(pl.g, dS),
                      in_projection(pl.g, q + qo, Tq), in_projection(pl.g, dk + ko, Skv));
  });
  });
}

// The same attention from ops (matmul, masked_fill, softmax, dropout with
// the same hash): the fused op's second order differentiates this.
Tensor composed(const Plan& pl, const Tensor& q, const Tensor& k, const Tensor& v) {
  const Geometry& g = pl.g;
  auto heads = [&](const Tensor& t, int64_t n) {  // (B,n,C) -> (B,H,n,D)
    const Tensor u = n == t.size(1) ? t : slice(t, 1, 0, n);
    return permute(reshape(u, {g.B, n, g.H, g.D}), {0, 2, 1, 3});
  };
  Tensor scores = matmul(heads(q, g.T), transpose(heads(k, g.S), -1, -2)) * pl.scale;  // (B,H,T,S)
  if (pl.causal || !pl.masked->empty()) {
    Tensor mask = zeros({g.B, 1, g.T, g.S}, q.dtype());
    dispatch(q.dtype(), [&](auto z) {
      using T = decltype(z);
      T* m = mask.data<T>();
      for (int64_t b = 0; b < g.B; ++b)
        for (int64_t i = 0; i < g.T; ++i) fill_masked(pl, b, i, m + (b * g.T + i) * g.S, T(1));
    });
    scores = masked_fill(scores, mask, kMasked);
  }
  Tensor p = softmax(scores, -1);
  if (pl.p > 0) p = detail::dropout_keyed(p, pl.p, pl.key);
  return reshape(permute(matmul(p, heads(v, g.S)), {0, 2, 1, 3}), {g.B, g.T, g.C});
}

// First-order backward of the fused core from the operands of its products
// (q, k, v and the output's gradient g, of shapes qs and ks: T, or their bf16
// copies), writing gradients of type T.
template <class T, class In>
std::vector<Tensor> backward_core(const Plan& pl, int64_t cost, const In* q, const In* k, const In* v, const Shape& qs,
                                  const Shape& ks, const Tensor& w, const Tensor& stats, const In* g) {
  const Dtype dt = std::is_same_v<T, float> ? f32 : f64;
  Tensor dq = make_tensor(qs, dt);
  const bool partial = pl.g.Skv != pl.g.S;  // positions past kv_length get 0
  Tensor dk = partial ? zeros(ks, dt) : make_tensor(ks, dt);
  Tensor dv = partial ? zeros(ks, dt) : make_tensor(ks, dt);
  const T* pw = data_or_null<T>(w);
  const T* ps = data_or_null<T>(stats);
  T *gq = dq.data<T>(), *gk = dk.data<T>(), *gv = dv.data<T>();
  parallel_for(pl.g.B * pl.g.H, 2 * cost, [&](int64_t bh0, int64_t bh1) {
    backward_heads<T, In>(pl, q, k, v, pw, ps, g, gq, gk, gv, bh0, bh1);
  });
  return std::vector<Tensor>{dq, dk, dv};
}

// First-order backward in q's dtype.
std::vector<Tensor> attention_backward(const Plan& pl, int64_t cost, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& w, const Tensor& stats, const Tensor& g) {
  std::vector<Tensor> grads;
  dispatch(q.dtype(), [&](auto z) {
    using T = decltype(z);
    grads = backward_core<T, T>(pl, cost, q.data<T>(), k.data<T>(), v.data<T>(), q.shape(), k.shape(), w, stats,
                                g.data<T>());
  });
  return grads;
}

// Every head's forward into out, and w or stats: the products read q, k and
// v, or their bf16 copies q16, k16 and v16 when given (float32 q).
void forward_core(const Plan& pl, int64_t cost, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Bf16Buffer* q16, const Bf16Buffer* k16, const Bf16Buffer* v16, Tensor& out, Tensor& w,
                  Tensor& stats) {
  dispatch(q.dtype(), [&](auto z) {
    using T = decltype(z);
    T* po = out.data<T>();
    T* pw = data_or_null<T>(w);
    T* ps = data_or_null<T>(stats);
    if constexpr (std::is_same_v<T, float>) {
      if (q16) {
        parallel_for(pl.g.B * pl.g.H, cost, [&](int64_t bh0, int64_t bh1) {
          forward_heads<float, engine::bf16_t>(pl, q16->data(), k16->data(), v16->data(), po, pw, ps, bh0, bh1);
        });
        return;
      }
    }
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
    parallel_for(pl.g.B * pl.g.H, cost,
                 [&](int64_t bh0, int64_t bh1) { forward_heads<T, T>(pl, pq, pk, pv, po, pw, ps, bh0, bh1); });
  });
}

// The plan of a call of attention(), its arguments checked: the geometry,
// the scale, the key padding mask as bytes, the dropout key (the one draw
// from o.gen, when o.dropout > 0) and what backward keeps.
Plan plan_of(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
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
  const int64_t B = q.size(0), Tq = q.size(1), Skv = k.size(1), C = q.size(2), H = o.heads;
  if (o.kv_length < 0 || o.kv_length > Skv)
    throw ShapeError("attention: kv_length " + std::to_string(o.kv_length) + " must be in [0, " +
                     std::to_string(Skv) + "] for " + shapes());
  const int64_t S = o.kv_length > 0 ? o.kv_length : Skv;
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
  Plan pl{{B, Tq, S, H, D, C, Skv},
          o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(D)),
          o.causal,
          masked,
          o.dropout,
          o.dropout > 0 ? o.gen->engine()() : 0};

  // Keep the (B,H,T,S) weights for backward, or only each row's max and
  // 1/sum (B,H,T,2) and recompute the scores in backward: the latter when
  // the weights would take more than kKeepWeightsBytes (long contexts), or
  // when asked; never when the caller wants the weights.
  const double weight_bytes = static_cast<double>(B) * H * Tq * S * dtype_size(q.dtype());
  pl.recompute = !o.weights && (o.memory == AttentionMemory::recompute ||
                                (o.memory == AttentionMemory::automatic && weight_bytes > kKeepWeightsBytes));
  return pl;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  Plan pl = plan_of(q, k, v, o);
  const int64_t B = pl.g.B, Tq = pl.g.T, S = pl.g.S, H = pl.g.H, D = pl.g.D, C = pl.g.C;
  Tensor out = make_tensor({B, Tq, C}, q.dtype());
  Tensor w = pl.recompute ? Tensor() : make_tensor({B, H, Tq, S}, q.dtype());
  Tensor stats = pl.recompute ? make_tensor({B, H, Tq, 2}, q.dtype()) : Tensor();
  const int64_t cost = 4 * Tq * S * D + 8 * Tq * S;
  // Under Autocast(bf16), when the op is recorded for backward, the products
  // read the bf16 copies of q, k and v that backward keeps (shared with the
  // projections that saved the same tensors) and bf16 copies of the weights;
  // softmax stays float32, as PyTorch's autocast runs bmm in bf16 and softmax
  // in float32. Without a tape (evaluation, decoding) the core computes in
  // float32: copying q, k and v (a whole key/value cache when decoding) at
  // every call would cost about what the bf16 products save at a few queries.
  const bool narrow = autocast_bf16(q) && records({q, k, v});
  std::shared_ptr<const Bf16Buffer> q16, k16, v16;
  if (narrow) q16 = saved_bf16(q), k16 = saved_bf16(k), v16 = saved_bf16(v);
  forward_core(pl, cost, q, k, v, q16.get(), k16.get(), v16.get(), out, w, stats);
  if (o.weights) *o.weights = w;
  // For an export trace: heads, causal, kv_length; the scale as computed;
  // the padding mask (if any) as the op's extra tensor.
  const auto attributes = [&](TracedOp& t) {
    t.attrs = attr::Attention{H, o.causal, o.kv_length, pl.scale};
    if (o.key_padding_mask.defined()) t.extra = {o.key_padding_mask};
  };
  if (narrow) {
    // Backward keeps the bf16 copies (half the bytes) and runs its products
    // on them and on a bf16 copy of the output's gradient, as forward did.
    return detail::traced(record("attention", out, {q, k, v},
                  [q16, k16, v16, qs = q.shape(), ks = k.shape(), w, stats, pl, cost](const Tensor& g) {
                    if (grad_enabled()) throw_bf16_second_order("attention");
                    const auto g16 = to_bf16(g);
                    return backward_core<float, engine::bf16_t>(pl, cost, q16->data(), k16->data(), v16->data(), qs,
                                                                ks, w, stats, g16->data());
                  },
                  {w, stats}), attributes);
  }
  return detail::traced(record("attention", out, {q, k, v},
                [q, k, v, w, stats, pl, cost](const Tensor& g) {
                  if (grad_enabled())  // second order by recomputation from ops
                    return detail::vjp_by_recompute(
                        [pl](const std::vector<Tensor>& in) { return composed(pl, in[0], in[1], in[2]); }, {q, k, v},
                        g);
                  return attention_backward(pl, cost, q, k, v, w, stats, g);
                },
                {q, k, v, w, stats}), attributes);
}

}  // namespace xg
