// conv2d's direct path (engine/conv.h: oneDNN's convolution primitives, which
// run float32 and bf16 conv2d and conv1d) against the float64 im2col path,
// the oracle the gradchecks and PyTorch parity tests hold: outputs, every
// first-order gradient, second order through create_graph, in both layouts
// and with the batch split across one and two threads; bf16 against float64
// on operands rounded to bf16; which of oneDNN's kernels run them; results
// kept in oneDNN's blocked layout between layers.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/xg.h"
#include "engine/conv.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;

namespace {

struct Case {
  Shape x, w;
  Conv2dFuncOptions o;
  bool bias;
  // Relative tolerance against float64. The larger one is for a shape of a
  // real layer, where each weight gradient sums N Ho Wo = 12544 float32
  // products: oneDNN's kernel sums them in long runs and was measured
  // 5.2e-4 away (im2col's blocked product 0.7e-4); outputs stay within 1.2e-5.
  double tol = 5e-5;
};

Conv2dFuncOptions window(std::array<int64_t, 2> s, std::array<int64_t, 2> p, std::array<int64_t, 2> d,
                         int64_t groups = 1, bool same = false) {
  return Conv2dFuncOptions()
      .stride(s)
      .padding(same ? ConvPadding<2>("same") : ConvPadding<2>(p))
      .dilation(d)
      .groups(groups);
}

// The windows of a small CNN and a ResNet (3x3 at strides 1 and 2, the 1x1
// downsample, a one-channel first layer) and every option besides.
std::vector<Case> cases() {
  return {{{3, 4, 7, 6}, {5, 4, 3, 3}, window({1, 1}, {1, 1}, {1, 1}), true},
          {{3, 4, 7, 6}, {6, 4, 3, 3}, window({2, 2}, {1, 1}, {1, 1}), false},
          {{3, 4, 7, 6}, {6, 4, 1, 1}, window({2, 2}, {0, 0}, {1, 1}), false},
          {{3, 1, 8, 8}, {8, 1, 3, 3}, window({1, 1}, {0, 0}, {1, 1}), true},
          {{2, 4, 7, 6}, {3, 4, 2, 3}, window({1, 1}, {0, 0}, {1, 2}, 1, true), true},
          {{2, 4, 9, 8}, {3, 4, 3, 3}, window({1, 1}, {2, 1}, {2, 2}), true},
          {{2, 4, 7, 6}, {6, 2, 3, 3}, window({1, 1}, {1, 1}, {1, 1}, 2), true},
          {{3, 4, 7, 6}, {4, 1, 3, 3}, window({1, 1}, {1, 1}, {1, 1}, 4), false},
          {{2, 4, 7, 6}, {8, 1, 3, 3}, window({2, 2}, {1, 1}, {1, 1}, 4), true},
          {{2, 3, 7, 9}, {4, 3, 3, 2}, window({2, 1}, {0, 1}, {1, 1}), true},
          // Where oneDNN runs Winograd (3x3 stride 1, 16 channels or more, batch 16).
          {{16, 16, 28, 28}, {32, 16, 3, 3}, window({1, 1}, {1, 1}, {1, 1}), true, 1e-3},
          // 3x3 stride 1, 16 channels, on one small odd image and 17 outputs (padded to 32 inside):
          // oneDNN keeps the direct kernels here, so the weight gradient must not ask for Winograd.
          {{1, 16, 5, 7}, {17, 16, 3, 3}, window({1, 1}, {1, 1}, {1, 1}), false, 1e-3}};
}

// conv2d's output and its inputs' gradients under a fixed projection, in
// dtype d, as float64.
std::vector<Tensor> conv_and_grads(const Case& c, Dtype d) {
  Tensor x = leaf(c.x, 1).detach().to(d).requires_grad_(), w = leaf(c.w, 2).detach().to(d).requires_grad_();
  Tensor b = c.bias ? leaf({c.w[0]}, 3).detach().to(d).requires_grad_() : Tensor();
  Tensor y = conv2d(x, w, b, c.o);
  sum(mul(y, leaf(y.shape(), 4).detach().to(d))).backward();
  std::vector<Tensor> out{y.detach().to(f64), x.grad().to(f64), w.grad().to(f64)};
  if (c.bias) out.push_back(b.grad().to(f64));
  return out;
}

}  // namespace

