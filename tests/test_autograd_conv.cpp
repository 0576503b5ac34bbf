// Convolution: conv2d (groups, padding "same"), conv1d, conv_transpose2d,
// unfold2d and fold2d checked by float64 central
// differences to the second order (gradgradcheck with mixed partials), the
// adjoint identity of unfold and fold, float32 against float64, and the
// errors. tests/torch/conv_parity compares them with PyTorch.
#include "autograd/xg.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;

namespace {

// A window's stride, padding and dilation (the kernel comes from the weight).
Conv2dFuncOptions window(ExpandingArray<2> s, ExpandingArray<2> p, ExpandingArray<2> d) {
  return Conv2dFuncOptions().stride(s).padding(p.values()).dilation(d);
}

}  // namespace

TEST_CASE("conv2d: gradients and gradients of gradients of input, weight and bias, by finite differences") {
  for (const Conv2dFuncOptions& o : {window(1, 0, 1), window({2, 1}, {1, 2}, 1), window({1, 2}, {1, 0}, {2, 1})}) {
    Tensor x = leaf({2, 2, 5, 4}, 1), w = leaf({3, 2, 2, 3}, 2), b = leaf({3}, 3);
    auto f = [&](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], o); };
    const auto r1 = gradcheck(f, {x, w, b});
    CHECK_MESSAGE(r1.ok, r1.message);
    const auto r2 = gradgradcheck(f, {x, w, b});
    CHECK_MESSAGE(r2.ok, r2.message);
    auto no_bias = [&](const std::vector<Tensor>& in) { return tanh(conv2d(in[0], in[1], Tensor(), o)); };
    const auto r3 = gradgradcheck(no_bias, {x, w});
    CHECK_MESSAGE(r3.ok, r3.message);
  }
}

TEST_CASE("unfold2d and fold2d: each the other's adjoint, differentiable to the second order") {
  const auto o = UnfoldOptions({2, 3}).stride({2, 1}).padding(1).dilation({1, 2});
  const auto fo = FoldOptions({5, 6}, {2, 3}).stride({2, 1}).padding(1).dilation({1, 2});
  Tensor x = leaf({2, 3, 5, 6}, 4);
  const Tensor cols = unfold2d(x.detach(), o);
  Tensor c = leaf(cols.shape(), 5);
  // <unfold(x), c> = <x, fold(c)>: the adjoint identity, exactly up to rounding.
  const double lhs = sum(mul(unfold2d(x.detach(), o), c.detach())).item();
  const double rhs = sum(mul(x.detach(), fold2d(c.detach(), fo))).item();
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-13));
  auto u = [&](const std::vector<Tensor>& in) { return tanh(unfold2d(in[0], o)); };
  auto f = [&](const std::vector<Tensor>& in) { return tanh(fold2d(in[0], fo)); };
  for (const auto& r : {gradcheck(u, {x}), gradgradcheck(u, {x}), gradcheck(f, {c}), gradgradcheck(f, {c})})
    CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("conv2d: float32 agrees with float64, and bad shapes or windows are refused by name") {
  Tensor x = leaf({1, 2, 6, 6}, 6), w = leaf({4, 2, 3, 3}, 7);
  const auto o = window(2, 1, 1);
  const Tensor y64 = conv2d(x, w, Tensor(), o), y32 = conv2d(x.to(f32), w.to(f32), Tensor(), o);
  CHECK(y64.shape() == Shape{1, 4, 3, 3});
  const auto a = y64.to_vector(), b = y32.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5));
  CHECK(XG_THROW_MESSAGE(conv2d(x, leaf({4, 3, 3, 3}, 8)), ShapeError) ==
        "conv2d: expected an input (N,C,H,W) and a weight (O,C/groups,kh,kw) with groups 1, got (1,2,6,6) and "
        "(4,3,3,3)");
  CHECK(XG_THROW_MESSAGE(conv2d(x, w, leaf({3}, 9)), ShapeError) == "conv2d: expected a bias (4,), got (3,)");
  CHECK(XG_THROW_MESSAGE(conv2d(x, w, Tensor(), window({0, 1}, 0, 1)), std::invalid_argument) ==
        "conv2d: stride (0, 1): expected each at least 1");
  CHECK(XG_THROW_MESSAGE(conv2d(x, leaf({4, 2, 3, 3}, 10), Tensor(), window(1, 0, 4)), ShapeError) ==
        "conv2d: the padded input 6x6 is smaller than the dilated kernel 9x9");
  CHECK(XG_THROW_MESSAGE(unfold2d(leaf({2, 6, 6}, 11), UnfoldOptions({2, 3})), ShapeError) ==
        "unfold2d: expected an (N,C,H,W) input, got (2,6,6)");
  CHECK(XG_THROW_MESSAGE(fold2d(leaf({1, 8, 8}, 12), FoldOptions(6, 2).stride(2)), ShapeError) ==
        "fold2d: expected columns (1,8,9) for the output size (6, 6), got (1,8,8)");
  CHECK(XG_THROW_MESSAGE(fold2d(leaf({1, 5, 9}, 12), FoldOptions(6, 2).stride(2)), ShapeError) ==
        "fold2d: columns (1,5,9): expected a dimension 1 divisible by the kernel's 4 taps");
  CHECK(XG_THROW_MESSAGE(window({1, 2, 3}, 0, 1), std::invalid_argument) ==
        "a window size of 3 values: expected 2 (one per axis) or 1 (every axis)");
  CHECK(XG_THROW_MESSAGE(Conv2dFuncOptions().padding("full"), std::invalid_argument) ==
        "padding \"full\": expected \"same\", \"valid\" or sizes");
}

