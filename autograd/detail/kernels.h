// Private to autograd/*.cpp: the dropout hash, shared by dropout and the
// fused attention op; the float32 exponentials and softmax's row steps,
// shared by the activations, softmax and the attention op.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace xg::detail {

// Dropout's keep decision for element i under a 64-bit key: murmur3's 32-bit
// finaliser of (i ^ key_hi) * golden + key_lo, kept where it is at least
// p * 2^32 (see dropout_threshold). Branch-free, so loops over it vectorise.
// Indices are taken modulo 2^32: in one tensor of more than 4G elements the
// mask would repeat.
inline uint32_t dropout_hash(uint32_t i, uint32_t key_lo, uint32_t key_hi) {
  uint32_t h = (i ^ key_hi) * 0x9e3779b1u + key_lo;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
// p * 2^32 rounded down, at most 2^32 - 1 so that the comparison stays in 32
// bits (a 64-bit one makes the vectorised loops shuffle lanes). It is below
// 2^32 for every p < 1; at p = 1 the one hash value 2^32 - 1 passes, which is
// why dropout at p = 1 scales by 0 rather than relying on the mask.
inline uint32_t dropout_threshold(double p) {
  const double limit = p * 4294967296.0;
  return limit >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(limit);
}

// a * b + c, one rounding where the target has FMA (x86-64-v3, the default
// -march), so that the kernels below round the same at every optimisation
// level (GCC contracts a * b + c into an FMA at -O2 but not at -O1); two
// roundings otherwise, rather than a call to the C library's fma.
inline float mul_add(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// exp(x) for float32 kernels, branch-free so that loops over it vectorise
// (glibc's expf is a call per element): x = n ln2 + r with |r| <= ln2/2
// (ln2 split in two, Cody-Waite), exp(r) by its Taylor series to r^6
// (truncation below 1.3e-7 relative), times 2^n built in the exponent bits.
// Measured against double exp: relative error below 3e-7 on [-87, 88]
// (tests/test_autograd_ops.cpp). Below -87.3 it gives about 1e-38 instead of
// a denormal or 0; above 88.3, inf; NaN stays NaN.
inline float fast_expf(float x) {
  // NaN computes on 0 and is passed through at the end, +inf gives inf: the
  // integer conversion below never sees a NaN (undefined behaviour).
  const float c = std::min(std::max(x, -87.3f), 88.3f);
  const float safe = c == c ? c : 0.0f;
  const float n = std::floor(safe * 1.44269504088896341f + 0.5f);
  const float r = mul_add(n, 2.12194440e-4f, safe - n * 0.693359375f);  // n * 0.693359375f is exact
  float p = 1.0f / 720;
  p = mul_add(p, r, 1.0f / 120);
  p = mul_add(p, r, 1.0f / 24);
  p = mul_add(p, r, 1.0f / 6);
  p = mul_add(p, r, 0.5f);
  p = mul_add(p, r, 1.0f);
  p = mul_add(p, r, 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // n in [-126, 128]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const float y = x > 88.3f ? std::numeric_limits<float>::infinity() : p * scale;
  return x == x ? y : x;
}

// e^z for softmax's z = x - (the row's max) <= 0, on fast_expf: 0 below -87,
// where e^z would be below float's smallest normal (fast_expf would give
// about 1e-38 there, and glibc takes a slow path).
inline float softmax_exp(float z) { return z < -87.0f ? 0.0f : fast_expf(z); }

// The largest of row[0, n) (-inf for none; a NaN may be skipped), in 16
// partial maxima that stay in vector registers: on rows of a few dozen
// values (attention over a ViT's 50 positions) it runs faster than an omp
// simd max reduction over the row (bench/results/README.md). A softmax does
// not depend on which maximum it subtracts, except that e^(x - max) must not
// overflow.
template <class T>
T row_max(const T* row, int64_t n) {
  constexpr int64_t L = 16;
  T part[L];
  for (int64_t l = 0; l < L; ++l) part[l] = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  for (; j + L <= n; j += L)
#pragma omp simd
    for (int64_t l = 0; l < L; ++l) part[l] = row[j + l] > part[l] ? row[j + l] : part[l];
  for (; j < n; ++j) part[0] = row[j] > part[0] ? row[j] : part[0];
  T mx = part[0];
  for (int64_t l = 1; l < L; ++l) mx = part[l] > mx ? part[l] : mx;
  return mx;
}

// erf(x) given e = e^(-x^2) (fast_expf(-x * x)): fast_erff after its
// exponential, for kernels that need e^(-x^2) themselves (GELU's derivative,
// whose normal density at x sqrt(2) is the same exponential).
inline float erff_given_exp(float x, float e) {
  const float t = 1.0f / mul_add(0.3275911f, std::fabs(x), 1.0f);
  float poly = mul_add(t, 1.061405429f, -1.453152027f);
  poly = mul_add(t, poly, 1.421413741f);
  poly = mul_add(t, poly, -0.284496736f);
  poly = mul_add(t, poly, 0.254829592f);
  poly *= t;
  return std::copysign(mul_add(-poly, e, 1.0f), x);
}

// erf(x) for float32 kernels, branch-free: Abramowitz and Stegun 7.1.26
// (absolute error below 1.5e-7, plus float rounding: 5.3e-7 at most on a
// 1e-5 grid over [-6, 6]) with fast_expf.
inline float fast_erff(float x) { return erff_given_exp(x, fast_expf(-x * x)); }

// tanh(x) for float32 kernels, branch-free: below |x| = 0.55 its odd Taylor
// series to x^15 (truncation below 4e-8 relative), above it
// (1 - e) / (1 + e) with e = fast_expf(-2|x|) <= 0.33, so that 1 - e does
// not cancel; the sign put back. Relative error below 1e-6 against double
// tanh (tests/test_autograd_ops.cpp); +-inf gives +-1, NaN stays NaN.
inline float fast_tanhf(float x) {
  const float ax = std::fabs(x), x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = mul_add(p, x2, 21844.0f / 6081075.0f);
  p = mul_add(p, x2, -1382.0f / 155925.0f);
  p = mul_add(p, x2, 62.0f / 2835.0f);
  p = mul_add(p, x2, -17.0f / 315.0f);
  p = mul_add(p, x2, 2.0f / 15.0f);
  p = mul_add(p, x2, -1.0f / 3.0f);
  const float small = mul_add(x * x2, p, x);
  const float e = fast_expf(-2.0f * std::min(ax, 20.0f));
  const float large = std::copysign((1.0f - e) / (1.0f + e), x);
  return ax < 0.55f ? small : x == x ? large : x;
}

// 1 / (1 + exp(-x)) for float32 kernels, branch-free with fast_expf: exp(-x)
// overflows to inf below x = -88.3 and gives 0 there. Relative error below
// 1e-6 against double (tests/test_autograd_ops.cpp).
inline float fast_sigmoidf(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

}  // namespace xg::detail