TEST_CASE("conv2d float32 on the engine's primitives equals the float64 im2col path: outputs and gradients") {
  xgt::ThreadsGuard threads;
  const int64_t created = engine::cache_stats().created;
  for (const engine::ConvLayout layout :
       {engine::ConvLayout::automatic, engine::ConvLayout::blocked, engine::ConvLayout::plain})
    for (const int t : {1, 2}) {
      engine::set_conv_layout(layout);
      set_num_threads(t);
      for (size_t i = 0; i < cases().size(); ++i) {
        CAPTURE(i);
        CAPTURE(t);
        CAPTURE(static_cast<int>(layout));
        xgt::check_close(conv_and_grads(cases()[i], f32), conv_and_grads(cases()[i], f64), cases()[i].tol);
      }
    }
  engine::set_conv_layout(engine::ConvLayout::automatic);
  // The float32 convolutions did run on primitives (they were created),
  // except in the OpenBLAS build, which has none and runs im2col.
  CHECK((engine::cache_stats().created > created) == engine::conv_available());
}

TEST_CASE("conv1d float32 runs on the primitives and equals float64") {
  const auto o = Conv1dFuncOptions().stride(2).padding(1).dilation(2).groups(2);
  auto run = [&](Dtype d) {
    Tensor x = leaf({3, 4, 11}, 5).detach().to(d).requires_grad_(), w = leaf({6, 2, 3}, 6).detach().to(d).requires_grad_();
    Tensor b = leaf({6}, 7).detach().to(d).requires_grad_();
    Tensor y = conv1d(x, w, b, o);
    sum(mul(y, leaf(y.shape(), 8).detach().to(d))).backward();
    return std::vector<Tensor>{y.detach().to(f64), x.grad().to(f64), w.grad().to(f64), b.grad().to(f64)};
  };
  xgt::check_close(run(f32), run(f64), 1e-5);
}

namespace {

// Second order: the gradient with respect to `first` (x, w or both) taken
// with create_graph, then a projection of it differentiated with respect to
// x, w and b. In dtype d, as float64.
std::vector<Tensor> second_order(const Case& c, Dtype d, const std::vector<int>& first) {
  // Small operands keep tanh off its flat tails, where float32 loses the
  // second derivative's digits whatever computes the convolution.
  Tensor x = leaf(c.x, 11, -0.5, 0.5).detach().to(d).requires_grad_();
  Tensor w = leaf(c.w, 12, -0.5, 0.5).detach().to(d).requires_grad_();
  Tensor b = leaf({c.w[0]}, 13, -0.5, 0.5).detach().to(d).requires_grad_();
  const std::vector<Tensor> all{x, w, b};
  Tensor y = tanh(conv2d(x, w, b, c.o));
  std::vector<Tensor> wrt;
  for (int i : first) wrt.push_back(all[i]);
  GradOptions go;
  go.create_graph = true;
  const std::vector<Tensor> g1 = grad({sum(mul(y, leaf(y.shape(), 14).detach().to(d)))}, wrt, {}, go);
  Tensor z = sum(mul(g1[0], g1[0]));
  for (size_t i = 1; i < g1.size(); ++i) z = z + sum(mul(g1[i], g1[i]));
  z.backward();
  std::vector<Tensor> out;
  for (const Tensor& g : g1) out.push_back(g.detach().to(f64));
  for (const Tensor& t : all) out.push_back(t.grad().to(f64));
  return out;
}

}  // namespace

TEST_CASE("conv2d float32 on the primitives: gradients of gradients equal float64's, for x, w or both first") {
  xgt::ThreadsGuard threads;
  for (const int t : {1, 2}) {
    set_num_threads(t);
    for (const size_t i : {size_t{0}, size_t{1}, size_t{6}, size_t{8}})
      for (const std::vector<int>& first : {std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{0, 1}}) {
        CAPTURE(i);
        CAPTURE(first.size());
        xgt::check_close(second_order(cases()[i], f32, first), second_order(cases()[i], f64, first), 5e-5);
      }
  }
}

