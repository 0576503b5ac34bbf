// One attention head in bf16 from start to end while it is in L1: the
// scores product, the caller's softmax on the float32 rows, the context
// product; in backward the four products around the caller's softmax
// backward. For a ViT's heads (T = S = 50, D = 32) one batched oneDNN product
// over every head writes the (B,H,T,S) scores to memory, softmax reads and
// writes them again, their bf16 copy is one more pass, and each product
// re-packs its operands: the head's whole forward took about five times its
// two products' time at oneDNN's rate on them alone. Here one head's scores
// (10 KB) never leave L1.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/detail/cpu.h"
#include "engine/gemm.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xg::engine {

// The kernels take D a multiple of 16 up to 64, but heads of 64 ran slower
// in one pass than in oneDNN's batched products on the Transformer's shapes,
// where heads of 16 and 32 ran faster and heads of 48 about even: so 48 at
// most (docs/performance.md, "Small heads in one pass").
bool small_heads_bf16(int64_t D) {
#if defined(__GNUC__) && defined(__x86_64__)
  const CpuFeatures& cpu = cpu_features();
  return D > 0 && D % 16 == 0 && D <= 48 && cpu.avx512f && cpu.avx512bw && cpu.avx512bf16 && !bf16_emulated() &&
         bf16_route() == Bf16Route::native;
#else
  (void)D;
  return false;
#endif
}

#if defined(__GNUC__) && defined(__x86_64__)
// GCC 12's AVX-512 headers start some intrinsics from a self-initialised
// "undefined" vector, which -Wall reports once they are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

// The packed operands of one head, reused by the calling thread's next head.
// Forward: k, v, p. Backward: k (v packed as keys), v (k packed as values),
// g and q (packed as values along T), p (dS in bf16), pi (P, then dS, pairs
// of rows interleaved) and dp.
struct Packs {
  std::vector<uint32_t> k;  // [D/2][Sp]: key j's pair of dimensions (2d, 2d+1) at [d][j]; 0 for j >= S
  std::vector<uint32_t> v;  // [S2/2][D]: the values of keys (2j, 2j+1) at dimension d, at [j][d]
  std::vector<bf16_t> p;    // [T][S2]: the weights in bf16, a 0 after each row when S is odd
  std::vector<uint32_t> g, q, pi;
  std::vector<float> dp;
};
thread_local Packs packs;

template <class T>
T* sized(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// The mask of a vector's first n lanes (all 16 for n >= 16).
inline __mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

inline uint32_t pair_at(const bf16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
}

// One product of a head: C[r][c] = scale * sum over p of A(r, p) . B[p][c],
// where A(r, p) is the bf16 pair at a + r*lda + p*step (step 2 for the
// pairs along a row; for rows interleaved in pairs by interleave_rows, lda 2
// and step twice their length) and B[p] the pairs packed at b + p*ldb, 16
// columns a vector, summed in float32 by AVX512_BF16's dot products.
struct Product {
  const bf16_t* a;
  int64_t lda, step;
  const uint32_t* b;
  int64_t ldb, pairs;
  float scale;
  float* c;
  int64_t ldc;
};

// R rows from r0 by N vectors of columns from c0, of which the first `cols`
// are stored.
template <int R, int N>
XG_BF16_TARGET void pairs_kernel(const Product& m, int64_t r0, int64_t c0, int64_t cols) {
  const bf16_t* a = m.a + r0 * m.lda;
  const uint32_t* b = m.b + c0;
  const int64_t lda = m.lda, step = m.step, ldb = m.ldb;
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int64_t p = 0; p < m.pairs; ++p) {
    __m512bh bv[N];
    for (int n = 0; n < N; ++n) bv[n] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * ldb + 16 * n));
    for (int r = 0; r < R; ++r) {
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair_at(a + r * lda + p * step))));
      for (int n = 0; n < N; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], av, bv[n]);
    }
  }
  const __m512 s = _mm512_set1_ps(m.scale);
  float* C = m.c + r0 * m.ldc + c0;
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n)
      _mm512_mask_storeu_ps(C + r * m.ldc + 16 * n, first_lanes(cols - 16 * n), _mm512_mul_ps(acc[r][n], s));
}

// pairs_kernel for 1 to 4 rows and 1 to 4 vectors, both known only at run
// time: R*N accumulators, 16 of the 32 vector registers at most.
template <int R>
XG_BF16_TARGET void pairs_vectors(const Product& m, int64_t r0, int64_t c0, int64_t cols) {
  switch ((cols + 15) / 16) {
    case 1: return pairs_kernel<R, 1>(m, r0, c0, cols);
    case 2: return pairs_kernel<R, 2>(m, r0, c0, cols);
    case 3: return pairs_kernel<R, 3>(m, r0, c0, cols);
    default: return pairs_kernel<R, 4>(m, r0, c0, cols);
  }
}

