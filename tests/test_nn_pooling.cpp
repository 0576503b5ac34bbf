// nn/pooling.h and nn/flatten.h: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and
// Flatten as layers. tests/torch/vision_layers_parity compares them with
// torch.nn's; the ops' own gradient checks are in test_autograd_pool.cpp.
#include <doctest/doctest.h>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten: shapes, names, float64 gradcheck") {
  nn::MaxPool2d mp(2);
  nn::AvgPool2d ap(AvgPool2dOptions(3).stride(2).padding(1));
  nn::AdaptiveAvgPool2d gap({1, 1});
  nn::Flatten fl;
  CHECK(mp.type_name() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(ap.type_name() == "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(gap.type_name() == "AdaptiveAvgPool2d(output_size=(1, 1))");
  CHECK(fl.type_name() == "Flatten(start=1, end=-1)");
  CHECK(mp.num_parameters() + ap.num_parameters() + gap.num_parameters() + fl.num_parameters() == 0);
  Tensor x = xgnt::input({2, 3, 7, 6}, 1).requires_grad_();
  CHECK(mp.forward(x).shape() == Shape{2, 3, 3, 3});
  CHECK(ap.forward(x).shape() == Shape{2, 3, 4, 3});
  CHECK(gap.forward(x).shape() == Shape{2, 3, 1, 1});
  CHECK(fl.forward(gap.forward(x)).shape() == Shape{2, 3});
  xgnt::check_grad([&] { return fl.forward(ap.forward(mp.forward(x))); }, {}, {x});
  xgnt::check_grad([&] { return gap.forward(x); }, {}, {x});
}

TEST_CASE("nn pooling layers: a wrong rank names the layer, and the op names a bad window") {
  nn::MaxPool2d mp(2);
  CHECK(XGN_THROW_MESSAGE(mp.forward(zeros({3, 4, 4})), ShapeError) ==
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False): expected an input (N,C,H,W), "
        "got (3,4,4)");
  nn::MaxPool2d wide(MaxPool2dOptions(2).padding(2));  // padding above half the kernel
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(wide.forward(zeros({1, 1, 4, 4})), std::invalid_argument), "max_pool2d"));
  CHECK(XGN_THROW_MESSAGE(nn::AdaptiveAvgPool2d({0, 2}), std::invalid_argument) ==
        "AdaptiveAvgPool2d: output_size (0, 2): expected each at least 1");
  CHECK(XGN_THROW_MESSAGE(nn::MaxUnpool2d(MaxUnpool2dOptions(2).stride({1, 0})), std::invalid_argument) ==
        "MaxUnpool2d: stride (1, 0): expected each at least 1");
  CHECK(XGN_THROW_MESSAGE(nn::LPPool1d(0.0, 2), std::invalid_argument) == "LPPool1d: norm_type 0: expected > 0");
}