namespace {

// t's values rounded to bf16 (as float64).
Tensor bf16_rounded(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  std::vector<float> f(v.begin(), v.end()), back(v.size());
  std::vector<engine::bf16_t> h(v.size());
  engine::to_bf16(f.data(), h.data(), static_cast<int64_t>(f.size()));
  engine::from_bf16(h.data(), back.data(), static_cast<int64_t>(f.size()));
  return from_vector(std::vector<double>(back.begin(), back.end()), t.shape());
}

// As conv_and_grads with operands and projection exact in bf16, under
// Autocast(bf16) when `autocast`.
std::vector<Tensor> rounded_conv_and_grads(const Case& c, Dtype d, bool autocast) {
  Tensor x = bf16_rounded(leaf(c.x, 21)).to(d).requires_grad_(), w = bf16_rounded(leaf(c.w, 22)).to(d).requires_grad_();
  Tensor b = c.bias ? leaf({c.w[0]}, 23).detach().to(d).requires_grad_() : Tensor();
  Tensor y;
  {
    std::optional<Autocast> scope;
    if (autocast) scope.emplace(xg::bf16);
    y = conv2d(x, w, b, c.o);
  }
  sum(mul(y, bf16_rounded(leaf(y.shape(), 24)).to(d))).backward();
  std::vector<Tensor> out{y.detach().to(f64), x.grad().to(f64), w.grad().to(f64)};
  if (c.bias) out.push_back(b.grad().to(f64));
  return out;
}

}  // namespace

TEST_CASE("conv2d under Autocast(bf16): bf16 operands, float32 sums, equal to float64 on the rounded operands") {
  xgt::ThreadsGuard threads;
  xgt::for_each_bf16_route([] {
    for (const int t : {1, 2}) {
      set_num_threads(t);
      for (size_t i = 0; i < cases().size(); ++i) {
        CAPTURE(i);
        CAPTURE(t);
        xgt::check_close(rounded_conv_and_grads(cases()[i], f32, true),
                         rounded_conv_and_grads(cases()[i], f64, false), cases()[i].tol);
      }
    }
  });
  xgt::Bf16Products on;
  // Second order needs the operands bf16 does not keep.
  Tensor x = leaf({1, 2, 5, 5}, 25).detach().to(f32).requires_grad_(), w = leaf({3, 2, 3, 3}, 26).detach().to(f32).requires_grad_();
  Tensor y;
  {
    Autocast scope(xg::bf16);
    y = conv2d(x, w);
  }
  GradOptions go;
  go.create_graph = true;
  CHECK(xgt::contains(XG_THROW_MESSAGE(grad({sum(y)}, {x}, {}, go), std::logic_error),
                      "conv2d: a gradient of a gradient (create_graph) through an op run under Autocast(bf16)"));
}

TEST_CASE("conv2d's direct path refuses mixed dtypes by name") {
  Tensor x = leaf({1, 2, 6, 6}, 31).detach().to(f32), w = leaf({4, 2, 3, 3}, 32);
  CHECK(XG_THROW_MESSAGE(conv2d(x, w), ShapeError) ==
        "conv2d: dtype mismatch, float32 (1,2,6,6) vs float64 (4,2,3,3) (convert one with .to())");
  CHECK(XG_THROW_MESSAGE(conv2d(x, w.detach().to(f32), leaf({4}, 33)), ShapeError) ==
        "conv2d: dtype mismatch, float32 (1,2,6,6) vs float64 (4,) (convert one with .to())");
}


