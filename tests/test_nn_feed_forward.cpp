// nn/feed_forward.h
#include <doctest/doctest.h>

#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn PositionwiseFeedForward: gradcheck in float64, relu and gelu") {
  for (nn::Activation act : {nn::Activation::relu, nn::Activation::gelu}) {
    CAPTURE(nn::activation_name(act));
    Generator g(1);
    nn::PositionwiseFeedForward ff(6, 12, 0.0, g, nullptr, act);
    ff.to(f64);
    Tensor x = xgnt::input({2, 3, 6}, 2).requires_grad_();
    xgnt::check_grad([&] { return ff.forward(x); }, ff.parameters(), {x});
  }
}

TEST_CASE("nn PositionwiseFeedForward: structure, every parameter gets a gradient") {
  Generator g(1);
  nn::PositionwiseFeedForward ff(6, 12, 0.1, g, std::make_shared<Generator>(3), nn::Activation::gelu);
  std::vector<std::string> names;
  for (auto& [n, p] : ff.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"});
  CHECK(ff.num_parameters() == 6 * 12 + 12 + 12 * 6 + 6);
  Tensor y = ff.forward(xgnt::input({2, 3, 6}, 2, f32));
  CHECK(y.shape() == Shape{2, 3, 6});
  xgnt::check_all_params_get_grad(ff, y);
}

TEST_CASE("nn PositionwiseFeedForward: dropout only in training, errors name the layer") {
  Generator g(1);
  nn::PositionwiseFeedForward ff(6, 12, 0.5, g, std::make_shared<Generator>(3));
  Tensor x = xgnt::input({4, 6}, 2, f32);
  CHECK_FALSE(bit_equal(ff.forward(x), ff.forward(x)));
  ff.eval();
  CHECK_FALSE(ff.dropout->is_training());
  CHECK(bit_equal(ff.forward(x), ff.forward(x)));
  std::string msg = XGN_THROW_MESSAGE(ff.forward(zeros({4, 5})), ShapeError);
  CHECK(xgnt::contains(msg, "linear1"));
  CHECK(xgnt::contains(msg, "(4,5)"));
}
