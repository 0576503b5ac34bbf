// The matrix engine (engine/gemm.h) against a float64 reference: every
// transposed form, leading dimensions wider than the matrix, alpha, beta = 1,
// small products (OpenBLAS) and large ones (oneDNN in the default build),
// batches with a shared operand, the primitive cache, and bf16.
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/gemm.h"
#include "tests/helpers.h"

using namespace xg;
using engine::bf16_t;

extern "C" int openblas_get_num_threads(void);  // OpenBLAS's, without its header

namespace {

// Row-major A (m,k) or its transpose stored (k,m), with row stride ld.
struct Mat {
  int64_t rows, cols, ld;
  std::vector<float> v;
  Mat(int64_t r, int64_t c, int64_t pad, uint64_t seed) : rows(r), cols(c), ld(c + pad), v(r * (c + pad)) {
    Generator g(seed);
    for (auto& x : v) x = static_cast<float>(g.uniform(-1, 1));
  }
  // Element (i,j) of op(X) where X is this stored matrix and t says transposed.
  double op(bool t, int64_t i, int64_t j) const { return t ? v[j * ld + i] : v[i * ld + j]; }
  // The values rounded to bf16, in place, and their bf16 copy: operands of
  // bf16 products whose exact result a float64 sum of v gives.
  std::vector<bf16_t> round_to_bf16() {
    std::vector<bf16_t> h(v.size());
    engine::to_bf16(v.data(), h.data(), static_cast<int64_t>(h.size()));
    engine::from_bf16(h.data(), v.data(), static_cast<int64_t>(v.size()));
    return h;
  }
};

// The largest error relative to ref's scale; infinite where c holds a NaN
// (std::max would skip it).
double max_rel_error(int64_t m, int64_t n, const std::vector<float>& c, int64_t ldc, const std::vector<double>& ref) {
  double worst = 0, scale = 1e-30;
  for (double r : ref) scale = std::max(scale, std::abs(r));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double e = std::abs(c[i * ldc + j] - ref[i * n + j]) / scale;
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
  return worst;
}

// op(A) (m,k) and op(B) (k,n), stored transposed where ta and tb say, rows
// padded by 3 and 5 columns; B's values from seed + 1.
std::pair<Mat, Mat> operands(bool ta, bool tb, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  return {ta ? Mat(k, m, 3, seed) : Mat(m, k, 3, seed), tb ? Mat(n, k, 5, seed + 1) : Mat(k, n, 5, seed + 1)};
}

void check_form(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(beta);
  const auto [a, b] = operands(ta, tb, m, n, k, 1);
  const int64_t ldc = n + 2;
  std::vector<float> c(m * ldc, 0.5f);
  std::vector<double> ref(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a.op(ta, i, p) * b.op(tb, p, j);
      ref[i * n + j] = alpha * s + beta * 0.5;
    }
  engine::gemm(ta, tb, m, n, k, alpha, a.v.data(), a.ld, b.v.data(), b.ld, beta, c.data(), ldc);
  CHECK(max_rel_error(m, n, c, ldc, ref) < 1e-5);
  for (int64_t i = 0; i < m; ++i)  // the padding columns of C are untouched
    for (int64_t j = n; j < ldc; ++j) CHECK(c[i * ldc + j] == 0.5f);
}

}  // namespace

TEST_CASE("engine: float32 gemm in every transposed form, small and large, alpha and beta") {
  INFO(engine::describe());
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_form(ta, tb, 5, 7, 3, 1.0f, 0.0f);       // OpenBLAS whatever the build
      check_form(ta, tb, 70, 65, 80, 1.0f, 0.0f);    // the engine (oneDNN by default)
      check_form(ta, tb, 70, 65, 80, 0.25f, 1.0f);   // scaled and accumulated
      check_form(ta, tb, 1, 130, 1000, 1.0f, 1.0f);  // a single row
      // 2^25 multiply-adds: with a transposed A, OpenBLAS on a CPU without AVX-512
      check_form(ta, tb, 256, 256, 512, 0.5f, 1.0f);
    }
}