TEST_CASE("the weight gradient runs oneDNN's Winograd kernel wherever the forward does, and only there") {
  if (!engine::conv_available()) return;
  // A 3x3 stride-1 padded layer of n images of c channels at h x w.
  const auto layer = [](int64_t n, int64_t c, int64_t o, int64_t h, int64_t w) {
    engine::ConvGeometry g;
    g.n = n, g.c = c, g.h = h, g.w = w, g.o = o, g.kh = g.kw = 3;
    g.pt = g.pl = g.pb = g.pr = 1;
    g.ho = h, g.wo = w;
    return g;
  };
  const auto wino = [](const std::string& kernel) { return kernel.find("wino") != std::string::npos; };
  // ResNet-20's stages at the per-thread half of batch 128, then shapes where
  // oneDNN keeps the direct kernels (one small odd image, 17 outputs).
  const std::vector<engine::ConvGeometry> layers{layer(64, 16, 16, 28, 28), layer(64, 32, 32, 14, 14),
                                                 layer(64, 64, 64, 7, 7), layer(1, 16, 17, 5, 7),
                                                 layer(2, 16, 16, 3, 3)};
  __builtin_cpu_init();
  const bool avx512_core = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  for (size_t i = 0; i < layers.size(); ++i) {
    const engine::ConvKernels k = engine::conv_kernels(layers[i]);
    CAPTURE(i);
    CAPTURE(k.forward);
    CAPTURE(k.backward_weights);
    CHECK(wino(k.backward_weights) == wino(k.forward));
    // oneDNN 2.6 has Winograd kernels for AVX-512 only; there the first stage gets them.
    if (i == 0) CHECK(wino(k.forward) == avx512_core);
  }
}

namespace {

// A residual network's layers in dtype d: a first convolution to 16
// channels, a basic block (conv, batch norm, relu, conv, batch norm, plus the
// block's input, relu), a 1x1 stride-2 downsample to 32 channels with batch
// norm and relu, and a loss that reads the last result through a projection
// and the block's through a mean over its positions (a plain op, which
// converts it).
struct Chain {
  std::vector<Tensor> leaves;   // x, w1, w2, w3, then each batch norm's gamma and beta
  std::vector<Tensor> running;  // each batch norm's running mean and variance
  Tensor h1, h2, h3, loss;
  std::vector<int> blocks;  // per block result, its channel block before the loss read it
};

Chain residual_chain_of(Dtype d, bool autocast = false) {
  std::optional<Autocast> scope;
  if (autocast) scope.emplace(xg::bf16);
  const auto param = [&](const Shape& s, uint64_t seed) {
    return leaf(s, seed, -0.5, 0.5).detach().to(d).requires_grad_();
  };
  Chain c;
  c.leaves = {param({4, 3, 9, 9}, 1), param({16, 3, 3, 3}, 2), param({16, 16, 3, 3}, 3), param({32, 16, 1, 1}, 4)};
  const std::vector<int64_t> channels{16, 16, 32};
  for (size_t i = 0; i < 3; ++i) {
    c.leaves.push_back(param({channels[i]}, 10 + i));
    c.leaves.push_back(param({channels[i]}, 20 + i));
    c.running.push_back(zeros({channels[i]}, d));
    c.running.push_back(ones({channels[i]}, d));
  }
  const auto bn = [&](const Tensor& t, size_t i) {
    return batch_norm(t, c.running[2 * i], c.running[2 * i + 1], c.leaves[4 + 2 * i], c.leaves[5 + 2 * i], true);
  };
  const Tensor &x = c.leaves[0], &w1 = c.leaves[1], &w2 = c.leaves[2], &w3 = c.leaves[3];
  c.h1 = relu(bn(conv2d(x, w1, Tensor(), window({1, 1}, {1, 1}, {1, 1})), 0));
  c.h2 = relu(add(bn(conv2d(c.h1, w2, Tensor(), window({1, 1}, {1, 1}, {1, 1})), 1), c.h1));
  c.h3 = relu(bn(conv2d(c.h2, w3, Tensor(), window({2, 2}, {0, 0}, {1, 1})), 2));
  c.blocks = {detail::channel_block(c.h1), detail::channel_block(c.h2), detail::channel_block(c.h3)};
  c.loss = add(sum(mul(c.h3, leaf(c.h3.shape(), 5).detach().to(d))),
               sum(mul(mean(c.h2, {2, 3}), leaf({4, 16}, 6).detach().to(d))));
  return c;
}

// The chain's three results, the loss's gradients of every leaf, and the
// running statistics after the step, all as float64; `blocked` gets, per
// block result, its channel block. The forward under Autocast(bf16) when
// `autocast`.
std::vector<Tensor> residual_chain(Dtype d, std::vector<int>* blocked = nullptr, bool autocast = false) {
  Chain c = residual_chain_of(d, autocast);
  if (blocked) *blocked = c.blocks;
  c.loss.backward();
  std::vector<Tensor> out{c.h1.detach(), c.h2.detach(), c.h3.detach()};
  for (const Tensor& t : c.leaves) out.push_back(t.grad());
  for (const Tensor& t : c.running) out.push_back(t.clone());
  for (Tensor& t : out) t = t.to(f64);
  return out;
}

// Every element of each a[i] within rel x the largest magnitude of b[i]:
// second-order sums cancel terms far larger than some of their results (an
// entry that is 0 in float64 is a rounding of those terms in float32), so
// the error is relative to the tensor's scale, not to each element.
void check_close_to_scale(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].shape() == b[i].shape());
    const std::vector<double> va = a[i].to_vector(), vb = b[i].to_vector();
    double scale = 0;
    for (double v : vb) scale = std::max(scale, std::abs(v));
    double worst = 0;
    for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
    CAPTURE(scale);
    CHECK(worst <= rel * scale);
  }
}

