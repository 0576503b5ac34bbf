// Pooling: max_pool2d (and its indices), avg_pool2d and adaptive_avg_pool2d
// checked by float64 central differences to the second order (gradgradcheck
// with mixed partials), ties, float32 against float64, and the errors.
// tests/torch/pool_norm_parity compares them with PyTorch.
#include <cmath>

#include "autograd/xg.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;

namespace {

// A stride of {0, 0} is left unset: the kernel, as PyTorch's stride=None.
MaxPool2dOptions max_window(std::array<int64_t, 2> k, std::array<int64_t, 2> s, std::array<int64_t, 2> p,
                            std::array<int64_t, 2> d, bool ceil_mode) {
  MaxPool2dOptions o(k);
  if (s != std::array<int64_t, 2>{0, 0}) o.stride(s);
  return o.padding(p).dilation(d).ceil_mode(ceil_mode);
}

AvgPool2dOptions avg_window(std::array<int64_t, 2> k, std::array<int64_t, 2> s, std::array<int64_t, 2> p,
                            bool ceil_mode, bool count_include_pad) {
  AvgPool2dOptions o(k);
  if (s != std::array<int64_t, 2>{0, 0}) o.stride(s);
  return o.padding(p).ceil_mode(ceil_mode).count_include_pad(count_include_pad);
}

void check_first_and_second_order(const std::function<Tensor(const std::vector<Tensor>&)>& f, const Tensor& x,
                                  const Tensor& other) {
  // With `other` a second input, the first gradient is also taken with
  // respect to x alone and to `other` alone (mixed partials).
  XG_CHECK_GRAD(f, x, other);
  XG_CHECK_GRADGRAD(f, x, other);
}

}  // namespace

TEST_CASE("max_pool2d: gradients and gradients of gradients by finite differences, over windows") {
  for (const MaxPool2dOptions& o :
       {max_window({2, 2}, {0, 0}, {0, 0}, {1, 1}, false), max_window({3, 2}, {2, 1}, {1, 1}, {1, 1}, false),
        max_window({2, 3}, {1, 2}, {1, 0}, {2, 1}, true), max_window({3, 3}, {2, 2}, {1, 1}, {1, 1}, true)}) {
    Tensor x = leaf({2, 2, 5, 6}, 1), s = leaf({2}, 2);
    // Through tanh on both sides, so that the second order is not zero;
    // s scales the channels: a first gradient with respect to s alone.
    auto f = [&](const std::vector<Tensor>& in) {
      return tanh(max_pool2d(tanh(in[0] * reshape(in[1], {1, 2, 1, 1})), o));
    };
    check_first_and_second_order(f, x, s);
    auto plain = [&](const std::vector<Tensor>& in) { return max_pool2d(in[0], o); };
    XG_CHECK_GRAD(plain, x);
  }
}