TEST_CASE("engine: OpenBLAS runs single-threaded once the engine has used it (xgrad's pool splits products)") {
  // A float64 product: OpenBLAS in every build and on every CPU (a small
  // float32 one goes to oneDNN where OpenBLAS's kernels have no FMA).
  std::vector<double> a(5 * 3, 1.0), b(3 * 7, 2.0), c(5 * 7, -1.0);
  engine::gemm(false, false, 5, 7, 3, 1.0, a.data(), 3, b.data(), 7, 0.0, c.data(), 7);
  CHECK(c[0] == 6.0);
  CHECK(openblas_get_num_threads() == 1);
}

TEST_CASE("engine: a beta other than 0 or 1 is refused with its value, small or large, float32 or float64") {
  for (int64_t size : {4, 64}) {  // OpenBLAS, then the engine of this build
    CAPTURE(size);
    std::vector<float> a(size * size, 1.0f), c(size * size);
    std::vector<double> ad(size * size, 1.0), cd(size * size);
    CHECK(xgt::contains(XG_THROW_MESSAGE(engine::gemm(false, false, size, size, size, 1.0f, a.data(), size, a.data(),
                                                      size, 0.5f, c.data(), size),
                                         std::invalid_argument),
                        "beta 0.5 is not 0 or 1"));
    CHECK(xgt::contains(XG_THROW_MESSAGE(engine::gemm(false, false, size, size, size, 1.0, ad.data(), size, ad.data(),
                                                      size, 2.0, cd.data(), size),
                                         std::invalid_argument),
                        "beta 2 is not 0 or 1"));
  }
}

TEST_CASE("engine: batched gemm with a shared operand, and the primitive cache") {
  const int64_t count = 6, m = 40, n = 48, k = 64;
  Mat a(count * m, k, 0, 3), b(k, n, 0, 4);  // B shared by every item (sb = 0)
  std::vector<float> c(count * m * n, 0.0f);
  engine::gemm_batched(count, false, false, m, n, k, 1.0f, a.v.data(), k, m * k, b.v.data(), n, 0, 0.0f, c.data(),
                       n, m * n);
  const auto before = engine::cache_stats();
  engine::gemm_batched(count, false, false, m, n, k, 1.0f, a.v.data(), k, m * k, b.v.data(), n, 0, 0.0f, c.data(),
                       n, m * n);
  CHECK(engine::cache_stats().created == before.created);  // the second call reuses the primitive
  for (int64_t i = 0; i < count; ++i) {
    std::vector<double> ref(m * n);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a.v[(i * m + r) * k + p] * double(b.v[p * n + j]);
        ref[r * n + j] = s;
      }
    std::vector<float> ci(c.begin() + i * m * n, c.begin() + (i + 1) * m * n);
    CHECK(max_rel_error(m, n, ci, n, ref) < 1e-5);
  }
}