// Second order through the chain: the loss's gradients of the leaves
// `first` (with their graph), then the gradients of every leaf of the sum of
// their squares; both as float64.
std::vector<Tensor> residual_chain_second(Dtype d, const std::vector<size_t>& first) {
  Chain c = residual_chain_of(d);
  std::vector<Tensor> wrt;
  for (size_t i : first) wrt.push_back(c.leaves[i]);
  GradOptions go;
  go.create_graph = true;
  const std::vector<Tensor> g1 = grad({c.loss}, wrt, {}, go);
  Tensor z = sum(mul(g1[0], g1[0]));
  for (size_t i = 1; i < g1.size(); ++i) z = add(z, sum(mul(g1[i], g1[i])));
  z.backward();
  std::vector<Tensor> out;
  for (const Tensor& g : g1) out.push_back(g.detach().to(f64));
  for (const Tensor& t : c.leaves) out.push_back(t.grad().defined() ? t.grad().to(f64) : zeros(t.shape(), f64));
  return out;
}

// On oneDNN every block's result stayed in the primitives' layout (nChw16c
// on AVX-512, nChw8c on AVX2) when `keep`; switched off, none did.
void check_kept_blocked(const std::vector<int>& blocked, bool keep) {
  for (const int b : blocked) {
    if (keep && engine::conv_available())
      CHECK((b == 8 || b == 16));
    else
      CHECK(b == 0);
  }
}

}  // namespace

TEST_CASE("results kept blocked between layers: a residual chain in float32 equals float64, values and gradients") {
  xgt::ThreadsGuard threads;
  for (const bool keep : {true, false})
    for (const int t : {1, 2}) {
      CAPTURE(keep);
      CAPTURE(t);
      engine::set_blocked_activations(keep);
      set_num_threads(t);
      std::vector<int> blocked;
      const std::vector<Tensor> got = residual_chain(f32, &blocked);
      xgt::check_close(got, residual_chain(f64), 1e-4);
      check_kept_blocked(blocked, keep);
    }
  engine::set_blocked_activations(true);
  // Second order through blocked results and the float32 batch norm, with
  // the first gradients of the input, of a kernel and a batch norm's scale,
  // or of every leaf.
  for (const int t : {1, 2}) for (const bool keep : {true, false}) {
    engine::set_blocked_activations(keep);
    CAPTURE(keep);
    set_num_threads(t);
    for (const std::vector<size_t>& first : {std::vector<size_t>{0}, std::vector<size_t>{2, 6},
                                             std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
      CAPTURE(t);
      CAPTURE(first.size());
      check_close_to_scale(residual_chain_second(f32, first), residual_chain_second(f64, first), 1e-5);
    }
  }
  engine::set_blocked_activations(true);
  // A blocked result times a scalar of more dimensions broadcasts to 5-D:
  // that result is row-major, with the blocked values read as NCHW.
  const Tensor y = conv2d(leaf({2, 3, 5, 5}, 7).detach().to(f32), leaf({16, 3, 3, 3}, 8).detach().to(f32));
  const Tensor y5 = mul(y, full({1, 1, 1, 1, 1}, 2.0));
  CHECK(y5.shape() == Shape{1, 2, 16, 3, 3});
  const auto a = y.to_vector(), b = y5.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == 2 * a[i]);
  // An empty batch asks no layout of the primitives.
  Tensor e = zeros({0, 16, 5, 5}).requires_grad_(), w = leaf({16, 16, 3, 3}, 9).detach().to(f32).requires_grad_();
  Tensor ye = conv2d(e, w, Tensor(), window({1, 1}, {1, 1}, {1, 1}));
  CHECK(ye.shape() == Shape{0, 16, 5, 5});
  sum(ye).backward();
  CHECK(e.grad().shape() == Shape{0, 16, 5, 5});
  CHECK(w.grad().to_vector() == std::vector<double>(16 * 16 * 9, 0.0));
}