// The product's rows x cols, in blocks of 4 rows by 64 columns, or of 8
// rows where the columns take at most 2 vectors (so that 16 sums are in
// flight, as with 4 rows of 4 vectors).
XG_BF16_TARGET void product(const Product& m, int64_t rows, int64_t cols) {
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int64_t n = std::min<int64_t>(64, cols - c0);
    int64_t r0 = 0;
    if (n <= 32)
      for (; r0 + 8 <= rows; r0 += 8) n <= 16 ? pairs_kernel<8, 1>(m, r0, c0, n) : pairs_kernel<8, 2>(m, r0, c0, n);
    for (; r0 + 4 <= rows; r0 += 4) pairs_vectors<4>(m, r0, c0, n);
    switch (rows - r0) {
      case 1: pairs_vectors<1>(m, r0, c0, n); break;
      case 2: pairs_vectors<2>(m, r0, c0, n); break;
      case 3: pairs_vectors<3>(m, r0, c0, n); break;
      default: break;
    }
  }
}

// The 16 x 16 matrix of 32-bit words in r (a row a register) transposed in
// place: interleaved words, then pairs of words, then quarters twice.
XG_BF16_TARGET void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4b + m]: rows 4b..4b+3 of column 4L + m in each quarter L
  for (int b = 0; b < 16; b += 4)
    for (int m = 0; m < 2; ++m) {
      u[b + 2 * m] = _mm512_unpacklo_epi64(t[b + m], t[b + m + 2]);
      u[b + 2 * m + 1] = _mm512_unpackhi_epi64(t[b + m], t[b + m + 2]);
    }
  for (int m = 0; m < 4; ++m) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xdd);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88),
                  w1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xdd);
    r[m] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[4 + m] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[8 + m] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
    r[12 + m] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
  }
}

// kp[d][j] = k's pair of dimensions (2d, 2d+1) of key j, 0 past S: blocks of
// 16 keys by 16 pairs transposed in registers (16-lane gathers took about
// twice as long, a loop of scalar moves longer still).
XG_BF16_TARGET void pack_keys(const bf16_t* k, int64_t ldkv, int64_t S, int64_t sp, int64_t dpairs, uint32_t* kp) {
  __m512i r[16];
  for (int64_t j = 0; j < S; j += 16) {
    const int64_t keys = std::min<int64_t>(16, S - j);
    for (int64_t d = 0; d < dpairs; d += 16) {
      const int64_t pairs = std::min<int64_t>(16, dpairs - d);
      const __mmask16 m = first_lanes(pairs);
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < keys ? _mm512_maskz_loadu_epi32(m, k + (j + i) * ldkv + 2 * d) : _mm512_setzero_si512();
      transpose16(r);
      for (int64_t c = 0; c < pairs; ++c) _mm512_storeu_si512(kp + (d + c) * sp + j, r[c]);
    }
  }
}

// vp[j][d] = the values of keys 2j and 2j+1 (0 past S) at dimension d, D
// a multiple of 16.
XG_BF16_TARGET void pack_values(const bf16_t* v, int64_t ldkv, int64_t S, int64_t D, int64_t spairs, uint32_t* vp) {
  for (int64_t j = 0; j < spairs; ++j) {
    const bf16_t* v0 = v + 2 * j * ldkv;
    const bf16_t* v1 = 2 * j + 1 < S ? v0 + ldkv : nullptr;
    for (int64_t d = 0; d < D; d += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v0 + d)));
      const __m512i hi =
          v1 ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v1 + d))) : _mm512_setzero_si512();
      _mm512_storeu_si512(vp + j * D + d, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// out[j][c] = the pair (X[2j][c], X[2j+1][c]) in bf16, 0 past the last row:
// the transposed operand of dv = P^T g and dk = dS^T q without a transpose
// (A(c, j) of a Product with lda 2 and step 2*cols). AVX512_BF16's own
// conversion, which flushes denormals to 0, rounds as to_bf16 otherwise; the
// dot products that read these pairs take denormals as 0 anyway.
XG_BF16_TARGET void interleave_rows(const float* X, int64_t rows, int64_t cols, uint32_t* out) {
  // word 2i of the result is word i of the first row's 16, word 2i+1 word i of the second's
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t j = 0; 2 * j < rows; ++j) {
    const float* x0 = X + 2 * j * cols;
    const float* x1 = 2 * j + 1 < rows ? x0 + cols : nullptr;
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 m = first_lanes(cols - c);
      const __m512 lo = _mm512_maskz_loadu_ps(m, x0 + c);
      const __m512 hi = x1 ? _mm512_maskz_loadu_ps(m, x1 + c) : _mm512_setzero_ps();
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
      _mm512_mask_storeu_epi32(out + j * cols + c, m, _mm512_permutexvar_epi16(order, both));
    }
  }
}

// X's (rows, cols) in bf16 into rows of s2 = cols rounded up to even, a 0
// after each row of odd length.
void rows_to_bf16(const float* X, int64_t rows, int64_t cols, bf16_t* out) {
  if (cols % 2 == 0) return to_bf16(X, out, rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    to_bf16(X + i * cols, out + i * (cols + 1), cols);
    out[i * (cols + 1) + cols] = 0;
  }
}