TEST_CASE("engine: two-level batches address heads inside rows, with an operand shared along one level") {
  // As attention does: n0 "batch rows" of n1 "heads", each head a column
  // block of width k (A, transposed B) or n (C) inside wider rows; A is
  // shared along level 0 in one variant (stride 0).
  const int64_t n0 = 3, n1 = 4, m = 24, n = 20, k = 32;
  for (bool a_shared : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(a_shared);
      CAPTURE(tb);
      const int64_t lda = n1 * k + 3, ldb = tb ? n1 * k + 1 : n1 * n + 1, ldc = n1 * n + 2;
      const int64_t brows = tb ? n : k;
      Mat a(n0 * m, lda, 0, 5), b(n0 * brows, ldb, 0, 6);
      std::vector<float> c(n0 * m * ldc, 0.5f);
      engine::Batch bt{n0, n1, a_shared ? 0 : m * lda, k, brows * ldb, tb ? k : n, m * ldc, n};
      engine::gemm_batched(bt, false, tb, m, n, k, 0.5f, a.v.data(), lda, b.v.data(), ldb, 0.0f, c.data(), ldc);
      for (int64_t i = 0; i < n0; ++i)
        for (int64_t j = 0; j < n1; ++j) {
          CAPTURE(i);
          CAPTURE(j);
          const float* ap = a.v.data() + i * bt.sa0 + j * bt.sa1;
          const float* bp = b.v.data() + i * bt.sb0 + j * bt.sb1;
          std::vector<double> ref(m * n);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t q = 0; q < n; ++q) {
              double sum = 0;
              for (int64_t p = 0; p < k; ++p) sum += ap[r * lda + p] * double(tb ? bp[q * ldb + p] : bp[p * ldb + q]);
              ref[r * n + q] = 0.5 * sum;
            }
          std::vector<float> ci(m * ldc);
          std::copy(c.begin() + i * bt.sc0 + j * bt.sc1, c.begin() + i * bt.sc0 + j * bt.sc1 + (m - 1) * ldc + n,
                    ci.begin());
          CHECK(max_rel_error(m, n, ci, ldc, ref) < 1e-5);
        }
      for (int64_t r = 0; r < n0 * m; ++r)  // the padding columns of C are untouched
        for (int64_t q = n1 * n; q < ldc; ++q) CHECK(c[r * ldc + q] == 0.5f);
    }
}

TEST_CASE("engine: bf16 rounding is to nearest even, NaN and infinities kept") {
  auto round_trip = [](float x) {
    bf16_t h;
    float y;
    engine::to_bf16(&x, &h, 1);
    engine::from_bf16(&h, &y, 1);
    return y;
  };
  CHECK(round_trip(1.0f) == 1.0f);
  CHECK(round_trip(1.0f + 0x1p-8f) == 1.0f);                  // a tie rounds to the even 1.0
  CHECK(round_trip(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);    // a tie rounds to the even neighbour above
  CHECK(round_trip(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);  // above the tie rounds up
  CHECK(round_trip(-2.5f) == -2.5f);
  CHECK(std::isnan(round_trip(std::nanf(""))));
  CHECK(round_trip(INFINITY) == INFINITY);
  CHECK(round_trip(-INFINITY) == -INFINITY);
  CHECK(round_trip(3.0e38f) == 3.0040553e38f);  // the nearest bf16
  CHECK(round_trip(3.4e38f) == INFINITY);       // past the midpoint above bf16's largest finite value
}

// bf16 nearest-even of x found by comparing distances in float64 (not the
// engine's integer rounding): the neighbour toward zero (truncation) and the
// one away from it; a tie goes to the even one. Infinity stands for 2^128
// here, the value IEEE rounding treats it as when a value overflows.
static uint16_t bf16_by_distance(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet, sign and top payload kept
  const auto lo = static_cast<uint16_t>(u >> 16);
  if ((u & 0xffffu) == 0) return lo;
  const auto hi = static_cast<uint16_t>(lo + 1);
  auto value = [](uint16_t h) {
    if ((h & 0x7fffu) == 0x7f80u) return (h & 0x8000u) ? -0x1p128 : 0x1p128;
    const uint32_t v = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &v, 4);
    return double(f);
  };
  const double below = std::fabs(double(x) - value(lo)), above = std::fabs(value(hi) - double(x));
  if (below != above) return below < above ? lo : hi;
  return (lo & 1u) ? hi : lo;
}

TEST_CASE("engine: bf16 conversion of every kind of float32 (denormals, ties, overflow, NaN) in long and odd lengths") {
  // Random bit patterns cover every exponent, denormals and NaNs; the
  // specials add exact ties, the overflow boundary and signed zeros. The
  // length is odd, so the vector loop and its tail both run.
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u,
                                0x3f808000u, 0x3f818000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0xff7f8000u,
                                0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fbfffffu};
  std::mt19937 rng(7);
  while (bits.size() < (1u << 20) + 7) bits.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  std::vector<bf16_t> got(x.size());
  engine::to_bf16(x.data(), got.data(), static_cast<int64_t>(x.size()));
  int64_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (got[i] != bf16_by_distance(x[i]) && wrong++ < 5)
      FAIL_CHECK(fmt::format("{:#010x} -> {:#06x}, expected {:#06x}", bits[i], got[i], bf16_by_distance(x[i])));
  CHECK(wrong == 0);
}

