// OpenBLAS for float64 (and float32 in the OpenBLAS build or for small
// products), bf16 conversions, and the parts of engine/gemm.h that do not
// depend on the engine.
#include <cblas.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
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
bool generic_core() {
  static const bool generic = [] {
    const std::string core = openblas_get_corename();
    bool without_fma = false;
    for (const char* name : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Opteron",
                             "Barcelona", "Bobcat", "Katmai", "Coppermine", "Northwood", "Banias"})
      without_fma = without_fma || core == name;
#if defined(__GNUC__) && defined(__x86_64__)
    return without_fma && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
  }();
  return generic;
}

std::string version() {
  std::string v = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  v.erase(0, v.find_first_not_of(' '));
  v.erase(v.find_last_not_of(' ') + 1);
  return v;
}
}  // namespace blas

std::string describe() {
  return fmt::format("f32 products on {}, f64 on {} (core {}), bf16 {}", f32_engine(), blas::version(), blas_core(),
                     bf16_route_reason());
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
std::atomic<int> g_route_set{-1};  // a Bf16Route set by set_bf16_route, or -1

#if defined(__GNUC__) && defined(__x86_64__)
// Seconds for `rounds` rounds of 12 independent chains of one instruction on
// zmm registers: vfmadd231ps, or vdpbf16ps. The loop is written in assembly
// so that what is timed is the instruction alone at every optimisation level
// and under the sanitizers (compiled, the accumulators may live in memory).
// Zero operands: neither instruction runs slower on them.
#define XG_TWELVE(op)                                                                                         \
  op " %%zmm13, %%zmm14, %%zmm0\n\t" op " %%zmm13, %%zmm14, %%zmm1\n\t" op " %%zmm13, %%zmm14, %%zmm2\n\t"      \
  op " %%zmm13, %%zmm14, %%zmm3\n\t" op " %%zmm13, %%zmm14, %%zmm4\n\t" op " %%zmm13, %%zmm14, %%zmm5\n\t"    \
  op " %%zmm13, %%zmm14, %%zmm6\n\t" op " %%zmm13, %%zmm14, %%zmm7\n\t" op " %%zmm13, %%zmm14, %%zmm8\n\t"    \
  op " %%zmm13, %%zmm14, %%zmm9\n\t" op " %%zmm13, %%zmm14, %%zmm10\n\t" op " %%zmm13, %%zmm14, %%zmm11\n\t"
#define XG_CHAINS(op)                                                                                         \
  __asm__ volatile(                                                                                           \
      "vpxord %%zmm13, %%zmm13, %%zmm13\n\tvpxord %%zmm14, %%zmm14, %%zmm14\n\t"                            \
      "1:\n\t" XG_TWELVE(op) "dec %0\n\tjnz 1b\n\tvzeroupper"                                              \
      : "+r"(rounds)                                                                                          \
      :                                                                                                       \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",      \
        "xmm13", "xmm14", "cc")
double fma_seconds(int64_t rounds) {
  const auto t0 = std::chrono::steady_clock::now();
  XG_CHAINS("vfmadd231ps");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
double dot_seconds(int64_t rounds) {
  const auto t0 = std::chrono::steady_clock::now();
  XG_CHAINS("vdpbf16ps");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
#undef XG_CHAINS
#undef XG_TWELVE

// vdpbf16ps's floating-point operations a second over vfmadd231ps's (64
// against 32 an instruction): the best of 8 interleaved runs of each, about
// half a millisecond in all, so a clock ramp or a preempted run cannot
// decide.
double dot_over_fma() {
  constexpr int64_t kRounds = 4000;
  double fma = 1e30, dot = 1e30;
  for (int run = 0; run < 8; ++run) {
    fma = std::min(fma, fma_seconds(kRounds));
    dot = std::min(dot, dot_seconds(kRounds));
  }
  return (64.0 / dot) / (32.0 / fma);
}

bool has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID leaf 7: EDX bit 22 is AMX-BF16, bit 24 AMX-TILE.
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && (d >> 24 & 1);
}
#endif

struct RouteChoice {
  Bf16Route route = Bf16Route::native;
  std::string reason;
};

RouteChoice choose_route() {
  if (const char* v = std::getenv("XG_BF16_PRODUCTS")) {
    const std::string s(v);
    if (s == "native") return {Bf16Route::native, "native (XG_BF16_PRODUCTS)"};
    if (s == "widened") return {Bf16Route::widened, "widened (XG_BF16_PRODUCTS)"};
    throw std::invalid_argument(
        fmt::format("XG_BF16_PRODUCTS is '{}'; it must be 'native' or 'widened', or be unset", s));
  }
  if (const std::string why = bf16_unsupported_reason(); !why.empty())
    return {Bf16Route::native, "none (" + why + ")"};
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_amx_bf16()) return {Bf16Route::native, "native (AMX)"};
  const double r = dot_over_fma();
  return {r < 0.75 ? Bf16Route::widened : Bf16Route::native,
          fmt::format("{} (vdpbf16ps at {:.2f}x the float32 FMA's operations a second)", r < 0.75 ? "widened" : "native",
                      r)};
#else
  return {Bf16Route::native, "native"};
#endif
}

const RouteChoice& route_choice() {
  static const RouteChoice choice = choose_route();
  return choice;
}

// Where the rows x cols matrices (row stride ld) of a batch lie, from the
// first element any of them reads to one past the last: [lo, lo + size).
struct Span {
  int64_t lo = 0, size = 0;
};
Span span_of(int64_t rows, int64_t cols, int64_t ld, int64_t n0, int64_t s0, int64_t n1, int64_t s1) {
  if (rows <= 0 || cols <= 0) return {};
  const int64_t e0 = (n0 - 1) * s0, e1 = (n1 - 1) * s1;
  const int64_t lo = std::min<int64_t>(0, e0) + std::min<int64_t>(0, e1);
  const int64_t hi = std::max<int64_t>(0, e0) + std::max<int64_t>(0, e1) + (rows - 1) * ld + cols;
  return {lo, hi - lo};
}
}  // namespace

void set_bf16_emulation(bool on) { g_bf16_emulation.store(on); }
bool bf16_emulated() { return g_bf16_emulation.load() && !bf16_unsupported_reason().empty(); }
std::string bf16_refusal() { return bf16_emulated() ? std::string() : bf16_unsupported_reason(); }
Bf16Route bf16_route() {
  if (bf16_emulated()) return Bf16Route::widened;
  const int set = g_route_set.load();
  return set < 0 ? route_choice().route : static_cast<Bf16Route>(set);
}
void set_bf16_route(Bf16Route route) { g_route_set.store(static_cast<int>(route)); }
std::string bf16_route_reason() {
  if (bf16_emulated()) return "widened (emulated)";
  const int set = g_route_set.load();
  if (set < 0) return route_choice().reason;
  return static_cast<Bf16Route>(set) == Bf16Route::native ? "native (set_bf16_route)" : "widened (set_bf16_route)";
}

namespace blas {
float* widened_into(int slot, const bf16_t* x, int64_t n) {
  thread_local std::array<std::vector<float>, 3> buffers;
  std::vector<float>& v = buffers.at(static_cast<size_t>(slot));
  const size_t want = static_cast<size_t>(std::max<int64_t>(n, 1));
  if (v.size() < want) v.resize(want);
  from_bf16(x, v.data(), n);
  return v.data();
}

void gemm_bf16_widened(const Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       const float* bias) {
  check_beta(beta, bias != nullptr, alpha);
  if (bt.n0 <= 0 || bt.n1 <= 0) return;
  // op(A) is m x k: stored k x m when transposed; likewise B, k x n. Each
  // operand's whole span is widened once, so the float32 products read the
  // same layout and strides (a matrix repeated at stride 0 once).
  const Span sa = span_of(ta ? k : m, ta ? m : k, lda, bt.n0, bt.sa0, bt.n1, bt.sa1);
  const Span sb = span_of(tb ? n : k, tb ? k : n, ldb, bt.n0, bt.sb0, bt.n1, bt.sb1);
  const float* a32 = widened_into(0, a + sa.lo, sa.size) - sa.lo;
  const float* b32 = widened_into(1, b + sb.lo, sb.size) - sb.lo;
  if (bt.n0 == 1 && bt.n1 == 1) return engine::gemm(ta, tb, m, n, k, alpha, a32, lda, b32, ldb, beta, c, ldc, bias);
  if (bias == nullptr) return engine::gemm_batched(bt, ta, tb, m, n, k, alpha, a32, lda, b32, ldb, beta, c, ldc);
  for (int64_t i = 0; i < bt.n0; ++i)
    for (int64_t j = 0; j < bt.n1; ++j)
      engine::gemm(ta, tb, m, n, k, alpha, a32 + i * bt.sa0 + j * bt.sa1, lda, b32 + i * bt.sb0 + j * bt.sb1, ldb,
                   beta, c + i * bt.sc0 + j * bt.sc1, ldc, bias);
}
}  // namespace blas

}  // namespace xg::engine
