// xg::engine: the matrix engine behind every product in xgrad. One call is
// one product on the calling thread (xgrad's pool splits large products and
// runs one engine call per block). float32 runs on oneDNN (the default build)
// or OpenBLAS (-DXG_GEMM=openblas); float64 always on OpenBLAS dgemm; bf16
// inputs with float32 accumulation and output on oneDNN only. Light header:
// no oneDNN or CBLAS types here.
#pragma once

#include <cstdint>
#include <string>

namespace xg::engine {

// Which library runs float32 products in this build, with its version:
// "oneDNN 2.6.3" or "OpenBLAS 0.3.21"; on a CPU without AVX-512 the oneDNN
// build sends large products with a transposed A to OpenBLAS and says so.
std::string f32_engine();
// OpenBLAS's kernel family (openblas_get_corename(), such as "Cooperlake"),
// which follows OPENBLAS_CORETYPE when it is set.
std::string blas_core();
// One line for logs: "f32 products on oneDNN 2.6.3, f64 on OpenBLAS 0.3.21
// (core Cooperlake), bf16 native (vdpbf16ps at 2.00x the float32 FMA's
// operations a second)" (bf16_route_reason()).
std::string describe();

// C (m,n) = alpha op(A) op(B) + beta C, row-major, op(X) = X or Xᵀ; lda, ldb,
// ldc are the row strides of A, B, C as stored. beta must be 0 or 1. A bias
// (n values), when not null, is added to every row of C (alpha must then be
// 1 and beta 0): on oneDNN inside the product, which spares a pass over C
// (linear's bias); on OpenBLAS written into C before a product with beta 1.
// Products smaller than about 48³ multiply-adds go to OpenBLAS whatever the
// build: oneDNN's fixed cost per call exceeds their work. So do float32
// products with a transposed A of at least 2^25 multiply-adds on a CPU
// without AVX-512, where oneDNN 2.6 runs some at half OpenBLAS's rate. The
// figures are in docs/performance.md, section Matrix engine.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr);
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias = nullptr);

// Where the products of a batch lie: n0 x n1 of them, the (i, j)th reading
// A at a + i*sa0 + j*sa1 (likewise B) and writing C at c + i*sc0 + j*sc1. A
// stride of 0 for A or B repeats one matrix along that dimension; C's strides
// must separate the products. Two levels address the heads of attention
// inside (B,T,C) projections: batch rows at stride T*C, heads at stride D.
struct Batch {
  // The counts n0, n1 of the two levels, and the strides (in elements) of A,
  // B and C along them.
  int64_t n0 = 1, n1 = 1;
  int64_t sa0 = 0, sa1 = 0, sb0 = 0, sb1 = 0, sc0 = 0, sc1 = 0;
  // count products at strides sa, sb, sc (one level).
  static Batch flat(int64_t count, int64_t sa, int64_t sb, int64_t sc) { return {1, count, 0, sa, 0, sb, 0, sc}; }
};