TEST_CASE("engine: bf16 gemm equals the float64 product of the rounded operands, or says why it cannot run") {
  const std::string why = engine::bf16_unsupported_reason();
  const int64_t m = 33, n = 70, k = 96;
  Mat a(m, k, 0, 5), b(n, k, 0, 6);  // C = A Bᵀ
  std::vector<bf16_t> a16(a.v.size()), b16(b.v.size());
  engine::to_bf16(a.v.data(), a16.data(), static_cast<int64_t>(a16.size()));
  engine::to_bf16(b.v.data(), b16.data(), static_cast<int64_t>(b16.size()));
  std::vector<float> c(m * n);
  if (!why.empty()) {  // refused where it would be slow, unless emulated on purpose
    const std::string msg = XG_THROW_MESSAGE(engine::gemm_bf16(false, true, m, n, k, 1.0f, a16.data(), k, b16.data(),
                                                               k, 0.0f, c.data(), n),
                                             std::runtime_error);
    CHECK(msg == why);
  }
  xgt::Bf16Products bf16_products;
  engine::gemm_bf16(false, true, m, n, k, 1.0f, a16.data(), k, b16.data(), k, 0.0f, c.data(), n);
  std::vector<float> ar(a.v.size()), br(b.v.size());
  engine::from_bf16(a16.data(), ar.data(), static_cast<int64_t>(ar.size()));
  engine::from_bf16(b16.data(), br.data(), static_cast<int64_t>(br.size()));
  std::vector<double> exact(m * n), unrounded(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, u = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += double(ar[i * k + p]) * br[j * k + p];
        u += double(a.v[i * k + p]) * b.v[j * k + p];
      }
      exact[i * n + j] = s;
      unrounded[i * n + j] = u;
    }
  // Products of bf16 values are exact in float32; only the float32 sums round.
  CHECK(max_rel_error(m, n, c, n, exact) < 1e-5);
  // And the operands really were rounded: the result differs from the float32 product.
  CHECK(max_rel_error(m, n, c, n, unrounded) > 1e-4);
}

TEST_CASE("engine: bf16 products in every transpose form, with padded strides, beta 1 and a batch") {
  xgt::for_each_bf16_route([] {
  const int64_t m = 37, n = 45, k = 70, count = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      // `count` stored matrices one after the other; B is one matrix for all (stride 0).
      Mat a = ta ? Mat(count * k, m, 3, 11) : Mat(count * m, k, 3, 11);
      Mat b = tb ? Mat(n, k, 5, 12) : Mat(k, n, 5, 12);
      const std::vector<bf16_t> a16 = a.round_to_bf16(), b16 = b.round_to_bf16();
      const int64_t ldc = n + 2, sa = (ta ? k : m) * a.ld, sc = m * ldc;
      std::vector<float> c(count * sc, 0.5f);
      engine::gemm_bf16_batched(count, ta, tb, m, n, k, 0.5f, a16.data(), a.ld, sa, b16.data(), b.ld, 0, 1.0f,
                                c.data(), ldc, sc);
      for (int64_t q = 0; q < count; ++q) {
        CAPTURE(q);
        std::vector<double> ref(m * n);
        const int64_t row0 = q * (ta ? k : m);  // the stored rows of product q
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < k; ++p) s += (ta ? a.op(true, i, p + row0) : a.op(false, i + row0, p)) * b.op(tb, p, j);
            ref[i * n + j] = 0.5 * s + 0.5;
          }
        const std::vector<float> cq(c.begin() + q * sc, c.begin() + (q + 1) * sc);
        CHECK(max_rel_error(m, n, cq, ldc, ref) < 1e-5);
        for (int64_t i = 0; i < m; ++i)  // the padding columns of C are untouched
          for (int64_t j = n; j < ldc; ++j) CHECK(cq[i * ldc + j] == 0.5f);
      }
    }
  });
}