TEST_CASE("conv2d with groups and padding \"same\", conv1d: gradients of every order by finite differences") {
  const auto grouped = window({2, 1}, {1, 0}, 1).groups(2);
  const auto same = Conv2dFuncOptions().padding("same").dilation({1, 2});
  auto depthwise = same;
  depthwise.groups(4);
  const std::vector<std::pair<Conv2dFuncOptions, Shape>> cases{
      {grouped, {6, 2, 3, 2}}, {same, {3, 4, 2, 3}}, {depthwise, {4, 1, 3, 2}}};
  for (const auto& [o, wshape] : cases) {
    Tensor x = leaf({2, 4, 5, 4}, 13), w = leaf(wshape, 14), b = leaf({wshape[0]}, 15);
    auto f = [&](const std::vector<Tensor>& in) { return tanh(conv2d(in[0], in[1], in[2], o)); };
    for (const auto& r : {gradcheck(f, {x, w, b}), gradgradcheck(f, {x, w, b})}) CHECK_MESSAGE(r.ok, r.message);
  }
  // "same" keeps the size, with an even kernel too (its odd pad at the end).
  CHECK(conv2d(leaf({1, 4, 5, 4}, 16), leaf({3, 4, 2, 3}, 17), Tensor(), same).shape() == Shape{1, 3, 5, 4});
  const auto o1 = Conv1dFuncOptions().stride(2).padding(1).dilation(2).groups(2);
  Tensor x1 = leaf({2, 4, 9}, 18), w1 = leaf({2, 2, 3}, 19), b1 = leaf({2}, 20);
  auto f1 = [&](const std::vector<Tensor>& in) { return tanh(conv1d(in[0], in[1], in[2], o1)); };
  for (const auto& r : {gradcheck(f1, {x1, w1, b1}), gradgradcheck(f1, {x1, w1, b1})}) CHECK_MESSAGE(r.ok, r.message);
  CHECK(conv1d(x1, w1, b1, o1).shape() == Shape{2, 2, 4});
}