TEST_CASE("max_pool2d: indices are each window's first arg-max in its plane, and the gradient goes there") {
  // One plane (1,1,3,4) with ties: 5 twice in the first window, 7 twice in the last.
  Tensor x = tensor({5, 5, 1, 7, 0, 2, 7, 3, 9, 9, 9, 9}, {1, 1, 3, 4}, f64).requires_grad_();
  const MaxPool2dResult r = max_pool2d_with_indices(x, max_window({2, 2}, {1, 2}, {0, 0}, {1, 1}, false));
  CHECK(r.values.shape() == Shape{1, 1, 2, 2});
  CHECK(r.indices.dtype() == i64);
  CHECK(r.values.to_vector() == std::vector<double>{5, 7, 9, 9});
  CHECK(r.indices.to_vector() == std::vector<double>{0, 3, 8, 10});
  sum(r.values * tensor({1, 2, 3, 4}, {1, 1, 2, 2}, f64)).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 0, 0, 2, 0, 0, 0, 0, 3, 0, 4, 0});
  // A padded window: the index counts in the unpadded plane.
  const MaxPool2dResult p = max_pool2d_with_indices(x.detach(), max_window({3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  CHECK(p.indices.to_vector() == std::vector<double>{0, 3, 8, 9});
}

TEST_CASE("avg_pool2d: gradients and gradients of gradients by finite differences, with and without the padding") {
  for (const AvgPool2dOptions& o :
       {avg_window({2, 2}, {0, 0}, {0, 0}, false, true), avg_window({3, 3}, {2, 2}, {1, 1}, true, true),
        avg_window({3, 3}, {2, 2}, {1, 1}, true, false), avg_window({2, 3}, {1, 2}, {1, 1}, false, false)}) {
    Tensor x = leaf({2, 2, 5, 6}, 3), s = leaf({2}, 4);
    auto f = [&](const std::vector<Tensor>& in) {
      return tanh(avg_pool2d(in[0] * reshape(in[1], {1, 2, 1, 1}), o));
    };
    check_first_and_second_order(f, x, s);
  }
  // ceil_mode adds a last window starting in the input's last row and
  // column and overhanging the padding: count_include_pad divides by its
  // part inside input + padding (2x2, as PyTorch), else by its one input.
  const Tensor ones6 = ones({1, 1, 6, 6}, f64);
  const Tensor y = avg_pool2d(ones6, avg_window({3, 3}, {2, 2}, {1, 1}, true, true));
  CHECK(y.shape() == Shape{1, 1, 4, 4});
  CHECK(y.at({0, 0, 0, 0}) == doctest::Approx(4.0 / 9));
  CHECK(y.at({0, 0, 1, 1}) == doctest::Approx(1.0));
  CHECK(y.at({0, 0, 3, 3}) == doctest::Approx(1.0 / 4));
  CHECK(y.at({0, 0, 0, 3}) == doctest::Approx(2.0 / 6));
  const Tensor z = avg_pool2d(ones6, avg_window({3, 3}, {2, 2}, {1, 1}, true, false));
  CHECK(z.to_vector() == std::vector<double>(16, 1.0));
}

TEST_CASE("adaptive_avg_pool2d: PyTorch's windows, gradients and gradients of gradients by finite differences") {
  for (const auto& [in, out] : std::vector<std::pair<Shape, std::array<int64_t, 2>>>{
           {{2, 2, 5, 7}, {3, 4}}, {{1, 3, 4, 4}, {2, 2}}, {{2, 1, 3, 5}, {5, 2}}, {{1, 2, 3, 3}, {1, 1}}}) {
    Tensor x = leaf(in, 5), s = leaf({in[1]}, 6);
    auto f = [&, c = in[1], out = out](const std::vector<Tensor>& v) {
      return tanh(adaptive_avg_pool2d(v[0] * reshape(v[1], {1, c, 1, 1}), out));
    };
    check_first_and_second_order(f, x, s);
  }
  // (1,1) is the mean of each plane; 5 rows into 3: [0,2), [1,4), [3,5).
  Tensor x = leaf({2, 3, 5, 4}, 7).detach();
  const auto whole = adaptive_avg_pool2d(x, {1, 1}).to_vector(), m = mean(x, {2, 3}).to_vector();
  for (size_t i = 0; i < m.size(); ++i) CHECK(whole[i] == doctest::Approx(m[i]).epsilon(1e-14));
  const Tensor rows = adaptive_avg_pool2d(x, {3, 4});
  CHECK(rows.at({1, 2, 1, 3}) == doctest::Approx((x.at({1, 2, 1, 3}) + x.at({1, 2, 2, 3}) + x.at({1, 2, 3, 3})) / 3));
}

TEST_CASE("pooling: float32 agrees with float64") {
  Tensor x = leaf({2, 3, 7, 6}, 8).detach();
  const auto close = [](const Tensor& a, const Tensor& b) {
    const auto u = a.to_vector(), v = b.to_vector();
    REQUIRE(u.size() == v.size());
    for (size_t i = 0; i < u.size(); ++i) CHECK(v[i] == doctest::Approx(u[i]).epsilon(1e-5));
  };
  const MaxPool2dOptions mo = max_window({3, 2}, {2, 2}, {1, 1}, {1, 2}, true);
  close(max_pool2d(x, mo), max_pool2d(x.to(f32), mo));
  CHECK(bit_equal(max_pool2d_with_indices(x, mo).indices, max_pool2d_with_indices(x.to(f32), mo).indices));
  const AvgPool2dOptions ao = avg_window({3, 3}, {2, 1}, {1, 1}, true, false);
  close(avg_pool2d(x, ao), avg_pool2d(x.to(f32), ao));
  close(adaptive_avg_pool2d(x, {4, 5}), adaptive_avg_pool2d(x.to(f32), {4, 5}));
}

TEST_CASE("pooling: bad inputs and windows are refused by name, with the accepted range") {
  Tensor x = leaf({1, 2, 6, 6}, 9);
  const MaxPool2dOptions k2 = max_window({2, 2}, {0, 0}, {0, 0}, {1, 1}, false);
  CHECK(XG_THROW_MESSAGE(max_pool2d(leaf({2, 6, 6}, 10), k2), ShapeError) ==
        "max_pool2d: expected an (N,C,H,W) input, got (2,6,6)");
  CHECK(XG_THROW_MESSAGE(max_pool2d(x, max_window({0, 2}, {0, 0}, {0, 0}, {1, 1}, false)), std::invalid_argument) ==
        "max_pool2d: kernel_size (0, 2): expected each at least 1");
  CHECK(XG_THROW_MESSAGE(max_pool2d(x, max_window({2, 2}, {-1, 1}, {0, 0}, {1, 1}, false)), std::invalid_argument) ==
        "max_pool2d: stride (-1, 1): expected each at least 1");
  CHECK(XG_THROW_MESSAGE(max_pool2d(x, max_window({2, 2}, {0, 0}, {0, 0}, {1, 0}, false)), std::invalid_argument) ==
        "max_pool2d: dilation (1, 0): expected each at least 1");
  CHECK(XG_THROW_MESSAGE(max_pool2d(x, max_window({3, 3}, {0, 0}, {2, 0}, {1, 1}, false)), std::invalid_argument) ==
        "max_pool2d: padding (2, 0): expected each from 0 to half the kernel (1, 1)");
  CHECK(XG_THROW_MESSAGE(max_pool2d(x, max_window({3, 3}, {0, 0}, {0, 0}, {3, 1}, false)), ShapeError) ==
        "max_pool2d: the padded input 6x6 is smaller than the dilated kernel 7x3");
  CHECK(XG_THROW_MESSAGE(max_pool2d(leaf({1, 1, 2, 2}, 11), max_window({2, 2}, {0, 0}, {1, 1}, {3, 1}, false)),
                         ShapeError) ==
        "max_pool2d: the window of output row 0 covers only padding (input 2, kernel 2, dilation 3, padding 1)");
  CHECK(XG_THROW_MESSAGE(avg_pool2d(x, avg_window({2, 5}, {0, 0}, {1, 3}, false, true)), std::invalid_argument) ==
        "avg_pool2d: padding (1, 3): expected each from 0 to half the kernel (1, 2)");
  CHECK(XG_THROW_MESSAGE(avg_pool2d(x, avg_window({7, 2}, {0, 0}, {0, 0}, false, true)), ShapeError) ==
        "avg_pool2d: the padded input 6x6 is smaller than the kernel 7x2");
  CHECK(XG_THROW_MESSAGE(adaptive_avg_pool2d(x, {0, 3}), std::invalid_argument) ==
        "adaptive_avg_pool2d: output_size (0, 3): expected each at least 1");
  CHECK(XG_THROW_MESSAGE(adaptive_avg_pool2d(leaf({6, 6}, 12), {2, 2}), ShapeError) ==
        "adaptive_avg_pool2d: expected an (N,C,H,W) input, got (6,6)");
  // ceil_mode lets a kernel overhang a small input, as in PyTorch.
  CHECK(max_pool2d(leaf({1, 1, 2, 2}, 13), max_window({3, 3}, {0, 0}, {0, 0}, {1, 1}, true)).shape() ==
        Shape{1, 1, 1, 1});
}

namespace {

// max_pool2d by its definition, one window at a time: each window's first
// maximum in row-major order (a NaN beating every number), as a plane index.
void naive_max_pool(const std::vector<double>& x, const Shape& s, const MaxPool2dOptions& o, const Shape& out,
                    std::vector<double>& values, std::vector<int64_t>& indices) {
  const int64_t H = s[2], W = s[3], Ho = out[2], Wo = out[3];
  for (int64_t p = 0; p < s[0] * s[1]; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t arg = -1;
        for (int64_t ki = 0; ki < o.kernel_size()[0]; ++ki)
          for (int64_t kj = 0; kj < o.kernel_size()[1]; ++kj) {
            const int64_t h = oh * o.stride()[0] - o.padding()[0] + ki * o.dilation()[0];
            const int64_t w = ow * o.stride()[1] - o.padding()[1] + kj * o.dilation()[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = x[p * H * W + h * W + w];
            const double b = arg < 0 ? 0 : x[p * H * W + arg];
            if (arg < 0 || (std::isnan(v) && !std::isnan(b)) || (!std::isnan(b) && v > b)) arg = h * W + w;
          }
        values.push_back(x[p * H * W + arg]);
        indices.push_back(arg);
      }
}

}  // namespace

TEST_CASE("max_pool2d: the float32 kernels (2x2, whole windows, windows at the edges) against the definition") {
  const int before = num_threads();
  struct Case {
    Shape shape;
    std::array<int64_t, 2> kernel, stride, padding, dilation;
  };
  const std::vector<Case> cases{{{2, 3, 8, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},    // the 2x2 kernel
                                {{1, 17, 7, 9}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},   // odd sides: the last row and column dropped
                                {{3, 2, 9, 7}, {3, 2}, {2, 1}, {0, 0}, {1, 1}},    // whole windows of other sizes
                                {{2, 2, 9, 9}, {2, 3}, {1, 2}, {0, 0}, {2, 1}},    // dilated
                                {{2, 5, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}}};   // padding: windows at the edges
  uint64_t seed = 60;
  for (const Case& k : cases) {
    const std::string shape = shape_str(k.shape);
    CAPTURE(shape);
    // Small integers: many ties (the first maximum must win), and some NaNs.
    std::vector<double> xs = (leaf(k.shape, ++seed, 0, 4)).to_vector();
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = i % 37 == 5 ? std::nan("") : std::floor(xs[i]);
    const Tensor x = from_vector(xs, k.shape, f32);
    const auto o = MaxPool2dOptions(k.kernel).stride(k.stride).padding(k.padding).dilation(k.dilation);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const MaxPool2dResult r = max_pool2d_with_indices(x, o);
      std::vector<double> values;
      std::vector<int64_t> indices;
      naive_max_pool(xs, k.shape, o, r.values.shape(), values, indices);
      const std::vector<double> got = r.values.to_vector(), got_i = r.indices.to_vector();
      REQUIRE(got.size() == values.size());
      for (size_t j = 0; j < got.size(); ++j) {
        CHECK(static_cast<int64_t>(got_i[j]) == indices[j]);
        CHECK((std::isnan(values[j]) ? std::isnan(got[j]) : got[j] == values[j]));
      }
      // Backward: each output's gradient added at its window's arg-max.
      Tensor xr = x.clone().requires_grad_();
      const Tensor wy = leaf(r.values.shape(), seed + 100).detach().to(f32);
      sum(max_pool2d(xr, o) * wy).backward();
      const std::vector<double> w = wy.to_vector(), dx = xr.grad().to_vector();
      std::vector<double> expect(xs.size(), 0.0);
      const int64_t plane = k.shape[2] * k.shape[3], outs = r.values.size(2) * r.values.size(3);
      for (size_t j = 0; j < w.size(); ++j) expect[j / outs * plane + indices[j]] += w[j];
      for (size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == doctest::Approx(expect[i]).epsilon(1e-6));
    }
  }
  set_num_threads(before);
}