// The products of `batch`, C = alpha op(A) op(B) + beta C each. On oneDNN this
// is one call with batch dimensions; on OpenBLAS a loop.
void gemm_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// `count` products C_i = alpha op(A_i) op(B_i) + beta C_i with A_i = a + i*sa
// (and likewise B, C); sa or sb may be 0 (the same matrix for every i), sc
// may not.
template <class T>
void gemm_batched(int64_t count, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                  int64_t sa, const T* b, int64_t ldb, int64_t sb, T beta, T* c, int64_t ldc, int64_t sc) {
  if (count > 0) gemm_batched(Batch::flat(count, sa, sb, sc), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- bfloat16 ---------------------------------------------------------------

// A bf16 value is the upper 16 bits of a float32 (8-bit exponent, 7-bit mantissa).
using bf16_t = uint16_t;

// Empty when this build and CPU run bf16 products at full speed; otherwise
// why not, naming the missing CPU feature or the build option.
std::string bf16_unsupported_reason();

// Round to nearest even (NaN stays NaN), and back (exact).
void to_bf16(const float* x, bf16_t* y, int64_t n);
void from_bf16(const bf16_t* x, float* y, int64_t n);

// A testing aid: bf16 products on any CPU and build, slowly. While it is on,
// a bf16 product that this CPU or build cannot run widens its operands to
// float32 (exactly: a bf16 value is a float32 whose low 16 bits are zero) and
// multiplies in float32: the operands rounded as the hardware rounds them,
// the sums in float32 as there, only the order of the additions may differ.
// Autocast(bf16) and gemm_bf16 then run instead of throwing. xgrad's tests
// turn it on to check bf16 code on CPUs without AVX512_BF16. Off by default;
// process-wide. bf16_unsupported_reason() still names what is missing.
void set_bf16_emulation(bool on);
// True when bf16 products would run emulated here: emulation is on and
// bf16_unsupported_reason() is not empty.
bool bf16_emulated();
// The one rule of whether bf16 may run here, applied by gemm_bf16, Autocast
// and the programs' --precision: "" when it may (at full speed, or emulated
// because set_bf16_emulation asked for it), else bf16_unsupported_reason().
std::string bf16_refusal();

// How bf16 products run where they may. `native`: oneDNN's bf16 kernels, on
// the CPU's bf16 instructions (AVX512_BF16's dot products, or AMX).
// `widened`: each operand widened to float32 (exact) and multiplied by the
// float32 products; as native, the products are of the bf16 values and the
// sums float32, so the two differ only in the order of the additions.
enum class Bf16Route { native, widened };
// The route of this process: widened while bf16_emulated(); otherwise chosen
// at first use, widened where this CPU's bf16 dot product (vdpbf16ps) does
// fewer than 3/4 of the floating-point operations a second of its float32
// FMA and it has no AMX (Intel Xeons without AMX run it at half FMA's rate;
// AMD Zen 4 and Zen 5 run bf16 products at twice float32's), native
// elsewhere. The environment
// variable XG_BF16_PRODUCTS=native or =widened decides instead; any other
// value throws std::invalid_argument at first use.
Bf16Route bf16_route();
// Sets the route for the whole process from now on, as XG_BF16_PRODUCTS
// would (emulation still widens): to compare the two, or test both.
void set_bf16_route(Bf16Route route);
// One line for logs: the route and why, such as "widened (vdpbf16ps at 0.50x
// the float32 FMA's operations a second)".
std::string bf16_route_reason();

// As gemm/gemm_batched with bf16 A and B, accumulating in float32 into a
// float32 C (and a float32 bias, as gemm's, added to every row of every
// product). Throws std::runtime_error with bf16_unsupported_reason() when
// that is not empty, unless bf16_emulated().
void gemm_bf16_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       const float* bias = nullptr);
inline void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bf16_t* a, int64_t lda,
                      const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr) {
  gemm_bf16_batched(Batch{}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}
inline void gemm_bf16_batched(int64_t count, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const bf16_t* a, int64_t lda, int64_t sa, const bf16_t* b, int64_t ldb, int64_t sb,
                              float beta, float* c, int64_t ldc, int64_t sc) {
  if (count > 0)
    gemm_bf16_batched(Batch::flat(count, sa, sb, sc), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// One attention head in bf16 while it stays in L1 (engine/attention_bf16.cpp):
// P (T,S, rows S apart) = scale q k^T, then rows(ctx, P) (the caller's
// softmax and masks on the float32 P, in place), then out (T,D) = bf16(P) v,
// the products on AVX512_BF16's dot products, summed in float32 as the bf16
// products are. q's rows are ldq apart, k's and v's ldkv apart; out's ldo.
// small_heads_bf16(D): whether it runs here (the native bf16 route on
// AVX512_BF16, D = 16, 32 or 48); elsewhere it throws
// std::logic_error.
bool small_heads_bf16(int64_t D);
void attention_head_bf16(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq, const bf16_t* k,
                         const bf16_t* v, int64_t ldkv, float* P, void (*rows)(void* ctx, float* P), void* ctx,
                         float* out, int64_t ldo);
// Its backward, under the same conditions: from the weights P (T,S) that
// forward's softmax gave and the output's gradient g, dP = g v^T, dv =
// bf16(P)^T g, then rows(ctx, dP) (the caller's softmax backward, dS in
// place of dP), then dq = scale dS k and dk = scale dS^T q. q, g and dq
// have rows ldq apart; k, v, dk and dv ldkv apart; dk and dv get S rows.
void attention_head_backward_bf16(int64_t T, int64_t S, int64_t D, float scale, const bf16_t* q, int64_t ldq,
                                  const bf16_t* k, const bf16_t* v, int64_t ldkv, const float* P, const bf16_t* g,
                                  void (*rows)(void* ctx, float* dP), void* ctx, float* dq, float* dk, float* dv);

// Primitives kept by the calling thread's cache (oneDNN; 0 on OpenBLAS), and
// how many were created since start-up (each creation is costly: see
// docs/performance.md, section Matrix engine), and the bytes of the thread's
// scratchpad, shared by its primitives.
struct CacheStats {
  int64_t cached = 0;         // primitives in the calling thread's cache
  int64_t created = 0;        // primitives created since start-up, by every thread
  int64_t scratch_bytes = 0;  // the calling thread's scratchpad
};
CacheStats cache_stats();  // the counts now (all 0 in the OpenBLAS build)

}  // namespace xg::engine