TEST_CASE("conv_transpose2d: the adjoint of conv2d in its input, differentiable to every order") {
  const auto t =
      ConvTranspose2dFuncOptions().stride({2, 1}).padding({1, 0}).output_padding({1, 0}).dilation({1, 2}).groups(2);
  Tensor x = leaf({2, 4, 3, 3}, 21), w = leaf({4, 3, 2, 2}, 22), b = leaf({6}, 23);
  const Tensor y = conv_transpose2d(x.detach(), w.detach(), Tensor(), t);
  CHECK(y.shape() == Shape{2, 6, 5, 5});
  // <conv_transpose2d(x, w), z> = <x, conv2d(z, w)> with the same window.
  const auto c = window(t.stride(), t.padding(), t.dilation()).groups(t.groups());
  const Tensor z = leaf(y.shape(), 24).detach();
  const double lhs = sum(mul(y, z)).item(), rhs = sum(mul(x.detach(), conv2d(z, w.detach(), Tensor(), c))).item();
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-13));
  auto f = [&](const std::vector<Tensor>& in) { return tanh(conv_transpose2d(in[0], in[1], in[2], t)); };
  for (const auto& r : {gradcheck(f, {x, w, b}), gradgradcheck(f, {x, w, b})}) CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("conv1d, grouped and transposed convolutions refuse bad shapes and options by name") {
  Tensor x = leaf({1, 4, 6, 6}, 25);
  CHECK(XG_THROW_MESSAGE(conv2d(x, leaf({6, 2, 3, 3}, 26), Tensor(), Conv2dFuncOptions().groups(3)), ShapeError) ==
        "conv2d: expected an input (N,C,H,W) and a weight (O,C/groups,kh,kw) with groups 3, got (1,4,6,6) and "
        "(6,2,3,3)");
  CHECK(XG_THROW_MESSAGE(conv2d(x, leaf({5, 2, 3, 3}, 27), Tensor(), Conv2dFuncOptions().groups(2)),
                         std::invalid_argument) ==
        "conv2d: groups 2 must be at least 1 and divide both the input channels (4) and the output channels (5)");
  const auto same = Conv2dFuncOptions().padding("same").stride(2);
  CHECK(XG_THROW_MESSAGE(conv2d(x, leaf({2, 4, 3, 3}, 28), Tensor(), same), std::invalid_argument) ==
        "conv2d: padding \"same\" needs stride 1, got stride (2, 2)");
  CHECK(XG_THROW_MESSAGE(conv1d(x, leaf({2, 4, 3}, 29)), ShapeError) ==
        "conv1d: expected an input (N,C,L) and a weight (O,C/groups,k), got (1,4,6,6) and (2,4,3)");
  auto t = ConvTranspose2dFuncOptions().stride(2).output_padding({2, 0});
  CHECK(XG_THROW_MESSAGE(conv_transpose2d(x, leaf({4, 2, 3, 3}, 30), Tensor(), t), std::invalid_argument) ==
        "conv_transpose2d: output_padding (2, 0): expected each below the stride (2, 2) or the dilation (1, 1)");
  // below the dilation, as PyTorch allows: rows no window reaches, zeros (and the bias)
  t.dilation({3, 1});
  const Tensor w3 = leaf({4, 2, 3, 3}, 32);
  const Tensor y3 = conv_transpose2d(x, w3, Tensor(), t);
  CHECK(y3.shape() == Shape{1, 2, (6 - 1) * 2 + 3 * 2 + 2 + 1, (6 - 1) * 2 + 2 + 1});
  CHECK(max(abs(slice(y3, 2, -2, 100))).item() == 0.0);
  CHECK(XG_THROW_MESSAGE(conv_transpose2d(x, leaf({3, 2, 3, 3}, 31)), ShapeError) ==
        "conv_transpose2d: expected an input (N,C,H,W) and a weight (C,O/groups,kh,kw) with the same C, got "
        "(1,4,6,6) and (3,2,3,3)");
  const auto p = ConvTranspose2dFuncOptions().padding({0, 5});
  CHECK(XG_THROW_MESSAGE(conv_transpose2d(x, leaf({4, 2, 3, 3}, 32), Tensor(), p), ShapeError) ==
        "conv_transpose2d: the output size 8x-2 is below 1 (padding (0, 5) too large for the input 6x6)");
  CHECK(XG_THROW_MESSAGE(conv_transpose1d(leaf({1, 4, 6}, 35), leaf({4, 2, 3}, 36), Tensor(),
                                          ConvTranspose1dFuncOptions().stride(0)),
                         std::invalid_argument) == "conv_transpose1d: stride 0: expected each at least 1");
  CHECK(XG_THROW_MESSAGE(conv_transpose2d(x, leaf({4, 2, 3, 3}, 33), leaf({3}, 34)), ShapeError) ==
        "conv_transpose2d: expected a bias (2,), got (3,)");
}