TEST_CASE("engine: bf16 products of heads inside (B,T,C) projections (a two-level batch), and a bias per product") {
  // Attention's scores: S_bh = Q_bh K_bhᵀ with head h of batch row b at
  // q + b*T*C + h*D (rows C apart), and the same through a batch whose B is
  // repeated (stride 0) with a bias, as linear's rows split by the pool.
  xgt::for_each_bf16_route([] {
    const int64_t B = 3, T = 9, H = 4, D = 24, C = H * D;
    Mat q(B * T, C, 0, 31), kk(B * T, C, 0, 32);
    const std::vector<bf16_t> q16 = q.round_to_bf16(), k16 = kk.round_to_bf16();
    std::vector<float> s(B * H * T * T, NAN);
    const engine::Batch batch{B, H, T * C, D, T * C, D, H * T * T, T * T};
    engine::gemm_bf16_batched(batch, false, true, T, T, D, 0.25f, q16.data(), C, k16.data(), C, 0.0f, s.data(), T);
    double worst = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) {
            double ref = 0;
            for (int64_t d = 0; d < D; ++d) ref += q.op(false, b * T + i, h * D + d) * kk.op(false, b * T + j, h * D + d);
            ref *= 0.25;
            worst = std::max(worst, std::abs(s[((b * H + h) * T + i) * T + j] - ref) / (std::abs(ref) + 1e-3));
          }
    CHECK(worst < 1e-5);

    const int64_t m = 11, n = 50, k = 40, count = 2;
    Mat a(count * m, k, 1, 33), w(n, k, 0, 34), bias(1, n, 0, 35);
    const std::vector<bf16_t> a16 = a.round_to_bf16(), w16 = w.round_to_bf16();
    std::vector<float> c(count * m * n, NAN);
    engine::gemm_bf16_batched(engine::Batch::flat(count, m * a.ld, 0, m * n), false, true, m, n, k, 1.0f, a16.data(),
                              a.ld, w16.data(), k, 0.0f, c.data(), n, bias.v.data());
    std::vector<double> ref(count * m * n);
    for (int64_t i = 0; i < count * m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double t = bias.v[j];
        for (int64_t p = 0; p < k; ++p) t += a.op(false, i, p) * w.op(false, j, p);
        ref[i * n + j] = t;
      }
    CHECK(max_rel_error(count * m, n, c, n, ref) < 1e-5);
  });
}

TEST_CASE("engine: the bf16 route is native or widened and says why, and set_bf16_route sets it") {
  const std::string why = engine::bf16_route_reason();
  CAPTURE(why);
  CHECK((why.rfind("native", 0) == 0 || why.rfind("widened", 0) == 0 || why.rfind("none", 0) == 0));
  CHECK(engine::describe().find("bf16 " + why) != std::string::npos);
  const engine::Bf16Route before = engine::bf16_route();
  engine::set_bf16_route(engine::Bf16Route::widened);
  CHECK(engine::bf16_route() == engine::Bf16Route::widened);
  CHECK(engine::bf16_route_reason() == "widened (set_bf16_route)");
  engine::set_bf16_route(engine::Bf16Route::native);
  CHECK(engine::bf16_route_reason() == "native (set_bf16_route)");
  CHECK(engine::bf16_route() == engine::Bf16Route::native);
  engine::set_bf16_route(before);
}