XG_BF16_TARGET void head(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq, const bf16_t* k,
                         const bf16_t* v, int64_t ldkv, float* P, void (*rows)(void*, float*), void* ctx, float* out,
                         int64_t ldo) {
  const int64_t sp = (S + 15) / 16 * 16, s2 = S + (S & 1), dpairs = D / 2, spairs = s2 / 2;
  Packs& pk = packs;
  uint32_t* kp = sized(pk.k, dpairs * sp);
  pack_keys(k, ldkv, S, sp, dpairs, kp);
  product({q, ldq, 2, kp, sp, dpairs, scale, P, S}, T, S);  // P = scale q k^T
  rows(ctx, P);
  bf16_t* pb = sized(pk.p, T * s2);
  rows_to_bf16(P, T, S, pb);
  uint32_t* vp = sized(pk.v, spairs * D);
  pack_values(v, ldkv, S, D, spairs, vp);
  product({pb, s2, 2, vp, D, spairs, 1.0f, out, ldo}, T, D);  // out = P v (scaled by 1: exact)
}

// The four products of a head's backward around the caller's softmax
// backward, each operand packed once.
XG_BF16_TARGET void head_backward(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq,
                                  const bf16_t* k, const bf16_t* v, int64_t ldkv, const float* P, const bf16_t* g,
                                  void (*rows)(void*, float*), void* ctx, float* dq, float* dk, float* dv) {
  const int64_t sp = (S + 15) / 16 * 16, s2 = S + (S & 1), dpairs = D / 2, spairs = s2 / 2, tpairs = (T + 1) / 2;
  Packs& pk = packs;
  uint32_t* vk = sized(pk.k, dpairs * sp);
  pack_keys(v, ldkv, S, sp, dpairs, vk);
  float* dP = sized(pk.dp, T * S);
  product({g, ldq, 2, vk, sp, dpairs, 1.0f, dP, S}, T, S);  // dP = g v^T
  uint32_t* gp = sized(pk.g, tpairs * D);
  pack_values(g, ldq, T, D, tpairs, gp);
  uint32_t* pairs = sized(pk.pi, tpairs * S);
  interleave_rows(P, T, S, pairs);
  const bf16_t* transposed = reinterpret_cast<const bf16_t*>(pairs);
  product({transposed, 2, 2 * S, gp, D, tpairs, 1.0f, dv, ldkv}, S, D);  // dv = P^T g
  rows(ctx, dP);  // dS, in place
  bf16_t* sb = sized(pk.p, T * s2);
  rows_to_bf16(dP, T, S, sb);
  uint32_t* kp = sized(pk.v, spairs * D);
  pack_values(k, ldkv, S, D, spairs, kp);
  product({sb, s2, 2, kp, D, spairs, scale, dq, ldq}, T, D);  // dq = scale dS k
  uint32_t* qp = sized(pk.q, tpairs * D);
  pack_values(q, ldq, T, D, tpairs, qp);
  interleave_rows(dP, T, S, pairs);
  product({transposed, 2, 2 * S, qp, D, tpairs, scale, dk, ldkv}, S, D);  // dk = scale dS^T q
}

}  // namespace
#pragma GCC diagnostic pop
#endif

void attention_head_bf16(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq, const bf16_t* k,
                         const bf16_t* v, int64_t ldkv, float* P, void (*rows)(void* ctx, float* P), void* ctx,
                         float* out, int64_t ldo) {
  if (!small_heads_bf16(D)) throw std::logic_error("attention_head_bf16: not available here (small_heads_bf16)");
#if defined(__GNUC__) && defined(__x86_64__)
  head(T, S, D, scale, q, ldq, k, v, ldkv, P, rows, ctx, out, ldo);
#else
  (void)T, (void)S, (void)scale, (void)q, (void)ldq, (void)k, (void)v, (void)ldkv, (void)P, (void)rows, (void)ctx,
      (void)out, (void)ldo;
#endif
}

void attention_head_backward_bf16(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq,
                                  const bf16_t* k, const bf16_t* v, int64_t ldkv, const float* P, const bf16_t* g,
                                  void (*rows)(void* ctx, float* dP), void* ctx, float* dq, float* dk, float* dv) {
  if (!small_heads_bf16(D))
    throw std::logic_error("attention_head_backward_bf16: not available here (small_heads_bf16)");
#if defined(__GNUC__) && defined(__x86_64__)
  head_backward(T, S, D, scale, q, ldq, k, v, ldkv, P, g, rows, ctx, dq, dk, dv);
#else
  (void)T, (void)S, (void)scale, (void)q, (void)ldq, (void)k, (void)v, (void)ldkv, (void)P, (void)g, (void)rows,
      (void)ctx, (void)dq, (void)dk, (void)dv;
#endif
}

}  // namespace xg::engine
