// One attention head in bf16 from start to end while it is in L1: the
// scores product, the caller's softmax on the float32 rows, the context
// product. For a ViT's heads (T = S = 50, D = 32) one batched oneDNN product
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

bool small_heads_bf16(int64_t D) {
#if defined(__GNUC__) && defined(__x86_64__)
  const CpuFeatures& cpu = cpu_features();
  return D > 0 && D % 16 == 0 && D <= 64 && cpu.avx512f && cpu.avx512bw && cpu.avx512bf16 && !bf16_emulated() &&
         bf16_route() == Bf16Route::native;
#else
  (void)D;
  return false;
#endif
}

#if defined(__GNUC__) && defined(__x86_64__)
namespace {

// The packed operands of one head, reused by the calling thread's next head.
struct Packs {
  std::vector<uint32_t> k;  // [D/2][Sp]: key j's pair of dimensions (2d, 2d+1) at [d][j]; 0 for j >= S
  std::vector<uint32_t> v;  // [S2/2][D]: the values of keys (2j, 2j+1) at dimension d, at [j][d]
  std::vector<bf16_t> p;    // [T][S2]: the weights in bf16, a 0 after each row when S is odd
};
thread_local Packs packs;

inline uint32_t pair_at(const bf16_t* p) {
  uint32_t u;
  std::memcpy(&u, p, sizeof u);
  return u;
}

// Both products of a head: C[r][c] = scale * sum over p of a[r][2p, 2p+1]
// . b[p][c] (a bf16 pair of a's row against the pairs packed at b[p], 16
// columns a vector), for R rows and N vectors of columns, of which the first
// `cols` are stored; rows of a are lda apart, of b ldb (in pairs), of C ldc.
template <int R, int N>
XG_BF16_TARGET void pairs_kernel(const bf16_t* a, int64_t lda, const uint32_t* b, int64_t ldb, int64_t pairs,
                                 float scale, float* C, int64_t ldc, int64_t cols) {
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[N];
    for (int n = 0; n < N; ++n) bv[n] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * ldb + 16 * n));
    for (int r = 0; r < R; ++r) {
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair_at(a + r * lda + 2 * p))));
      for (int n = 0; n < N; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], av, bv[n]);
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) {
      const int64_t left = cols - 16 * n;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
      _mm512_mask_storeu_ps(C + r * ldc + 16 * n, m, _mm512_mul_ps(acc[r][n], s));
    }
}

// pairs_kernel for 1 to 4 rows and 1 to 4 vectors, both known only at run
// time: R*N accumulators, 16 of the 32 vector registers at most.
template <int R>
XG_BF16_TARGET void pairs_vectors(int n, const bf16_t* a, int64_t lda, const uint32_t* b, int64_t ldb, int64_t pairs,
                                  float scale, float* C, int64_t ldc, int64_t cols) {
  switch (n) {
    case 1: return pairs_kernel<R, 1>(a, lda, b, ldb, pairs, scale, C, ldc, cols);
    case 2: return pairs_kernel<R, 2>(a, lda, b, ldb, pairs, scale, C, ldc, cols);
    case 3: return pairs_kernel<R, 3>(a, lda, b, ldb, pairs, scale, C, ldc, cols);
    default: return pairs_kernel<R, 4>(a, lda, b, ldb, pairs, scale, C, ldc, cols);
  }
}
XG_BF16_TARGET void pairs_rows(int64_t r, int n, const bf16_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
                               int64_t pairs, float scale, float* C, int64_t ldc, int64_t cols) {
  switch (r) {
    case 1: return pairs_vectors<1>(n, a, lda, b, ldb, pairs, scale, C, ldc, cols);
    case 2: return pairs_vectors<2>(n, a, lda, b, ldb, pairs, scale, C, ldc, cols);
    case 3: return pairs_vectors<3>(n, a, lda, b, ldb, pairs, scale, C, ldc, cols);
    default: return pairs_vectors<4>(n, a, lda, b, ldb, pairs, scale, C, ldc, cols);
  }
}

