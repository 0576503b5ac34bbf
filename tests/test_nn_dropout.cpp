// nn/dropout.h
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Dropout: keeps ~(1-p) of the elements in training, scaled by 1/(1-p)") {
  const double p = 0.3;
  nn::Dropout drop(p, std::make_shared<Generator>(11));
  Tensor x = full({100000}, 2.0);
  Tensor y = drop.forward(x);
  int64_t kept = 0;
  for (double v : y.to_vector()) {
    if (v != 0.0) {
      ++kept;
      CHECK(v == doctest::Approx(2.0 / (1.0 - p)).epsilon(1e-6));
    }
  }
  // sd of the kept fraction: sqrt(0.3 * 0.7 / 1e5) = 0.0014, so +-0.01 is 7 sd.
  CHECK(std::abs(static_cast<double>(kept) / 100000.0 - 0.7) < 0.01);
  // A second call draws a new mask.
  CHECK_FALSE(bit_equal(drop.forward(x), y));
}

TEST_CASE("nn Dropout: identity in eval mode and for p = 0") {
  nn::Dropout drop(0.5, std::make_shared<Generator>(1));
  Tensor x = xgnt::input({4, 5}, 2, f32);
  drop.eval();
  CHECK(bit_equal(drop.forward(x), x));
  nn::Dropout none(0.0, nullptr);
  CHECK(bit_equal(none.forward(x), x));
}

TEST_CASE("nn Dropout: gradient is the same mask and scale") {
  nn::Dropout drop(0.4, std::make_shared<Generator>(5));
  Tensor x = ones({1000}).requires_grad_();
  Tensor y = drop.forward(x);
  sum(y).backward();
  CHECK(bit_equal(x.grad(), y.detach()));
}

TEST_CASE("nn Dropout: p outside (0, 1) throws") {
  auto g = std::make_shared<Generator>(1);
  CHECK_THROWS_AS(nn::Dropout(1.0, g), std::invalid_argument);
  CHECK_THROWS_AS(nn::Dropout(-0.1, g), std::invalid_argument);
}

TEST_CASE("nn Dropout2d: whole channels dropped with probability p, the rest scaled by 1/(1-p), eval: the input") {
  nn::Dropout2d drop(0.25, std::make_shared<Generator>(4));
  const Tensor x = ones({64, 32, 3, 3});
  const Tensor y = drop.forward(x);
  const auto v = y.to_vector();
  int64_t dropped = 0;
  for (int64_t ch = 0; ch < 64 * 32; ++ch) {
    const double first = v[ch * 9];
    CHECK((first == 0.0 || std::abs(first - 1 / 0.75) < 1e-6));
    for (int64_t i = 1; i < 9; ++i) CHECK(v[ch * 9 + i] == first);  // one draw per channel
    dropped += first == 0.0;
  }
  CHECK(std::abs(static_cast<double>(dropped) / (64 * 32) - 0.25) < 0.04);
  drop.eval();
  CHECK((drop.forward(x).impl() == x.impl()));
  CHECK_THROWS_AS(nn::Dropout2d(1.5), std::invalid_argument);
}

TEST_CASE("nn AlphaDropout: keeps a standard normal input's mean 0 and variance 1, as SELU networks need") {
  Generator g(5);
  const Tensor x = randn({200000}, g, f64);
  nn::AlphaDropout drop(0.2, std::make_shared<Generator>(6));
  const auto v = drop.forward(x).to_vector();
  double m = 0, sq = 0;
  for (double e : v) m += e, sq += e * e;
  m /= static_cast<double>(v.size());
  const double var = sq / static_cast<double>(v.size()) - m * m;
  CHECK(std::abs(m) < 0.01);
  CHECK(std::abs(var - 1) < 0.02);
  // FeatureAlphaDropout: one draw per channel
  nn::FeatureAlphaDropout fdrop(0.5, std::make_shared<Generator>(7));
  const auto f = fdrop.forward(zeros({4, 8, 5}, f64)).to_vector();
  for (int64_t ch = 0; ch < 32; ++ch)
    for (int64_t i = 1; i < 5; ++i) CHECK(f[ch * 5 + i] == f[ch * 5]);
}
