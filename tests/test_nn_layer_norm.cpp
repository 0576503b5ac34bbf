// nn/layer_norm.h
#include <doctest/doctest.h>

#include <cmath>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn LayerNorm: normalises the last dimension, weight ones, bias zeros") {
  nn::LayerNorm ln(6);
  CHECK(bit_equal(ln.weight(), ones({6})));
  CHECK(bit_equal(ln.bias(), zeros({6})));
  Tensor y = ln.forward(xgnt::input({2, 3, 6}, 1, f32) * 5.0 + 2.0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < 6; ++c) m += y.at({b, t, c}) / 6;
      for (int64_t c = 0; c < 6; ++c) v += (y.at({b, t, c}) - m) * (y.at({b, t, c}) - m) / 6;
      CHECK(m == doctest::Approx(0).epsilon(1e-5));
      CHECK(v == doctest::Approx(1).epsilon(1e-3));
    }
  CHECK(nn::LayerNorm(4, 1e-5, false).num_parameters() == 0);
}

TEST_CASE("nn LayerNorm: gradcheck in float64 and every parameter gets a gradient") {
  nn::LayerNorm ln(5);
  Generator g(3);
  // Non-trivial affine parameters, so their gradients are checked away from 1 and 0.
  nn::normal_(ln.weight(), g, 1.0, 0.5);
  nn::normal_(ln.bias(), g, 0.0, 0.5);
  ln.to(f64);
  Tensor x = xgnt::input({3, 5}, 4).requires_grad_();
  xgnt::check_grad([&] { return ln.forward(x); }, ln.parameters(), {x});
  xgnt::check_all_params_get_grad(ln, ln.forward(x));
}

TEST_CASE("nn LayerNorm: a wrong last dimension names the layer and the shape") {
  nn::LayerNorm ln(5);
  std::string msg = XGN_THROW_MESSAGE(ln.forward(zeros({2, 4})), ShapeError);
  CHECK(xgnt::contains(msg, "LayerNorm(dim=5)"));
  CHECK(xgnt::contains(msg, "(2,4)"));
}

TEST_CASE("nn LayerNorm: forward(x, residual) is norm(x + residual), gradcheck in float64, shape errors named") {
  nn::LayerNorm ln(5);
  Generator g(4);
  nn::normal_(ln.weight(), g, 1.0, 0.5);
  nn::normal_(ln.bias(), g, 0.0, 0.5);
  ln.to(f64);
  Tensor x = xgnt::input({3, 5}, 5).requires_grad_(), r = xgnt::input({3, 5}, 6).requires_grad_();
  CHECK(bit_equal(ln.forward(x, r), ln.forward(x + r)));
  xgnt::check_grad([&] { return ln.forward(x, r); }, ln.parameters(), {x, r});
  std::string msg = XGN_THROW_MESSAGE(ln.forward(x, zeros({3, 4}, f64)), ShapeError);
  CHECK(xgnt::contains(msg, "LayerNorm(dim=5)"));
  CHECK(xgnt::contains(msg, "residual of shape (3,4)"));
}