TEST_CASE("engine: a bias added to every row of C: float32 small and large, float64, bf16, an empty sum") {
  // C starts as NaN: with a bias, beta is 0 and C's old values are never read.
  xgt::Bf16Products bf16_products;
  struct Size {
    int64_t m, n, k;
  };
  for (const Size z : {Size{5, 7, 3}, Size{70, 65, 80}, Size{3, 40, 0}})  // OpenBLAS, the engine, no terms
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t m = z.m, n = z.n, k = z.k;
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(ta);
        CAPTURE(tb);
        auto [a, b] = operands(ta, tb, m, n, k, 21);
        // Operands exact in bf16, so that one reference serves every type.
        const std::vector<bf16_t> a16 = a.round_to_bf16(), b16 = b.round_to_bf16();
        const Mat bias(1, n, 0, 23);
        const int64_t ldc = n + 2;
        std::vector<double> ref(m * n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = bias.v[j];
            for (int64_t p = 0; p < k; ++p) s += a.op(ta, i, p) * b.op(tb, p, j);
            ref[i * n + j] = s;
          }
        const auto check = [&](const std::vector<float>& c) {
          CHECK(max_rel_error(m, n, c, ldc, ref) < 1e-5);
          for (int64_t i = 0; i < m; ++i)  // the padding columns of C are untouched
            for (int64_t j = n; j < ldc; ++j) CHECK(std::isnan(c[i * ldc + j]));
        };
        std::vector<float> c(m * ldc, std::nanf(""));
        engine::gemm(ta, tb, m, n, k, 1.0f, a.v.data(), a.ld, b.v.data(), b.ld, 0.0f, c.data(), ldc, bias.v.data());
        check(c);
        std::fill(c.begin(), c.end(), std::nanf(""));
        engine::gemm_bf16(ta, tb, m, n, k, 1.0f, a16.data(), a.ld, b16.data(), b.ld, 0.0f, c.data(), ldc,
                          bias.v.data());
        check(c);
        const std::vector<double> ad(a.v.begin(), a.v.end()), bd(b.v.begin(), b.v.end());
        const std::vector<double> biasd(bias.v.begin(), bias.v.end());
        std::vector<double> cd(m * ldc, std::nan(""));
        engine::gemm(ta, tb, m, n, k, 1.0, ad.data(), a.ld, bd.data(), b.ld, 0.0, cd.data(), ldc, biasd.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) CHECK(std::abs(cd[i * ldc + j] - ref[i * n + j]) < 1e-12);
      }
  // A bias asks for alpha 1 and beta 0 (oneDNN would scale the bias with
  // the product, OpenBLAS would not): refused otherwise, small or large.
  for (int64_t size : {4, 64}) {
    CAPTURE(size);
    std::vector<float> a(size * size, 1.0f), c(size * size), bias(size, 1.0f);
    CHECK(xgt::contains(XG_THROW_MESSAGE(engine::gemm(false, false, size, size, size, 1.0f, a.data(), size, a.data(),
                                                      size, 1.0f, c.data(), size, bias.data()),
                                         std::invalid_argument),
                        "a bias needs alpha 1 and beta 0, got alpha 1 and beta 1"));
    CHECK(xgt::contains(XG_THROW_MESSAGE(engine::gemm(false, false, size, size, size, 2.0f, a.data(), size, a.data(),
                                                      size, 0.0f, c.data(), size, bias.data()),
                                         std::invalid_argument),
                        "a bias needs alpha 1 and beta 0, got alpha 2 and beta 0"));
  }
  // A bias on each product of a batch (B shared by the three).
  const int64_t m = 50, n = 60, k = 70, count = 3;
  Mat a(count * m, k, 0, 31), b(k, n, 0, 32);
  const std::vector<bf16_t> a16 = a.round_to_bf16(), b16 = b.round_to_bf16();
  const Mat bias(1, n, 0, 33);
  std::vector<float> c(count * m * n, std::nanf(""));
  engine::gemm_bf16_batched(engine::Batch::flat(count, m * k, 0, m * n), false, false, m, n, k, 1.0f, a16.data(), k,
                            b16.data(), n, 0.0f, c.data(), n, bias.v.data());
  for (int64_t q = 0; q < count; ++q) {
    CAPTURE(q);
    std::vector<double> ref(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = bias.v[j];
        for (int64_t p = 0; p < k; ++p) s += double(a.v[(q * m + i) * k + p]) * b.v[p * n + j];
        ref[i * n + j] = s;
      }
    CHECK(max_rel_error(m, n, std::vector<float>(c.begin() + q * m * n, c.begin() + (q + 1) * m * n), n, ref) < 1e-5);
  }
}

