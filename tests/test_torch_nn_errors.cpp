// The torch.nn families' bad inputs and options (autograd/ops_activation.cpp,
// losses.cpp, ops_spatial.cpp, ops_layers.cpp, ops_more.cpp, nn/activation.h,
// loss.h, padding.h, layers.h, transformer.h): each refused with a message
// that names the op or module, the value and what is accepted.
#include <cmath>
#include <limits>

#include "nn/nn.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;
using xgt::leaf;

namespace {
// The message of the exception `f` throws (as std::exception), "" if none.
template <class F>
std::string message(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("torch.nn errors: activations name the option and its range") {
  const Tensor x = leaf({2, 3}, 1);
  CHECK(contains(message([&] { hardtanh(x, 1.0, -1.0); }), "hardtanh: min_val 1 is above max_val -1"));
  CHECK(contains(message([&] { softshrink(x, -0.5); }), "softshrink: lambd -0.5: expected >= 0"));
  CHECK(contains(message([&] { hardshrink(x, -1.0); }), "hardshrink: lambd -1: expected >= 0"));
  CHECK(contains(message([&] { celu(x, 0.0); }), "celu: alpha must not be 0"));
  CHECK(contains(message([&] { softplus(x, 0.0); }), "softplus: beta must not be 0"));
  CHECK(contains(message([&] { gelu(x, "fast"); }), "gelu: approximate \"fast\": expected \"none\" or \"tanh\""));
  CHECK(contains(message([&] { glu(leaf({2, 3}, 2), -1); }), "glu: dimension -1 of input (2,3) has odd size 3"));
  CHECK(contains(message([&] { prelu(leaf({2, 3, 4}, 3), leaf({2}, 4)); }),
                 "prelu: weight (2,) must hold 1 value or one per channel (3"));
  CHECK(contains(message([&] { rrelu(x, 0.5, 0.1); }), "rrelu: lower 0.5 is above upper 0.1"));
  CHECK(contains(message([&] { gt(x, from_ints({1, 2, 3}, {3})); }), "gt: dtype mismatch"));
  CHECK(contains(message([&] { vector_norm(x, -1.0); }), "vector_norm: ord -1.000000: expected > 0 or infinity"));
  CHECK(contains(message([&] { var(x, {1}, -1); }), "var: correction -1: expected >= 0"));
  CHECK(contains(message([] { nn::GELU("fast"); }), "GELU: approximate 'fast': expected 'none' or 'tanh'"));
  CHECK(contains(message([] { nn::PReLU(0); }), "PReLU: num_parameters 0: expected >= 1"));
  CHECK(contains(message([] { nn::Hardtanh(2.0, 1.0); }), "Hardtanh: min_val 2 is above max_val 1"));
  CHECK(contains(message([] { nn::Softmax2d().forward(zeros({2, 3})); }), "Softmax2d: expected an input (N,C,H,W) or (C,H,W)"));
}

TEST_CASE("torch.nn errors: ctc_loss names the length, label or shape it refuses") {
  const Tensor lp = log_softmax(zeros({5, 2, 4}), -1);
  const Tensor tg = from_ints({1, 2, 3, 1}, {2, 2});
  const Tensor two = from_ints({5, 5}, {2}), len = from_ints({2, 2}, {2});
  CHECK(contains(message([&] { ctc_loss(lp, tg, two, len, CTCLossOptions().blank(4)); }),
                 "ctc_loss: blank 4: expected in [0, 4)"));
  CHECK(contains(message([&] { ctc_loss(lp, from_ints({1, 0, 3, 1}, {2, 2}), two, len); }),
                 "ctc_loss: target 0 of sequence 0: expected in [0, 4) and not the blank 0"));
  CHECK(contains(message([&] { ctc_loss(lp, tg, from_ints({5, 6}, {2}), len); }),
                 "ctc_loss: input_lengths[1] = 6: expected in [1, 5]"));
  CHECK(contains(message([&] { ctc_loss(lp, tg, two, from_ints({2, 3}, {2})); }),
                 "ctc_loss: target_lengths[1] = 3: expected in [0, 2]"));
  CHECK(contains(message([&] { ctc_loss(lp, tg, two.to(f32), len); }),
                 "ctc_loss: input_lengths must be int64 (2,), got float32 (2,)"));
  CHECK(contains(message([&] { ctc_loss(zeros({5, 4}), tg, two, len); }), "ctc_loss: input_lengths must be int64 ()"));
  CHECK(contains(message([&] { ctc_loss(lp, from_ints({1, 2, 3}, {3}), two, len); }),
                 "ctc_loss: targets must be int64 (N,S) or the 4 labels one after another, got int64 (3,)"));
  // an alignment that cannot fit: +inf, or 0 with zero_infinity (PyTorch's)
  const Tensor rep = from_ints({1, 1, 1, 1}, {2, 2}), short_in = from_ints({2, 2}, {2});
  auto none = CTCLossOptions().reduction(Reduction::none);
  CHECK(std::isinf(ctc_loss(lp, rep, short_in, len, none).to_vector()[0]));
  CHECK(ctc_loss(lp, rep, short_in, len, none.zero_infinity(true)).to_vector()[0] == 0.0);
}

TEST_CASE("torch.nn errors: AdaptiveLogSoftmaxWithLoss names the cutoff, size or target it refuses") {
  using ASM = nn::AdaptiveLogSoftmaxWithLoss;
  CHECK(contains(message([] { ASM(8, 10, {4, 4}); }), "cutoffs [4, 4]: expected increasing, each in [1, 9]"));
  CHECK(contains(message([] { ASM(8, 10, {10}); }), "cutoffs [10]: expected increasing, each in [1, 9]"));
  CHECK(contains(message([] { ASM(8, 10, {}); }), "cutoffs is empty"));
  CHECK(contains(message([] { ASM(0, 10, {4}); }), "in_features 0, n_classes 10: expected >= 1 and >= 2"));
  CHECK(contains(message([] { ASM(8, 10, {4}, 0.0); }), "div_value 0: expected > 0"));
  CHECK(contains(message([] { ASM(4, 10, {2, 5}, 4.0); }), "cluster 1's hidden size in_features // div_value^2 = 0"));
  ASM m(4, 10, {2, 5}, 2.0);
  CHECK(contains(message([&] { m.forward(zeros({3, 4}), from_ints({0, 10, 1}, {3})); }),
                 "target 10 of row 1: expected in [0, 10)"));
  CHECK(contains(message([&] { m.forward(zeros({3, 5}), from_ints({0, 1, 1}, {3})); }),
                 "input (3,5): expected (N, 4) or (4)"));
  CHECK(contains(message([&] { m.forward(zeros({3, 4}), from_ints({0, 1}, {2})); }),
                 "target must be int64 (3) for input (3,4), got (2,)"));
}

TEST_CASE("torch.nn errors: fractional max pooling names the size, ratio or samples it refuses") {
  const Tensor x = zeros({1, 2, 5, 5});
  CHECK(contains(message([&] { fractional_max_pool2d(x, FractionalMaxPool2dOptions(2)); }),
                 "fractional_max_pool2d: give exactly one of output_size and output_ratio"));
  CHECK(contains(
      message([&] { fractional_max_pool2d(x, FractionalMaxPool2dOptions(2).output_size(3).output_ratio(0.5)); }),
      "give exactly one of output_size and output_ratio"));
  CHECK(contains(message([&] { fractional_max_pool2d(x, FractionalMaxPool2dOptions(3).output_size(4)); }),
                 "fractional_max_pool2d: output size 4 with kernel 3 on axis 0 of input (1,2,5,5): expected 1 to 3"));
  CHECK(contains(message([&] { fractional_max_pool2d(x, FractionalMaxPool2dOptions(0).output_size(2)); }),
                 "fractional_max_pool2d: kernel_size 0: expected at least 1"));
  CHECK(contains(message([&] { fractional_max_pool2d(x, FractionalMaxPool2dOptions(2).output_ratio(1.0)); }),
                 "fractional_max_pool2d: output_ratio 1: expected in (0, 1)"));
  CHECK(
      contains(message([&] {
                 fractional_max_pool2d(x, FractionalMaxPool2dOptions(2).output_size(2)._random_samples(zeros({1, 2})));
               }),
               "fractional_max_pool2d: _random_samples float32 (1,2): expected (1,2,2) floats"));
  CHECK(contains(message([&] {
                   fractional_max_pool3d(zeros({2, 5, 5}), FractionalMaxPool3dOptions(2).output_size(2));
                 }),
                 "fractional_max_pool3d: expected an input of 4 or 5 dimensions, got (2,5,5)"));
}

TEST_CASE("nn FractionalMaxPool2d: samples drawn per forward from the default generator, replayed by manual_seed") {
  Generator g(2);
  const Tensor x = randn({2, 3, 9, 9}, g);
  nn::FractionalMaxPool2d pool(FractionalMaxPool2dOptions(2).output_ratio(0.5));
  manual_seed(5);
  const Tensor a = pool.forward(x), b = pool.forward(x);
  manual_seed(5);
  const Tensor c = pool.forward(x);
  CHECK(a.shape() == Shape{2, 3, 4, 4});
  CHECK(bit_equal(a, c));
  CHECK(!bit_equal(a, b));  // another draw, other windows
  // every output is the maximum of a 2x2 window of its plane at the index it names
  const MaxPool2dResult r = pool.forward_with_indices(x);
  const auto v = x.to_vector(), out = r.values.to_vector();
  for (int64_t i = 0; i < r.indices.numel(); ++i) CHECK(out[i] == v[(i / 16) * 81 + r.indices.data<int64_t>()[i]]);
}

TEST_CASE("torch.nn errors: losses name the shapes, targets and options") {
  const Tensor x = leaf({4, 3}, 5), t = leaf({4, 3}, 6);
  CHECK(contains(message([&] { mse_loss(x, leaf({4}, 7)); }), "mse_loss: input (4,3) and target (4,) must have one shape"));
  CHECK(contains(message([&] { smooth_l1_loss(x, t, SmoothL1LossOptions().beta(-1)); }),
                 "smooth_l1_loss: beta -1: expected >= 0"));
  CHECK(contains(message([&] { huber_loss(x, t, HuberLossOptions().delta(0)); }), "huber_loss: delta 0: expected > 0"));
  CHECK(contains(message([&] { binary_cross_entropy(x * 10.0, t); }),
                 "expected probabilities in [0, 1] (for logits use binary_cross_entropy_with_logits)"));
  CHECK(contains(message([&] { cross_entropy(x, from_ints({0, 1, 7, 2}, {4})); }),
                 "target 7 at row 2 is out of range for 3 classes"));
  CHECK(contains(message([&] { nll_loss(x, from_ints({0, 1, 7, 2}, {4})); }),
                 "nll_loss: target 7 at position 2 is out of range for 3 classes"));
  CHECK(contains(message([&] { cross_entropy(x, from_ints({0, 1, 2, 2}, {4}), CrossEntropyLossOptions().weight(ones({2}))); }),
                 "cross_entropy: weight (2,) must be (C) = (3), one per class"));
  CHECK(contains(message([&] { nll_loss(x, x); }), "nll_loss: target must hold int64 class indices, got float64 (4,3)"));
  CHECK(contains(message([&] { l1_loss(x, t, Reduction::batchmean); }),
                 "l1_loss: reduction batchmean is kl_div's alone (expected none, mean or sum)"));
  CHECK(contains(message([&] { gaussian_nll_loss(x, t, leaf({4, 2}, 8, 0.1, 1)); }),
                 "gaussian_nll_loss: var (4,2) must be input (4,3)'s shape"));
  CHECK(contains(message([&] { gaussian_nll_loss(x, t, leaf({4, 3}, 9, -1, -0.5)); }), "gaussian_nll_loss: var holds -"));
  CHECK(contains(message([&] { multi_margin_loss(x, from_ints({0, 1, 2, 0}, {4}), MultiMarginLossOptions().p(3)); }),
                 "multi_margin_loss: p 3: expected 1 or 2"));
  CHECK(contains(message([&] { multilabel_margin_loss(x, from_ints({0, 5, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {4, 3})); }),
                 "multilabel_margin_loss: target 5 in row 0 is out of range for 3 classes"));
  CHECK(contains(message([&] {
                   triplet_margin_with_distance_loss(x, t, x, TripletMarginWithDistanceLossOptions().margin(0));
                 }),
                 "triplet_margin_with_distance_loss: margin 0: expected > 0"));
  CHECK(contains(message([&] { cosine_embedding_loss(x, t, leaf({3}, 10)); }),
                 "cosine_embedding_loss: target (3,) must be (4,)"));
}

TEST_CASE("torch.nn errors: padding, resampling and rearranging name the sizes") {
  const Tensor x = leaf({1, 2, 3, 3}, 11);
  CHECK(contains(message([&] { pad(x, {1}); }), "pad: 1 pad sizes for input (1,2,3,3)"));
  CHECK(contains(message([&] { pad(x, {1, 1}, "mirror"); }), "pad: mode 'mirror': expected 'constant', 'reflect'"));
  CHECK(contains(message([&] { pad(x, {3, 0}, "reflect"); }),
                 "pad: reflect padding (3, 0) of dimension 3 must be below its size 3"));
  CHECK(contains(message([&] { interpolate(x, InterpolateOptions().size({4}).mode("linear")); }),
                 "interpolate: got a 4-D input, but mode 'linear' needs a 3-D input"));
  CHECK(contains(message([&] { interpolate(x, InterpolateOptions().size({4, 4}).scale_factor({2.0})); }),
                 "interpolate: give either size or scale_factor, not both"));
  CHECK(contains(message([&] { interpolate(x, InterpolateOptions().size({4, 4}).align_corners(true)); }),
                 "interpolate: align_corners is for the linear, bilinear, bicubic and trilinear modes"));
  CHECK(contains(message([&] { pixel_shuffle(x, 2); }), "pixel_shuffle: expected an input (*, C*4, H, W), got (1,2,3,3)"));
  CHECK(contains(message([&] { channel_shuffle(x, 3); }), "channel_shuffle: expected an input (N,C,*) with C divisible by groups 3"));
  CHECK(contains(message([] { nn::ReflectionPad2d({1, 2, 3}); }), "ReflectionPad2d: padding has 3 sizes: expected 1 or 4"));
  CHECK(contains(message([] { nn::Upsample up{InterpolateOptions()}; }), "Upsample: give either size or scale_factor"));
}

TEST_CASE("torch.nn errors: empty inputs, crops and sizes that once crashed or gave garbage are refused by name") {
  // interpolate read row[-1] of an empty weight matrix
  CHECK(contains(message([] { interpolate(zeros({1, 1, 0}), InterpolateOptions().size({4})); }),
                 "interpolate: spatial size 0 is empty: only the batch or the channels may be 0"));
  CHECK(contains(message([] { interpolate(zeros({1, 1, 3}), InterpolateOptions().size({4}).recompute_scale_factor(true)); }),
                 "interpolate: recompute_scale_factor is not meaningful with an explicit size"));
  CHECK(contains(message([] {
          interpolate(zeros({1, 1, 3}), InterpolateOptions().scale_factor({std::numeric_limits<double>::infinity()}));
        }),
                 "interpolate: scale_factor inf: expected > 0 and an output size below 2^62"));
  CHECK(interpolate(zeros({0, 1, 3}), InterpolateOptions().size({4}).mode("linear")).shape() == Shape{0, 1, 4});
  // a crop beyond the dimension was made up by the padding at the other end
  CHECK(contains(message([] { pad(zeros({1, 3}), {-5, 3}); }),
                 "pad: pads (-5, 3) crop 5 values from dimension 1 of size 3: at most 3"));
  CHECK(contains(message([] { pad(zeros({1, 3}), {6, -5}); }), "pad: pads (6, -5) crop 5 values"));
  CHECK(pad(zeros({1, 3}), {-2, -1}).shape() == Shape{1, 0});
  // pooling an empty spatial axis gave NaN or zeros; a transposed convolution's too
  CHECK(contains(message([] { avg_pool2d(zeros({1, 1, 0, 4}), AvgPool2dOptions(2).padding(1)); }),
                 "avg_pool2d: spatial size 0x4 is empty: only the batch or the channels may be 0"));
  CHECK(contains(message([] { conv_transpose2d(zeros({1, 1, 0, 4}), zeros({1, 1, 3, 3})); }),
                 "conv_transpose2d: spatial size 0x4 is empty"));
  // fractional pooling divided by N C = 0; batch norm by C = 0
  CHECK(fractional_max_pool2d(zeros({0, 2, 8, 8}), FractionalMaxPool2dOptions(2).output_size(4)).shape() ==
        Shape{0, 2, 4, 4});
  CHECK(contains(message([] { fractional_max_pool2d(zeros({1, 0, 8, 8}), FractionalMaxPool2dOptions(2).output_size(4)); }),
                 "fractional_max_pool2d: input (1,0,8,8) has no channels: only the batch may be empty"));
  CHECK(batch_norm(zeros({4, 0}), Tensor(), Tensor(), Tensor(), Tensor(), true).shape() == Shape{4, 0});
  {  // an empty batch, as PyTorch: an empty result, the running statistics unchanged, the batch counted
    nn::BatchNorm2d bn(3);
    CHECK(bn.forward(zeros({0, 3, 2, 2})).shape() == Shape{0, 3, 2, 2});
    CHECK(bn.running_mean().to_vector() == std::vector<double>(3, 0.0));
    CHECK(bn.running_var().to_vector() == std::vector<double>(3, 1.0));
    CHECK(bn.num_batches_tracked().item() == 1);
    CHECK(contains(message([&] { bn.forward(zeros({1, 3, 1, 1})); }),
                   "batch_norm: training needs more than 1 value per channel, got input (1,3,1,1)"));
  }
  // an unpooling's default size below 0 came from make_tensor, unnamed
  CHECK(contains(message([] { nn::MaxUnpool2d(MaxUnpool2dOptions(2).padding(2)).forward(zeros({1, 1, 1, 1}),
                                                                                     zeros({1, 1, 1, 1}, i64)); }),
                 "max_unpool: output size (-2,-2): expected each at least 0"));
  // a transposed convolution's window options, at construction as Conv's
  Generator g(1);
  CHECK(contains(message([&] { nn::ConvTranspose2d(nn::ConvTranspose2dOptions(1, 1, 3).stride(0), g); }),
                 "ConvTranspose2d: stride (0, 0): expected each at least 1"));
  CHECK(contains(message([&] { nn::ConvTranspose1d(nn::ConvTranspose1dOptions(1, 1, 3).output_padding(2), g); }),
                 "ConvTranspose1d: output_padding 2: expected each below the stride 1 or the dilation 1"));
  CHECK(contains(message([] { pixel_shuffle(zeros({1, 4, 2, 2}), int64_t{1} << 32); }),
                 "pixel_shuffle: upscale_factor 4294967296: expected in [1, 2^31)"));
  CHECK(contains(message([] { nn::generate_square_subsequent_mask(int64_t{1} << 32); }),
                 "more elements than an int64 can count"));
}

TEST_CASE("torch.nn errors: the other layers name their arguments") {
  CHECK(contains(message([] { avg_pool1d(zeros({2, 3}), AvgPool1dOptions(2)); }), "avg_pool1d: expected an input (N,C,L), got (2,3)"));
  CHECK(contains(message([] { adaptive_max_pool2d(zeros({1, 1, 3, 3}), {0, 2}); }),
                 "adaptive_max_pool2d: output_size (0, 2): expected each at least 1"));
  CHECK(contains(message([] { lp_pool2d(zeros({1, 1, 3, 3}), LPPool2dOptions(0.0, 2)); }), "lp_pool2d: norm_type 0: expected > 0"));
  CHECK(contains(message([] { instance_norm(zeros({2, 3})); }), "instance_norm: expected an input (N,C,...) with at least one spatial axis"));
  CHECK(contains(message([] { bilinear(zeros({2, 3}), zeros({2, 4}), zeros({5, 3, 2})); }),
                 "bilinear: expected inputs (..., I1) and (..., I2) and a weight (O, I1, I2)"));
  CHECK(contains(message([] { dropout2d(zeros({2, 3}), 0.5, true, nullptr); }), "dropout2d: expected an input of 4 or 3 dimensions"));
  CHECK(contains(message([] { alpha_dropout(zeros({2, 3}), 1.5, true, nullptr); }), "alpha_dropout: p 1.5: expected in [0, 1]"));
  CHECK(contains(message([] { max_unpool(zeros({1, 1, 2}), from_ints({0, 9}, {1, 1, 2}), {4}); }),
                 "max_unpool: index 9 at position 1 is outside the output plane of 4 positions"));
  CHECK(contains(message([] { embedding_bag(from_ints({0, 1}, {2}), zeros({3, 2}), Tensor(), "median"); }),
                 "embedding_bag: mode 'median': expected 'sum', 'mean' or 'max'"));
  CHECK(contains(message([] { embedding_bag(from_ints({0, 1}, {2}), zeros({3, 2})); }),
                 "embedding_bag: 1-D ids need int64 offsets (B), each bag's start"));
  CHECK(contains(message([] { conv3d(zeros({1, 2, 3, 3, 3}), zeros({4, 3, 1, 1, 1})); }),
                 "conv3d: expected an input (N,C,D,H,W) and a weight (O,C/groups,kd,kh,kw) with groups 1"));
  CHECK(contains(message([] { nn::InstanceNorm2d(3, 1e-5, 0.1, false, true); }),
                 "InstanceNorm2d: track_running_stats (running statistics for eval mode) is not built"));
  CHECK(contains(message([] { nn::AdaptiveMaxPool1d(0); }), "AdaptiveMaxPool1d: output_size 0: expected each at least 1"));
  CHECK(contains(message([] { nn::LocalResponseNorm(0); }), "LocalResponseNorm: size 0: expected >= 1"));
  Generator g(1);
  CHECK(contains(message([&] { nn::EmbeddingBag(3, 2, g, "mean", false, 3); }),
                 "EmbeddingBag: padding_idx 3: expected in [-3, 3) (a negative one counts from the end, as in "
                 "PyTorch), or none"));
  CHECK(contains(message([&] { nn::Embedding(3, 2, g, -4); }), "Embedding: padding_idx -4: expected in [-3, 3)"));
  CHECK(contains(message([] { embedding_bag(from_ints({0, 1}, {1, 2}), zeros({3, 2}), Tensor(), "sum", Tensor(),
                                            false, 3); }),
                 "embedding_bag: padding_idx 3: expected in [-3, 3)"));
  CHECK(contains(message([&] { nn::ConvTranspose1d(nn::ConvTranspose1dOptions(3, 4, 2).groups(2), g); }),
                 "ConvTranspose1d: groups 2: expected at least 1 and dividing in_channels 3 and out_channels 4"));
  CHECK(contains(message([] { max_pool1d(zeros({1, 1, 4}), MaxPool1dOptions(2).padding(2)); }),
                 "max_pool1d: padding 2: expected each from 0 to half the kernel 1"));
  CHECK(contains(message([] { avg_pool3d(zeros({1, 1, 2, 4, 4}), AvgPool3dOptions(3)); }),
                 "avg_pool3d: the padded input 2x4x4 is smaller than the kernel 3x3x3"));
  CHECK(contains(message([] { avg_pool2d(zeros({1, 1, 4, 4}), AvgPool2dOptions(2).divisor_override(0)); }),
                 "avg_pool2d: divisor_override 0: expected at least 1"));
  CHECK(contains(message([] { conv_transpose3d(zeros({1, 2, 3, 3, 3}), zeros({3, 1, 2, 2, 2})); }),
                 "conv_transpose3d: expected an input (N,C,D,H,W) and a weight (C,O/groups,kd,kh,kw) with the same C"));
  CHECK(contains(message([] {
                   conv_transpose3d(zeros({1, 2, 2, 3, 3}), zeros({2, 1, 2, 2, 2}), Tensor(),
                                    ConvTranspose3dFuncOptions().stride(2).output_padding({2, 0, 0}));
                 }),
                 "conv_transpose3d: output_padding (2, 0, 0): expected each below the stride (2, 2, 2) or the dilation"));
  CHECK(contains(message([] { nn::Dropout2d(-0.1); }), "Dropout2d: p -0.1: expected in [0, 1]"));
}

TEST_CASE("torch.nn errors: the Transformer's layers name their options and shapes") {
  Generator g(2);
  CHECK(contains(message([&] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(6, 4), g); }),
                 "MultiheadAttention: embed_dim 6 must be a positive multiple of num_heads 4"));
  CHECK(contains(message([&] {
                   nn::TransformerEncoderLayer(nn::TransformerLayerOptions(8, 2).activation("tanh"), g);
                 }),
                 "TransformerEncoderLayer: activation 'tanh': expected 'relu' or 'gelu'"));
  CHECK(contains(message([&] { nn::TransformerEncoder(nn::TransformerLayerOptions(8, 2), 0, g); }),
                 "TransformerEncoder: num_layers 0: expected >= 1"));
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(4, 2), g);
  const Tensor q = zeros({3, 2, 4});  // (L, N, E)
  CHECK(contains(message([&] { mha.forward(q, q, q, zeros({2, 5})); }), "key_padding_mask (2,5) must be (N, S) = (2, 3)"));
  CHECK(contains(message([&] { mha.forward(q, q, q, Tensor(), true, zeros({2, 2})); }),
                 "attn_mask (2,2) must be (L, S) = (3, 3) or (N*H, L, S) = (4, 3, 3)"));
  CHECK(contains(message([&] { mha.forward(zeros({3, 2, 5}), q, q); }), "query, key and value must be (L, N, E=4)"));
  CHECK(contains(message([] { nn::generate_square_subsequent_mask(0); }), "generate_square_subsequent_mask: sz 0: expected >= 1"));
  const Tensor m = nn::generate_square_subsequent_mask(3);
  CHECK(m.at({0, 1}) == -std::numeric_limits<double>::infinity());
  CHECK(m.at({1, 0}) == 0.0);
}