TEST_CASE("results kept blocked between layers under Autocast(bf16): the residual chain equals its plain run") {
  // bf16 convolutions keep their float32 results blocked as float32 ones do,
  // and read blocked inputs and gradients through bf16 copies made in that
  // layout. The chain kept blocked agrees with itself run plain, whose
  // single convolutions the test above holds to float64 (a channel
  // misplaced by a layout would be off by the values' own scale). Its
  // gradients are 5-15% of their scale from float64's either way: bf16's
  // rounding, through three training-mode batch norms' cancellations.
  xgt::Bf16Products on;
  xgt::ThreadsGuard threads;
  for (const int t : {1, 2}) {
    set_num_threads(t);
    CAPTURE(t);
    std::vector<std::vector<Tensor>> runs;
    for (const bool keep : {true, false}) {
      CAPTURE(keep);
      engine::set_blocked_activations(keep);
      std::vector<int> blocked;
      runs.push_back(residual_chain(f32, &blocked, true));
      check_kept_blocked(blocked, keep);
    }
    engine::set_blocked_activations(true);
    const std::vector<Tensor> exact = residual_chain(f64);
    // Results within bf16's rounding of float64's; kept blocked or not, the
    // same bf16 products in another order, and a rounding flipped here and
    // there (measured: 3e-4 of the scale at most).
    const std::vector<Tensor> outputs(runs[0].begin(), runs[0].begin() + 3);
    check_close_to_scale(outputs, std::vector<Tensor>(exact.begin(), exact.begin() + 3), 1e-2);
    check_close_to_scale(runs[0], runs[1], 2e-3);
  }
}

TEST_CASE("a blocked result's bf16 copy is shared only by ops that read the same layout") {
  // A convolution saves a bf16 copy of its blocked input in the blocked
  // layout; a product reading the same tensor row-major must not take it.
  xgt::Bf16Products on;
  Autocast scope(xg::bf16);
  const Tensor x = leaf({2, 3, 6, 6}, 50).detach().to(f32), w = leaf({16, 3, 3, 3}, 51).detach().to(f32);
  const Tensor w2 = leaf({16, 16, 3, 3}, 52).detach().to(f32).requires_grad_();
  const Tensor proj = leaf({5, 4}, 53).detach().to(f32).requires_grad_();
  const Tensor h = conv2d(x, w);  // (2,16,4,4), blocked where oneDNN runs it
  CHECK((detail::channel_block(h) != 0) == engine::conv_available());
  const Tensor y = conv2d(h, w2);                     // saves h's bf16 copy as h is stored
  const Tensor z = linear(h, proj);                   // reads h row-major
  const Tensor expected = linear(h.detach().clone(), proj);  // from a fresh row-major tensor
  CHECK(z.to_vector() == expected.to_vector());
  CHECK(y.shape() == Shape{2, 16, 2, 2});
}

