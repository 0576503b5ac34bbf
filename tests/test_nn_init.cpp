// nn/init.h
#include <doctest/doctest.h>

#include <cmath>

#include "test_nn_helpers.h"

using namespace xg;

namespace {
double stddev(const Tensor& t) {
  auto v = t.to_vector();
  double m = 0, s = 0;
  for (double x : v) m += x / static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m) / static_cast<double>(v.size());
  return std::sqrt(s);
}
// |a / b - 1|: doctest::Approx adds an absolute scale of 1, too loose for small spreads.
double rel_err(double a, double b) { return std::abs(a / b - 1.0); }
double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::abs(x));
  return m;
}
}  // namespace

TEST_CASE("nn init: fan_in and fan_out as PyTorch") {
  CHECK(nn::init::fans(zeros({5, 3})) == std::pair<int64_t, int64_t>{3, 5});
  CHECK(nn::init::fans(zeros({8, 4, 3, 3})) == std::pair<int64_t, int64_t>{36, 72});
  std::string msg = XGN_THROW_MESSAGE(nn::init::fans(zeros({4})), std::invalid_argument);
  CHECK(xgnt::contains(msg, "(4,)"));
}

TEST_CASE("nn init: bounds and spreads of the initialisers, in float32 and float64") {
  for (Dtype d : {f32, f64}) {
    CAPTURE(dtype_name(d));
    Generator g(1);
    Tensor w = empty({200, 300}, d);  // fan_in 300, fan_out 200
    nn::xavier_uniform_(w, g);
    const double xb = std::sqrt(6.0 / 500.0);
    CHECK(max_abs(w) <= xb);
    CHECK(max_abs(w) > 0.99 * xb);
    CHECK(rel_err(stddev(w), xb / std::sqrt(3.0)) < 0.02);
    nn::xavier_normal_(w, g, 2.0);
    CHECK(rel_err(stddev(w), 2.0 * std::sqrt(2.0 / 500.0)) < 0.02);
    nn::kaiming_uniform_(w, g);
    const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 300.0);
    CHECK(max_abs(w) <= kb);
    CHECK(rel_err(stddev(w), kb / std::sqrt(3.0)) < 0.02);
    nn::kaiming_normal_(w, g, std::sqrt(5.0));
    CHECK(rel_err(stddev(w), std::sqrt(2.0 / 6.0) / std::sqrt(300.0)) < 0.02);
    nn::normal_(w, g, 3.0, 0.5);
    CHECK(rel_err(stddev(w), 0.5) < 0.02);
    CHECK(rel_err(mean(w).item(), 3.0) < 0.003);
    nn::uniform_(w, g, 2.0, 4.0);
    for (double v : w.to_vector()) CHECK((v >= 2.0 && v <= 4.0));
    nn::zeros_(w);
    CHECK(max_abs(w) == 0.0);
    nn::ones_(w);
    CHECK(bit_equal(w, ones({200, 300}, d)));
  }
}

TEST_CASE("nn init: one seed, one result") {
  Generator g1(7), g2(7), g3(8);
  Tensor a = empty({4, 5}), b = empty({4, 5}), c = empty({4, 5});
  nn::xavier_uniform_(a, g1);
  nn::xavier_uniform_(b, g2);
  nn::xavier_uniform_(c, g3);
  CHECK(bit_equal(a, b));
  CHECK_FALSE(bit_equal(a, c));
}
