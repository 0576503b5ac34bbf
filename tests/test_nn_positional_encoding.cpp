// nn/positional_encoding.h
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn PositionalEncoding: the paper's sinusoids, not in the state dict") {
  nn::PositionalEncoding pos(6, 10, 0.0, nullptr);
  const Tensor& pe = pos.pe();
  REQUIRE(pe.shape() == Shape{10, 6});
  for (int64_t t = 0; t < 10; ++t)
    for (int64_t i = 0; i < 3; ++i) {
      const double angle = static_cast<double>(t) / std::pow(10000.0, 2.0 * i / 6.0);
      CHECK(pe.at({t, 2 * i}) == doctest::Approx(std::sin(angle)).epsilon(1e-6));
      CHECK(pe.at({t, 2 * i + 1}) == doctest::Approx(std::cos(angle)).epsilon(1e-6));
    }
  CHECK(pos.state_dict().empty());
  CHECK(pos.named_buffers().size() == 1);
  CHECK(pos.num_parameters() == 0);
  nn::PositionalEncoding odd(5, 4, 0.0, nullptr);  // an odd width works too
  CHECK(odd.pe().at({3, 4}) == doctest::Approx(std::sin(3.0 / std::pow(10000.0, 4.0 / 5.0))));
}

TEST_CASE("nn PositionalEncoding: a float64 model gets float64 sinusoids, not widened float32 ones") {
  nn::PositionalEncoding pos(6, 50, 0.0, nullptr);
  pos.to(f64);
  REQUIRE(pos.pe().dtype() == f64);
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t i = 0; i < 3; ++i) {
      const double angle = static_cast<double>(t) * std::pow(10000.0, -static_cast<double>(2 * i) / 6.0);
      CHECK(pos.pe().at({t, 2 * i}) == std::sin(angle));  // exact, not to float32 precision
      CHECK(pos.pe().at({t, 2 * i + 1}) == std::cos(angle));
    }
  pos.to(f32);
  CHECK(pos.pe().at({7, 0}) == static_cast<double>(static_cast<float>(std::sin(7.0))));
}

TEST_CASE("nn PositionalEncoding: forward adds pe(:T), gradcheck w.r.t. x in float64") {
  nn::PositionalEncoding pos(4, 8, 0.0, nullptr);
  Tensor x = xgnt::input({2, 3, 4}, 1, f32);
  Tensor y = pos.forward(x);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 4; ++c)
        CHECK(y.at({b, t, c}) == doctest::Approx(x.at({b, t, c}) + pos.pe().at({t, c})).epsilon(1e-6));
  CHECK(pos.forward(zeros({1, 8, 4})).shape() == Shape{1, 8, 4});  // T == max_len

  pos.to(f64);
  CHECK(pos.pe().dtype() == f64);
  Tensor x64 = xgnt::input({2, 5, 4}, 2).requires_grad_();
  xgnt::check_grad([&] { return pos.forward(x64); }, {}, {x64});
}

TEST_CASE("nn PositionalEncoding: dropout in training, T > max_len names both") {
  nn::PositionalEncoding pos(4, 8, 0.5, std::make_shared<Generator>(1));
  Tensor x = xgnt::input({2, 3, 4}, 1, f32);
  CHECK_FALSE(bit_equal(pos.forward(x), pos.forward(x)));
  pos.eval();
  CHECK(bit_equal(pos.forward(x), pos.forward(x)));
  std::string msg = XGN_THROW_MESSAGE(pos.forward(zeros({1, 9, 4})), ShapeError);
  CHECK(xgnt::contains(msg, "positions 0..8 exceed max_len=8"));  // the wording of both position modules
  msg = XGN_THROW_MESSAGE(pos.forward(zeros({1, 3, 5})), ShapeError);
  CHECK(xgnt::contains(msg, "(1,3,5)"));
}

TEST_CASE("nn LearnedPositionalEmbedding: adds weight(start:start+T), a parameter, gradcheck in float64") {
  Generator g(3);
  nn::LearnedPositionalEmbedding pos(8, 4, g);
  CHECK(pos.num_parameters() == 32);
  CHECK(pos.state_dict().count("weight") == 1);
  double sq = 0;
  for (double v : pos.weight().to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / 32) == doctest::Approx(0.02).epsilon(0.35));  // N(0, 0.02^2)
  Tensor x = xgnt::input({2, 3, 4}, 1, f32);
  Tensor y = pos.forward(x, 2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 4; ++c)
        CHECK(y.at({b, t, c}) == doctest::Approx(x.at({b, t, c}) + pos.weight().at({t + 2, c})).epsilon(1e-6));
  pos.to(f64);
  Tensor x64 = xgnt::input({2, 5, 4}, 2).requires_grad_();
  xgnt::check_grad([&] { return pos.forward(x64, 1); }, pos.parameters(), {x64});
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(pos.forward(zeros({1, 9, 4}, f64)), ShapeError), "positions 0..8 exceed max_len=8"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(pos.forward(zeros({1, 2, 3}, f64)), ShapeError), "with C=4"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(nn::LearnedPositionalEmbedding(8, 4, g, -1.0), std::invalid_argument), "init_std"));
}