// kp[d][j] = k's pair of dimensions (2d, 2d+1) of key j, 0 past S: 16 keys
// a gather (a loop of scalar moves took most of the head's own time).
XG_BF16_TARGET void pack_keys(const bf16_t* k, int64_t ldkv, int64_t S, int64_t sp, int64_t dpairs, uint32_t* kp) {
  if (ldkv > (int64_t(1) << 26)) {  // 16 rows' offsets would not fit 32-bit lanes
    for (int64_t d = 0; d < dpairs; ++d) {
      for (int64_t j = 0; j < S; ++j) kp[d * sp + j] = pair_at(k + j * ldkv + 2 * d);
      for (int64_t j = S; j < sp; ++j) kp[d * sp + j] = 0;
    }
    return;
  }
  const __m512i rows16 = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(ldkv)));
  for (int64_t j = 0; j < S; j += 16) {
    const __mmask16 keys = S - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (S - j)) - 1);
    for (int64_t d = 0; d < dpairs; ++d)
      _mm512_storeu_si512(kp + d * sp + j, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), keys, rows16,
                                                                         k + j * ldkv + 2 * d, 2));
  }
}

// vp[j][d] = the values of keys 2j and 2j+1 (0 past S) at dimension d.
void pack_values(const bf16_t* v, int64_t ldkv, int64_t S, int64_t D, int64_t spairs, uint32_t* vp) {
  for (int64_t j = 0; j < spairs; ++j) {
    const bf16_t* v0 = v + 2 * j * ldkv;
    const bf16_t* v1 = 2 * j + 1 < S ? v0 + ldkv : nullptr;
    for (int64_t d = 0; d < D; ++d) vp[j * D + d] = uint32_t(v0[d]) | (v1 ? uint32_t(v1[d]) << 16 : 0u);
  }
}

XG_BF16_TARGET void head(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq, const bf16_t* k,
                         const bf16_t* v, int64_t ldkv, float* P, void (*rows)(void*, float*), void* ctx, float* out,
                         int64_t ldo) {
  const int64_t sp = (S + 15) / 16 * 16, s2 = S + (S & 1), dpairs = D / 2, spairs = s2 / 2;
  Packs& pk = packs;
  if (int64_t(pk.k.size()) < dpairs * sp) pk.k.resize(dpairs * sp);
  if (int64_t(pk.v.size()) < spairs * D) pk.v.resize(spairs * D);
  if (int64_t(pk.p.size()) < T * s2) pk.p.resize(T * s2);
  uint32_t* kp = pk.k.data();
  uint32_t* vp = pk.v.data();
  bf16_t* pb = pk.p.data();
  pack_keys(k, ldkv, S, sp, dpairs, kp);
  pack_values(v, ldkv, S, D, spairs, vp);
  for (int64_t c = 0; c < S; c += 64) {
    const int64_t cols = std::min<int64_t>(64, S - c);
    const int nv = static_cast<int>((cols + 15) / 16);
    for (int64_t i = 0; i < T; i += 4)
      pairs_rows(std::min<int64_t>(4, T - i), nv, q + i * ldq, ldq, kp + c, sp, dpairs, scale, P + i * S + c, S, cols);
  }
  rows(ctx, P);
  if (s2 == S) {
    to_bf16(P, pb, T * S);
  } else {
    for (int64_t i = 0; i < T; ++i) {
      to_bf16(P + i * S, pb + i * s2, S);
      pb[i * s2 + S] = 0;
    }
  }
  for (int64_t i = 0; i < T; i += 4)
    pairs_rows(std::min<int64_t>(4, T - i), static_cast<int>(D / 16), pb + i * s2, s2, vp, D, spairs, 1.0f,
               out + i * ldo, ldo, D);  // scaled by 1: exact
}

}  // namespace
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

}  // namespace xg::engine