TEST_CASE("batch norm on blocked values, 8 and 16 channels a block, equals it on row-major: values and gradients") {
  // Both block sizes run here whatever the CPU (oneDNN itself picks 16 only
  // with AVX-512): each has its own compiled lane loops. batch_norm_relu's
  // loops too, against the two ops it fuses; row-major (block 0) in every
  // build, the blocks where a build keeps them (oneDNN's).
  const std::vector<int> blocks = engine::conv_available() ? std::vector<int>{0, 8, 16} : std::vector<int>{0};
  const Tensor plain = leaf({3, 32, 5, 4}, 63).detach().to(f32);
  const Tensor w = leaf({32}, 64).detach().to(f32).requires_grad_(), b = leaf({32}, 65).detach().to(f32).requires_grad_();
  for (const bool training : {true, false}) {
    for (const bool fused_relu : {false, true}) {
      auto f = [&](const std::vector<Tensor>& in) {
        return (fused_relu ? batch_norm_relu : batch_norm)(in[0], zeros({32}), ones({32}), in[1], in[2], training, 0.1,
                                                           1e-5, {});
      };
      auto composed = [&](const std::vector<Tensor>& in) {
        const Tensor y = batch_norm(in[0], zeros({32}), ones({32}), in[1], in[2], training);
        return fused_relu ? relu(y) : y;
      };
      const auto want = xgt::values_and_grads(composed, {plain.detach().requires_grad_(), w, b});
      const std::vector<double> y = want[0].to_vector();
      if (fused_relu) CHECK(std::count(y.begin(), y.end(), 0.0) > 100);  // the relu clamps some values
      for (const int block : blocks) {
        CAPTURE(block);
        CAPTURE(training);
        CAPTURE(fused_relu);
        const Tensor x = (block ? detail::blocked_copy(plain, block) : plain.detach().clone()).requires_grad_();
        REQUIRE(detail::channel_block(x) == block);
        xgt::check_close(xgt::values_and_grads(f, {x, w, b}), want, 1e-5);
      }
    }
  }
}

TEST_CASE("backward's in-place sum of gradients reads blocked ones as stored, and leaves mixed layouts to add") {
  if (!engine::conv_available()) return;  // the OpenBLAS build keeps no blocked layout
  const Tensor a = leaf({2, 16, 3, 3}, 66).detach().to(f32), b = leaf({2, 16, 3, 3}, 67).detach().to(f32);
  const std::vector<double> want = add(a, b).to_vector();
  NoGradGuard backward_mode;  // as during backward(): nothing records the sum
  for (const int block : {8, 16}) {
    CAPTURE(block);
    Tensor acc = detail::blocked_copy(a, block);
    REQUIRE(detail::add_in_place(acc, detail::blocked_copy(b, block)));
    CHECK(detail::channel_block(acc) == block);
    CHECK(acc.to_vector() == want);
    Tensor mixed = detail::blocked_copy(a, block);
    CHECK_FALSE(detail::add_in_place(mixed, b));  // b row-major: left to add(), which converts
    CHECK(mixed.to_vector() == a.to_vector());
    Tensor plain = a.clone();
    CHECK_FALSE(detail::add_in_place(plain, detail::blocked_copy(b, block)));
    CHECK(plain.to_vector() == a.to_vector());
  }
}

TEST_CASE("a view of blocked values outlives their conversion to row-major by another reader") {
  if (!engine::conv_available()) return;  // the OpenBLAS build keeps no blocked layout
  // A kernel reads a blocked tensor through detail::stored_view; another
  // thread's plain read (data<T>()) converts the tensor meanwhile. The
  // view's storage must stay out of the allocator's cache until it ends:
  // tensors of its size made after the conversion must not be given it.
  const Tensor plain = leaf({2, 16, 3, 3}, 60).detach().to(f32);
  Tensor t = detail::blocked_copy(plain, 8);
  const detail::StoredView v = detail::stored_view(t);
  REQUIRE(v.block == 8);
  const std::vector<double> blocked(v.p, v.p + t.numel());
  CHECK(blocked != plain.to_vector());  // nChw8c, not row-major
  CHECK(t.to_vector() == plain.to_vector());  // converts t
  CHECK(detail::stored_view(t).block == 0);
  std::vector<Tensor> others;
  for (int i = 0; i < 8; ++i) others.push_back(full(plain.shape(), -1.0));
  CHECK(std::vector<double>(v.p, v.p + t.numel()) == blocked);
}

