// OpenBLAS for float64 (and float32 in the OpenBLAS build or for small
// products), bf16 conversions, and the parts of engine/gemm.h that do not
// depend on the engine.
#include <cblas.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>
#include <fmt/format.h>

#include "engine/blas.h"
#include "engine/detail/cpu.h"
#include "engine/gemm.h"

namespace xg::engine {

namespace blas {
namespace {
// One call is one product on the calling thread (xgrad's pool splits
// products), so OpenBLAS's own threads are switched off before its first use.
void single_threaded() {
  static const bool once = (openblas_set_num_threads(1), true);
  (void)once;
}
}  // namespace

void check_beta(double beta, bool bias, double alpha) {
  if (beta != 0.0 && beta != 1.0) throw std::invalid_argument(fmt::format("engine::gemm: beta {} is not 0 or 1", beta));
  // oneDNN scales the bias with the product, OpenBLAS would not: one
  // meaning, by allowing only alpha 1.
  if (bias && (beta != 0.0 || alpha != 1.0))
    throw std::invalid_argument(
        fmt::format("engine::gemm: a bias needs alpha 1 and beta 0, got alpha {} and beta {}", alpha, beta));
}

template <>
void gemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  check_beta(beta, bias != nullptr, alpha);
  if (bias) fill_rows(bias, m, n, c, ldc), beta = 1;
  single_threaded();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
              b, ldb, beta, c, ldc);
}
template <>
void gemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias) {
  check_beta(beta, bias != nullptr, alpha);
  if (bias) fill_rows(bias, m, n, c, ldc), beta = 1;
  single_threaded();
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
              b, ldb, beta, c, ldc);
}
}  // namespace blas

std::string blas_core() { return openblas_get_corename(); }

namespace blas {
std::string version() {
  std::string v = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  v.erase(0, v.find_first_not_of(' '));
  v.erase(v.find_last_not_of(' ') + 1);
  return v;
}
}  // namespace blas

std::string describe() {
  return fmt::format("f32 products on {}, f64 on {} (core {})", f32_engine(), blas::version(), blas_core());
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias) {
  blas::gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

void gemm_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  blas::gemm_batched<double>(batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {
// Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate;
// a NaN keeps its sign and top payload and becomes quiet. Written on integers
// so that the loop vectorises.
void to_bf16_loop(const float* x, bf16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    y[i] = static_cast<bf16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// AVX512_BF16's own conversion (vcvtne2ps2bf16, 32 values an instruction)
// rounds to nearest even and quiets NaNs as to_bf16_loop does, at twice its
// speed on a tensor in cache, but it flushes denormal inputs to zero: a block
// of 32 that holds one goes through the loop instead.
#define XG_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

// The lanes of v that are denormal: nonzero with a zero exponent, that is
// |bits| - 1 below 0x7fffff as unsigned.
XG_BF16_TARGET __mmask16 denormal_lanes(__m512 v) {
  const __m512i m = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)),
                                     _mm512_set1_epi32(1));
  return _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(0x007fffff));
}

XG_BF16_TARGET void to_bf16_avx512(const float* x, bf16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    if (_kortestz_mask16_u8(denormal_lanes(lo), denormal_lanes(hi))) {
      _mm512_storeu_si512(y + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    } else {
      to_bf16_loop(x + i, y + i, 32);
    }
  }
  to_bf16_loop(x + i, y + i, n - i);
}
#undef XG_BF16_TARGET
#endif
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    return f;
  }();
  return features;
}

void to_bf16(const float* x, bf16_t* y, int64_t n) {
#if defined(__GNUC__) && defined(__x86_64__)
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512bf16) return to_bf16_avx512(x, y, n);
#endif
  to_bf16_loop(x, y, n);
}

void from_bf16(const bf16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &u, 4);
  }
}

namespace {
std::atomic<bool> g_bf16_emulation{false};

// The rows x cols matrix at x (row stride ld) as contiguous float32 in `to`.
void widened(const bf16_t* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& to) {
  to.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) from_bf16(x + r * ld, to.data() + r * cols, cols);
}
}  // namespace

void set_bf16_emulation(bool on) { g_bf16_emulation.store(on); }
bool bf16_emulated() { return g_bf16_emulation.load() && !bf16_unsupported_reason().empty(); }
std::string bf16_refusal() { return bf16_emulated() ? std::string() : bf16_unsupported_reason(); }

namespace blas {
void gemm_bf16_emulated(const Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c,
                        int64_t ldc, const float* bias) {
  check_beta(beta, bias != nullptr, alpha);
  // op(A) is m x k: stored k x m when transposed; likewise B, k x n.
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  // An operand repeated along the batch (stride 0) is widened once.
  std::vector<float> a32, b32;
  const bf16_t *a_done = nullptr, *b_done = nullptr;
  for (int64_t i = 0; i < bt.n0; ++i)
    for (int64_t j = 0; j < bt.n1; ++j) {
      const bf16_t* ai = a + i * bt.sa0 + j * bt.sa1;
      const bf16_t* bi = b + i * bt.sb0 + j * bt.sb1;
      if (ai != a_done) widened(ai, a_rows, a_cols, lda, a32), a_done = ai;
      if (bi != b_done) widened(bi, b_rows, b_cols, ldb, b32), b_done = bi;
      engine::gemm(ta, tb, m, n, k, alpha, a32.data(), a_cols, b32.data(), b_cols, beta,
                   c + i * bt.sc0 + j * bt.sc1, ldc, bias);
    }
}
}  // namespace blas

}  // namespace xg::engine
