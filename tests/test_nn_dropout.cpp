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
  CHECK_THROWS_AS(nn::Dropout(0.2, nullptr), std::invalid_argument);
}