TEST_CASE("ops that read a blocked tensor as stored agree with row-major while another thread converts it") {
  if (!engine::conv_available()) return;  // the OpenBLAS build keeps no blocked layout
  // Elementwise ops, batch norm and a convolution read the blocked layout as
  // it is; a thread converting the same tensor to row-major at the same time
  // must change none of their results (each layout and pointer read
  // together, and the storage kept until the op is done).
  const Tensor plain = leaf({2, 16, 5, 5}, 61).detach().to(f32), w = leaf({8, 16, 3, 3}, 62).detach().to(f32);
  const Tensor mean = zeros({16}), var = ones({16});
  auto ops = [&](const Tensor& x) {
    return std::vector<Tensor>{relu(x), add(x, x), mul(x, scalar(2.0)), batch_norm(x, mean, var, Tensor(), Tensor(), true),
                               conv2d(x, w)};
  };
  // The two layouts sum in different orders: an op gives one of two results,
  // as it finds the tensor blocked or already converted.
  auto values = [&](const Tensor& x) {
    std::vector<std::vector<double>> v;
    for (const Tensor& r : ops(x)) v.push_back(r.to_vector());
    return v;
  };
  const auto from_plain = values(plain), from_blocked = values(detail::blocked_copy(plain, 8));
  for (int round = 0; round < 200; ++round) {
    Tensor t = detail::blocked_copy(plain, 8);
    std::thread reader([t]() mutable { (void)t.data<float>(); });
    const auto got = values(t);
    reader.join();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("round " << round << ", op " << i);
      REQUIRE((got[i] == from_blocked[i] || got[i] == from_plain[i]));
    }
  }
}

TEST_CASE("the other windows' bf16 paths under Autocast: conv1d, conv3d and the transposed convolutions") {
  // conv1d and conv3d run conv2d's bf16 primitives, the transposed ones the
  // bf16 products: on operands exact in bf16 they equal float64 (float32
  // sums), and on others they differ from float32 by bf16's rounding.
  xgt::Bf16Products on;
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::tuple<const char*, Shape, Shape, Op>> cases{
      {"conv1d", {2, 4, 9}, {6, 2, 3},
       [](const Tensor& x, const Tensor& w) { return conv1d(x, w, Tensor(), Conv1dFuncOptions().padding(1).groups(2)); }},
      {"conv3d", {1, 2, 4, 5, 5}, {3, 2, 2, 3, 3},
       [](const Tensor& x, const Tensor& w) { return conv3d(x, w, Tensor(), Conv3dFuncOptions().stride({1, 2, 1})); }},
      {"conv_transpose1d", {2, 4, 6}, {4, 3, 3},
       [](const Tensor& x, const Tensor& w) {
         return conv_transpose1d(x, w, Tensor(), ConvTranspose1dFuncOptions().stride(2));
       }},
      {"conv_transpose2d", {1, 4, 5, 4}, {4, 3, 3, 2},
       [](const Tensor& x, const Tensor& w) {
         return conv_transpose2d(x, w, Tensor(), ConvTranspose2dFuncOptions().stride(2).padding(1));
       }},
      {"conv_transpose3d", {1, 2, 3, 4, 4}, {2, 3, 2, 2, 2},
       [](const Tensor& x, const Tensor& w) { return conv_transpose3d(x, w); }}};
  for (const auto& [name, xs, ws, op] : cases) {
    CAPTURE(name);
    const Tensor x = bf16_rounded(leaf(xs, 40)), w = bf16_rounded(leaf(ws, 41));
    Tensor y16;
    {
      Autocast scope(xg::bf16);
      y16 = op(x.to(f32), w.to(f32));
    }
    CHECK(y16.dtype() == f32);
    xgt::check_close({y16.to(f64)}, {op(x, w)}, 1e-5);
    // Operands not exact in bf16: rounded, so the result moves off float32's.
    const Tensor xr = leaf(xs, 42).to(f32), wr = leaf(ws, 43).to(f32);
    Tensor yr;
    {
      Autocast scope(xg::bf16);
      yr = op(xr, wr);
    }
    const double off = max(abs(yr - op(xr, wr))).item(), scale = max(abs(op(xr, wr))).item();
    CHECK(off > 1e-6 * scale);
    CHECK(off < 2e-2 * scale);
  }
}
