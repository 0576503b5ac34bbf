// nn/conv.h: Conv1d, Conv2d and ConvTranspose2d. tests/torch/vision_layers_parity
// compares them with torch.nn's on the same weights.
#include <doctest/doctest.h>

#include <cmath>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Conv2d, Conv1d, ConvTranspose2d: PyTorch's shapes and default init bounds") {
  Generator g(1);
  Conv2dOptions o;
  o.stride = {2, 2}, o.padding = {1, 1}, o.groups = 2;
  nn::Conv2d c2(4, 6, 3, g, o);
  CHECK(c2.weight().shape() == Shape{6, 2, 3, 3});
  CHECK(c2.bias().shape() == Shape{6});
  CHECK(c2.type_name() == "Conv2d(in=4, out=6, kernel=3x3, stride=2x2, padding=1x1, groups=2)");
  CHECK(c2.forward(zeros({2, 4, 7, 7})).shape() == Shape{2, 6, 4, 4});
  nn::Conv1d c1(3, 5, 4, g, {}, /*bias=*/false);
  CHECK(c1.weight().shape() == Shape{5, 3, 4});
  CHECK_FALSE(c1.bias().defined());
  CHECK(c1.forward(zeros({2, 3, 9})).shape() == Shape{2, 5, 6});
  ConvTranspose2dOptions t;
  t.stride = {2, 2}, t.output_padding = {1, 1};
  nn::ConvTranspose2d ct(4, 6, {3, 2}, g, t);
  CHECK(ct.weight().shape() == Shape{4, 6, 3, 2});
  CHECK(ct.forward(zeros({1, 4, 5, 5})).shape() == Shape{1, 6, 12, 11});
  // Bounds 1/sqrt(fan_in): in/groups kh kw for Conv2d and Conv1d, out/groups kh kw for ConvTranspose2d.
  const std::vector<std::pair<nn::Module*, double>> bounds{
      {&c2, 1 / std::sqrt(18.0)}, {&c1, 1 / std::sqrt(12.0)}, {&ct, 1 / std::sqrt(36.0)}};
  for (const auto& [m, b] : bounds) {
    double largest = 0;
    for (auto& p : m->parameters())
      for (double v : p.to_vector()) largest = std::max(largest, std::abs(v));
    CHECK(largest <= b);
    CHECK(largest > 0.8 * b);  // the bound is used, not a smaller one
  }
}

TEST_CASE("nn Conv2d, Conv1d, ConvTranspose2d: gradcheck in float64 and every parameter gets a gradient") {
  Generator g(2);
  Conv2dOptions same;
  same.same = true;
  nn::Conv2d c2(2, 3, {2, 3}, g, same);
  nn::Conv1d c1(2, 4, 3, g);
  ConvTranspose2dOptions t;
  t.stride = {2, 1};
  nn::ConvTranspose2d ct(2, 3, 2, g, t);
  for (nn::Module* m : std::vector<nn::Module*>{&c2, &c1, &ct}) m->to(f64);
  Tensor x = xgnt::input({2, 2, 4, 3}, 3).requires_grad_(), s = xgnt::input({2, 2, 6}, 4).requires_grad_();
  xgnt::check_grad([&] { return c2.forward(x); }, c2.parameters(), {x});
  xgnt::check_grad([&] { return c1.forward(s); }, c1.parameters(), {s});
  xgnt::check_grad([&] { return ct.forward(x); }, ct.parameters(), {x});
  nn::Conv2d fresh(2, 3, 3, g);
  xgnt::check_all_params_get_grad(fresh, fresh.forward(xgnt::input({2, 2, 5, 5}, 5, f32)));
}

TEST_CASE("nn Conv2d, Conv1d, ConvTranspose2d: bad sizes and inputs name the layer") {
  Generator g(3);
  nn::Conv2d c2(4, 6, 3, g);
  const std::string msg = XGN_THROW_MESSAGE(c2.forward(zeros({2, 3, 7, 7})), ShapeError);
  CHECK(xgnt::contains(msg, "Conv2d(in=4, out=6, kernel=3x3, stride=1x1, padding=0x0)"));
  CHECK(xgnt::contains(msg, "expected an input (N,C,H,W) with C=4, got (2,3,7,7)"));
  CHECK(XGN_THROW_MESSAGE(nn::Conv1d(3, 5, 0, g), std::invalid_argument) ==
        "Conv1d: in, out and the kernel must be positive, got in=3, out=5, kernel=1x0");
  Conv2dOptions g3;
  g3.groups = 3;
  CHECK(XGN_THROW_MESSAGE(nn::Conv2d(4, 6, 3, g, g3), std::invalid_argument) ==
        "Conv2d: groups=3 must be at least 1 and divide in=4 and out=6");
  nn::Conv1d c1(3, 5, 2, g);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(c1.forward(zeros({2, 3, 4, 4})), ShapeError),
                       "expected an input (N,C,L) with C=3, got (2,3,4,4)"));
}

TEST_CASE("nn Conv2d: Conv2dOptions{{2, 2}, {1, 1}} is stride 2 and padding 1, as Conv2d(1, 2, 3, 2, 1) in PyTorch") {
  Generator gen(3);
  nn::Conv2d conv(1, 2, 3, gen, {{2, 2}, {1, 1}});
  CHECK(conv.options().stride == std::array<int64_t, 2>{2, 2});
  CHECK(conv.options().padding == std::array<int64_t, 2>{1, 1});
  CHECK(conv.kernel_size() == std::array<int64_t, 2>{3, 3});
  CHECK(conv.forward(zeros({1, 1, 8, 8})).shape() == Shape{1, 2, 4, 4});  // (8 + 2 - 3) / 2 + 1
}
