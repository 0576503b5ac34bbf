// nn/conv.h: Conv1d, Conv2d, Conv3d, ConvTranspose1d and ConvTranspose2d. tests/torch/vision_layers_parity
// compares them with torch.nn's on the same weights.
#include <doctest/doctest.h>

#include <cmath>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Conv2d, Conv1d, ConvTranspose2d: PyTorch's shapes and default init bounds") {
  Generator g(1);
  nn::Conv2d c2(nn::Conv2dOptions(4, 6, 3).stride(2).padding(1).groups(2), g);
  CHECK(c2.weight().shape() == Shape{6, 2, 3, 3});
  CHECK(c2.bias().shape() == Shape{6});
  CHECK(c2.type_name() == "Conv2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2)");
  CHECK(c2.forward(zeros({2, 4, 7, 7})).shape() == Shape{2, 6, 4, 4});
  nn::Conv1d c1(nn::Conv1dOptions(3, 5, 4).bias(false), g);
  CHECK(c1.type_name() == "Conv1d(3, 5, kernel_size=(4,), stride=(1,), bias=False)");
  CHECK(c1.weight().shape() == Shape{5, 3, 4});
  CHECK_FALSE(c1.bias().defined());
  CHECK(c1.forward(zeros({2, 3, 9})).shape() == Shape{2, 5, 6});
  nn::ConvTranspose2d ct(nn::ConvTranspose2dOptions(4, 6, {3, 2}).stride(2).output_padding(1), g);
  CHECK(ct.type_name() == "ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(2, 2), output_padding=(1, 1))");
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
  nn::Conv2d c2(nn::Conv2dOptions(2, 3, {2, 3}).padding("same"), g);
  nn::Conv1d c1(2, 4, 3, g);
  nn::ConvTranspose2d ct(nn::ConvTranspose2dOptions(2, 3, 2).stride({2, 1}), g);
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
  CHECK(xgnt::contains(msg, "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1))"));
  CHECK(xgnt::contains(msg, "expected an input (N,C,H,W) with C=4, got (2,3,7,7)"));
  CHECK(XGN_THROW_MESSAGE(nn::Conv1d(3, 5, 0, g), std::invalid_argument) ==
        "Conv1d: kernel_size 0: expected each at least 1");
  CHECK(XGN_THROW_MESSAGE(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).groups(3), g), std::invalid_argument) ==
        "Conv2d: groups 3: expected at least 1 and dividing in_channels 4 and out_channels 6");
  CHECK(XGN_THROW_MESSAGE(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).padding("same").stride(2), g),
                          std::invalid_argument) == "Conv2d: padding \"same\" needs stride 1, got stride (2, 2)");
  CHECK(XGN_THROW_MESSAGE(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).padding_mode("mirror"), g), std::invalid_argument) ==
        "Conv2d: padding_mode 'mirror': expected zeros, reflect, replicate or circular");
  CHECK(XGN_THROW_MESSAGE(nn::Conv3d(nn::Conv3dOptions(4, 6, 3).dilation({1, 0, 1}), g), std::invalid_argument) ==
        "Conv3d: dilation (1, 0, 1): expected each at least 1");
  nn::Conv1d c1(3, 5, 2, g);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(c1.forward(zeros({2, 3, 4, 4})), ShapeError),
                       "expected an input (N,C,L) with C=3, got (2,3,4,4)"));
}

TEST_CASE("nn Conv2d: LibTorch's options, PyTorch's order: Conv2dOptions(1, 2, 3).stride(2).padding(1)") {
  Generator gen(3);
  nn::Conv2d conv(nn::Conv2dOptions(1, 2, 3).stride(2).padding(1), gen);
  CHECK(conv.options().stride() == ExpandingArray<2>({2, 2}));
  CHECK(conv.options().padding() == ConvPadding<2>(1));
  CHECK(conv.options().kernel_size() == ExpandingArray<2>(3));
  CHECK(conv.forward(zeros({1, 1, 8, 8})).shape() == Shape{1, 2, 4, 4});  // (8 + 2 - 3) / 2 + 1
}

TEST_CASE("nn Conv2d and Conv1d: padding_mode pads the input in that mode, then convolves with none") {
  Generator gen(4);
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    nn::Conv2d conv(nn::Conv2dOptions(2, 3, {3, 2}).padding({1, 2}).padding_mode(mode), gen);
    conv.to(f64);
    const Tensor x = xgnt::input({1, 2, 5, 6}, 6);
    const Tensor want = conv2d(pad(x, {2, 2, 1, 1}, mode), conv.weight(), conv.bias());
    CHECK(max(abs(conv.forward(x) - want)).item() == 0.0);
    nn::Conv1d same(nn::Conv1dOptions(2, 3, 4).padding("same").padding_mode(mode), gen);
    same.to(f64);
    const Tensor s = xgnt::input({1, 2, 7}, 7);
    // "same" with an even kernel: 1 before, 2 after, as PyTorch's _reversed_padding_repeated_twice
    CHECK(max(abs(same.forward(s) - conv1d(pad(s, {1, 2}, mode), same.weight(), same.bias()))).item() == 0.0);
  }
}
