// The image test models of the ONNX tests (tests/onnx/export_vision.cpp and
// test_onnx_export.cpp): every convolution, pooling and normalisation
// option that exports, built from library layers as a user's would be.
#pragma once

#include <memory>

#include "autograd/xg.h"
#include "nn/nn.h"

namespace xg::onnx_test {

// Images (N, 3, 13, 11) -> (N, 10). Odd sizes, so that windows with
// ceil_mode and padding end off the image: a strided padded convolution
// with a bias, a grouped dilated one, "same" padding with an even kernel
// (its odd zero at the bottom and right), batch norm (running statistics
// made up), group norm, max pooling with ceil_mode and with dilation,
// average pooling with and without the padding counted, a transposed
// convolution, adaptive pooling to 1x1 and to a size that divides,
// flatten and unflatten; ceil_mode windows that run off the image.
class VisionZoo : public nn::Module {
 public:
  explicit VisionZoo(Generator& gen) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1),
                                                                  gen));  // (N,8,7,6)
    conv2 = register_module(
        "conv2",
        std::make_shared<nn::Conv2d>(nn::Conv2dOptions(8, 8, 3).padding(2).dilation(2).groups(2).bias(false), gen));
    conv3 = register_module(
        "conv3", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(8, 6, {4, 3}).padding("same").dilation({1, 3}), gen));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(6));
    gn = register_module("gn", std::make_shared<nn::GroupNorm>(3, 6));
    pool_ceil = register_module(
        "pool_ceil", std::make_shared<nn::MaxPool2d>(MaxPool2dOptions({3, 2}).stride(2).padding(1).ceil_mode(true)));
    pool_dil =
        register_module("pool_dil", std::make_shared<nn::MaxPool2d>(MaxPool2dOptions(2).stride(1).dilation({2, 1})));
    auto avg = AvgPool2dOptions(3).stride({2, 1}).padding(1).ceil_mode(true);
    avg_in = register_module("avg_in", std::make_shared<nn::AvgPool2d>(avg));
    avg_out = register_module("avg_out", std::make_shared<nn::AvgPool2d>(avg.count_include_pad(false)));
    // the last window runs off the image: its divisor is clipped there
    avg_edge =
        register_module("avg_edge", std::make_shared<nn::AvgPool2d>(AvgPool2dOptions(3).stride(2).ceil_mode(true)));
    // ceil_mode's last window would start in the right padding: dropped
    pool_late = register_module("pool_late",
                                std::make_shared<nn::MaxPool2d>(MaxPool2dOptions(3).padding(1).ceil_mode(true)));
    deconv = register_module(
        "deconv", std::make_shared<nn::ConvTranspose2d>(
                      nn::ConvTranspose2dOptions(6, 4, 3).stride(2).padding({1, 0}).output_padding(1).groups(2), gen));
    pool_to_2 = register_module("pool_to_2", std::make_shared<nn::AdaptiveAvgPool2d>(2));
    pool_to_1 = register_module("pool_to_1", std::make_shared<nn::AdaptiveAvgPool2d>(1));
    fc = register_module("fc", std::make_shared<nn::Linear>(4 * 4 + 6 + 6 + 4 + 6, 10, gen));
  }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    Tensor h = relu(conv1->forward(x));                      // (N,8,7,6)
    h = conv3->forward(conv2->forward(h) + h);               // (N,6,7,6)
    h = gn->forward(relu(bn->forward(h)));                   // (N,6,7,6)
    const Tensor a = pool_dil->forward(pool_ceil->forward(h));  // (N,6,4,4) -> (N,6,2,3)
    const Tensor b = avg_in->forward(h) - avg_out->forward(h);  // (N,6,4,6)
    const Tensor up = deconv->forward(b);                        // (N,4,8,14)
    const Tensor u = flatten(pool_to_2->forward(up));            // (N,16)
    const Tensor v = flatten(pool_to_1->forward(a));             // (N,6)
    const Tensor w = sum(unflatten(flatten(b, 2), 2, {4, 6}), {2, 3});  // (N,6)
    const Tensor e = flatten(pool_to_1->forward(pool_late->forward(up)));  // (N,4,3,5) -> (N,4)
    const Tensor f = flatten(pool_to_1->forward(avg_edge->forward(h)));    // (N,6,3,3) -> (N,6)
    return fc->forward(concat({u, v, w, e, f}, 1));                       // (N,10)
  }
  std::string type_name() const override { return "VisionZoo"; }
  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::GroupNorm> gn;
  std::shared_ptr<nn::MaxPool2d> pool_ceil, pool_dil, pool_late;
  std::shared_ptr<nn::AvgPool2d> avg_in, avg_out, avg_edge;
  std::shared_ptr<nn::ConvTranspose2d> deconv;
  std::shared_ptr<nn::AdaptiveAvgPool2d> pool_to_2, pool_to_1;
  std::shared_ptr<nn::Linear> fc;
};

// Sequences (N, 4, L) -> (N, 5), both N and L dynamic: a "same" dilated
// convolution (keeps L), a strided grouped one (L' of its own), batch norm
// over (N, C, L), the mean over the length.
class Conv1dNet : public nn::Module {
 public:
  explicit Conv1dNet(Generator& gen) {
    conv1 = register_module(
        "conv1", std::make_shared<nn::Conv1d>(nn::Conv1dOptions(4, 6, 4).padding("same").dilation(2), gen));
    conv2 = register_module(
        "conv2", std::make_shared<nn::Conv1d>(nn::Conv1dOptions(6, 4, 3).stride(2).padding(1).groups(2), gen));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 5, gen));
  }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    Tensor h = tanh(conv1->forward(x)) + sum(x, {1}, true);  // (N,6,L)
    h = bn->forward(conv2->forward(h));                      // (N,4,L')
    return fc->forward(mean(h, {2}));                        // (N,5)
  }
  std::string type_name() const override { return "Conv1dNet"; }
  std::shared_ptr<nn::Conv1d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm1d> bn;
  std::shared_ptr<nn::Linear> fc;
};

// Random values for every parameter, and running statistics of every batch
// norm that are not the defaults (a mean and a variance swapped, or not
// read at all, would then show).
inline void randomise_vision(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  for (auto& [name, p] : m.named_parameters()) p.copy_(randn(p.shape(), g, p.dtype(), 0.0, 0.5));
  for (auto& [name, b] : m.named_buffers()) {
    if (b.dtype() == i64) continue;
    const bool var = name.size() >= 11 && name.compare(name.size() - 11, 11, "running_var") == 0;
    b.copy_(var ? rand(b.shape(), g, b.dtype(), 0.5, 2.0) : randn(b.shape(), g, b.dtype(), 0.0, 0.3));
  }
}

}  // namespace xg::onnx_test
