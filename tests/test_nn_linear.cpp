// nn/linear.h
#include <doctest/doctest.h>

#include <cmath>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Linear: shapes and PyTorch's default init bounds") {
  Generator g(1);
  nn::Linear lin(16, 5, g);
  CHECK(lin.weight().shape() == Shape{5, 16});
  CHECK(lin.bias().shape() == Shape{5});
  const double b = 1.0 / std::sqrt(16.0);
  for (auto& p : lin.parameters())
    for (double v : p.to_vector()) CHECK(std::abs(v) <= b);
  CHECK(lin.forward(zeros({2, 3, 16})).shape() == Shape{2, 3, 5});
  nn::Linear nob(16, 5, g, /*bias=*/false);
  CHECK_FALSE(nob.bias().defined());
  CHECK(nob.num_parameters() == 80);
}

TEST_CASE("nn Linear: one seed gives one model") {
  Generator g1(42), g2(42);
  nn::Linear a(7, 3, g1), b(7, 3, g2);
  CHECK(bit_equal(a.weight(), b.weight()));
  CHECK(bit_equal(a.bias(), b.bias()));
}

TEST_CASE("nn Linear: gradcheck in float64, with and without bias") {
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    Generator g(2);
    nn::Linear lin(4, 3, g, bias);
    lin.to(f64);
    Tensor x = xgnt::input({2, 5, 4}, 3).requires_grad_();
    xgnt::check_grad([&] { return lin.forward(x); }, lin.parameters(), {x});
  }
}

TEST_CASE("nn Linear: every parameter gets a gradient") {
  Generator g(2);
  nn::Linear lin(4, 3, g);
  xgnt::check_all_params_get_grad(lin, lin.forward(xgnt::input({6, 4}, 1, f32)));
}

TEST_CASE("nn Linear: a wrong last dimension names the layer and the input shape") {
  Generator g(2);
  nn::Linear lin(4, 3, g);
  std::string msg = XGN_THROW_MESSAGE(lin.forward(zeros({2, 5})), ShapeError);
  CHECK(xgnt::contains(msg, "Linear(in=4, out=3)"));
  CHECK(xgnt::contains(msg, "(2,5)"));
  CHECK_THROWS_AS(nn::Linear(0, 3, g), std::invalid_argument);
}