TEST_CASE("engine: a product of no terms gives C = beta C, with leading dimensions of 0") {
  // As linear with no input features passes them (OpenBLAS 0.3.21 accepts them when k is 0).
  for (int64_t m : {3, 60}) {
    CAPTURE(m);
    std::vector<float> a(1), b(1), c(m * 5, std::nanf(""));
    std::vector<double> ad(1), bd(1), cd(m * 5, std::nan(""));
    engine::gemm(false, false, m, 5, 0, 1.0f, a.data(), 0, b.data(), 5, 0.0f, c.data(), 5);
    engine::gemm(false, false, m, 5, 0, 1.0, ad.data(), 0, bd.data(), 5, 0.0, cd.data(), 5);
    for (float v : c) CHECK(v == 0.0f);
    for (double v : cd) CHECK(v == 0.0);
    std::fill(c.begin(), c.end(), 2.0f);
    engine::gemm(false, false, m, 5, 0, 1.0f, a.data(), 0, b.data(), 5, 1.0f, c.data(), 5);
    for (float v : c) CHECK(v == 2.0f);
  }
}

TEST_CASE("engine: products of different shapes share the thread's scratchpad and stay exact") {
  // Primitives of four shapes, run in turn twice: each reads and writes the
  // one scratchpad of this thread; the second round reuses everything.
  const bool bf16_ok = engine::bf16_unsupported_reason().empty();
  engine::CacheStats after_first{};
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    check_form(false, false, 300, 200, 256, 1.0f, 0.0f);
    check_form(true, false, 64, 512, 512, 1.0f, 1.0f);
    check_form(false, true, 160, 96, 700, 0.5f, 0.0f);
    if (bf16_ok) {
      const int64_t m = 128, n = 96, k = 1024;
      Mat a(m, k, 0, 7), b(k, n, 0, 8);
      std::vector<bf16_t> a16(a.v.size()), b16(b.v.size());
      engine::to_bf16(a.v.data(), a16.data(), static_cast<int64_t>(a16.size()));
      engine::to_bf16(b.v.data(), b16.data(), static_cast<int64_t>(b16.size()));
      std::vector<float> ar(a.v.size()), br(b.v.size()), c(m * n);
      engine::from_bf16(a16.data(), ar.data(), static_cast<int64_t>(ar.size()));
      engine::from_bf16(b16.data(), br.data(), static_cast<int64_t>(br.size()));
      engine::gemm_bf16(false, false, m, n, k, 1.0f, a16.data(), k, b16.data(), n, 0.0f, c.data(), n);
      std::vector<double> exact(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p) s += double(ar[i * k + p]) * br[p * n + j];
          exact[i * n + j] = s;
        }
      CHECK(max_rel_error(m, n, c, n, exact) < 1e-5);
    }
    if (round == 0) after_first = engine::cache_stats();
  }
  const engine::CacheStats now = engine::cache_stats();
  CHECK(now.created == after_first.created);
  CHECK(now.scratch_bytes == after_first.scratch_bytes);
}
