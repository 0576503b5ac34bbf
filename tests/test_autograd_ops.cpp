// Finite-difference gradient tests (float64) for every op, with broadcasting,
// size-1 dimensions, negative axes, keepdims and non-square shapes.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/detail/kernels.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;
using V = std::vector<Tensor>;

TEST_CASE("ops: gradients of broadcasting binary ops") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 4}, {3, 1}}, {{4, 1}, {1, 5}}, {{}, {2, 3}}, {{2, 3}, {1}}};
  for (const auto& [sa, sb] : cases) {
    CAPTURE(shape_str(sa));
    CAPTURE(shape_str(sb));
    Tensor a = leaf(sa, 1), b = leaf(sb, 2);
    Tensor bp = leaf(sb, 3, 0.5, 2.0), ap = leaf(sa, 4, 0.5, 2.0);
    XG_CHECK_GRAD([](const V& x) { return add(x[0], x[1]); }, a, b);
    XG_CHECK_GRAD([](const V& x) { return sub(x[0], x[1]); }, a, b);
    XG_CHECK_GRAD([](const V& x) { return mul(x[0], x[1]); }, a, b);
    XG_CHECK_GRAD([](const V& x) { return div(x[0], x[1]); }, a, bp);
    XG_CHECK_GRAD([](const V& x) { return pow(x[0], x[1]); }, ap, b);
    XG_CHECK_GRAD([](const V& x) { return maximum(x[0], x[1]); }, a, b);
  }
}

TEST_CASE("ops: gradients of scalar overloads") {
  Tensor a = leaf({3, 2}, 5, 0.5, 2.0);
  XG_CHECK_GRAD([](const V& x) { return x[0] + 2.0; }, a);
  XG_CHECK_GRAD([](const V& x) { return 2.0 - x[0]; }, a);
  XG_CHECK_GRAD([](const V& x) { return x[0] * -3.0; }, a);
  XG_CHECK_GRAD([](const V& x) { return x[0] / 4.0; }, a);
  XG_CHECK_GRAD([](const V& x) { return 1.5 / x[0]; }, a);
  XG_CHECK_GRAD([](const V& x) { return pow(x[0], 2.5); }, a);
  XG_CHECK_GRAD([](const V& x) { return -x[0]; }, a);
}

TEST_CASE("ops: gradients of unary ops") {
  Tensor a = leaf({3, 4}, 6);
  Tensor pos = leaf({3, 4}, 7, 0.2, 3.0);
  XG_CHECK_GRAD([](const V& x) { return neg(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return exp(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return log(x[0]); }, pos);
  XG_CHECK_GRAD([](const V& x) { return sqrt(x[0]); }, pos);
  XG_CHECK_GRAD([](const V& x) { return abs(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return relu(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return gelu(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return tanh(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return sigmoid(x[0]); }, a);
  XG_CHECK_GRAD([](const V& x) { return clamp(x[0], -1.0, 0.5); }, a);
}

TEST_CASE("ops: gradients of reductions over any axes") {
  Tensor a = leaf({2, 3, 4}, 8);
  const std::vector<std::vector<int64_t>> axes_list = {{}, {0}, {-1}, {1}, {0, 2}, {-3, -2}, {0, 1, 2}};
  for (const auto& axes : axes_list)
    for (bool keep : {false, true}) {
      CAPTURE(axes.size());
      CAPTURE(keep);
      XG_CHECK_GRAD([&](const V& x) { return sum(x[0], axes, keep); }, a);
      XG_CHECK_GRAD([&](const V& x) { return mean(x[0], axes, keep); }, a);
      XG_CHECK_GRAD([&](const V& x) { return max(x[0], axes, keep); }, a);
      XG_CHECK_GRAD([&](const V& x) { return var(x[0], axes, 0, keep); }, a);
      XG_CHECK_GRAD([&](const V& x) { return var(x[0], axes, 1, keep); }, a);
    }
}

TEST_CASE("ops: a float32 sum is the float64 sum of its terms, rounded once") {
  // 20,000 terms an output: summed in float32 they would drift by many
  // roundings (the last axis, a leading axis, two axes apart: each of
  // sum's loops)
  std::vector<float> v(160000);
  uint32_t state = 12345;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = static_cast<float>(state >> 8) / 16777216.0f;  // [0, 1)
  }
  struct Case { Shape shape; std::vector<int64_t> axes; };
  for (const Case& c : {Case{{8, 20000}, {1}}, Case{{20000, 8}, {0}}, Case{{100, 8, 200}, {0, 2}}}) {
    CAPTURE(shape_str(c.shape));
    const Tensor x = from_vector(v, c.shape);
    const std::vector<double> got = sum(x, c.axes).to_vector(), want = sum(x.to(f64), c.axes).to_vector();
    REQUIRE(got.size() == 8);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<double>(static_cast<float>(want[i])));
  }
}

TEST_CASE("ops: interpolate along a long axis in chunks, and an unchanged axis left as it is") {
  // 200 -> 600 holds more weights than one matrix may (kChunkWeights), so
  // the outputs go in chunks; each is the line between its two neighbours
  std::vector<double> v(200);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i * i) / 100.0;
  const Tensor x = from_vector(v, {1, 1, 200}, f64);
  for (bool corners : {false, true}) {
    CAPTURE(corners);
    const std::vector<double> y =
        interpolate(x, InterpolateOptions().size({600}).mode("linear").align_corners(corners)).to_vector();
    REQUIRE(y.size() == 600);
    double worst = 0;
    for (int64_t o = 0; o < 600; ++o) {
      const double src = corners ? o * (199.0 / 599.0) : std::max((o + 0.5) / 3.0 - 0.5, 0.0);
      const int64_t i0 = static_cast<int64_t>(src), i1 = std::min<int64_t>(i0 + 1, 199);
      worst = std::max(worst, std::fabs(y[o] - (v[i0] + (src - i0) * (v[i1] - v[i0]))));
    }
    CHECK(worst < 1e-12);
  }
  // (3, 2) -> (3, 4): the rows keep their size, and an inf in the middle row
  // stays in its row (as PyTorch's bilinear kernel), not 0 * inf elsewhere
  Tensor img = zeros({1, 1, 3, 2}, f64);
  img.set({0, 0, 1, 0}, std::numeric_limits<double>::infinity());
  const Tensor up = interpolate(img, InterpolateOptions().size({3, 4}).mode("bilinear"));
  for (int64_t r : {0, 2})
    for (int64_t c = 0; c < 4; ++c) CHECK(up.at({0, 0, r, c}) == 0.0);
}

TEST_CASE("ops: gradients of shape ops") {
  Tensor a = leaf({2, 3, 4}, 9);
  XG_CHECK_GRAD([](const V& x) { return reshape(x[0], {4, -1}); }, a);
  XG_CHECK_GRAD([](const V& x) { return permute(x[0], {2, 0, 1}); }, a);
  XG_CHECK_GRAD([](const V& x) { return transpose(x[0], -1, 0); }, a);
  XG_CHECK_GRAD([](const V& x) { return slice(x[0], 2, 1, 4, 2); }, a);
  XG_CHECK_GRAD([](const V& x) { return slice(x[0], -2, -2, 100); }, a);
  XG_CHECK_GRAD([](const V& x) { return unsqueeze(x[0], -1); }, a);
  XG_CHECK_GRAD([](const V& x) { return squeeze(unsqueeze(x[0], 1), 1); }, a);
  XG_CHECK_GRAD([](const V& x) { return broadcast_to(x[0], {5, 2, 3, 4}); }, a);
  Tensor c = leaf({2, 1, 4}, 10);
  XG_CHECK_GRAD([](const V& x) { return broadcast_to(x[0], {2, 3, 4}); }, c);
  Tensor b = leaf({2, 2, 4}, 11), d = leaf({2, 1, 4}, 12);
  XG_CHECK_GRAD([](const V& x) { return concat({x[0], x[1], x[2]}, 1); }, a, b, d);
  Tensor e = leaf({2, 3, 4}, 13);
  XG_CHECK_GRAD([](const V& x) { return stack({x[0], x[1]}, 0); }, a, e);
  XG_CHECK_GRAD([](const V& x) { return stack({x[0], x[1]}, -1); }, a, e);
  XG_CHECK_GRAD([](const V& x) {
    auto parts = split(x[0], {1, 3}, -1);
    return parts[0] * 2.0 + sum(parts[1], {-1}, true);
  }, a);
  XG_CHECK_GRAD([](const V& x) {
    auto parts = chunk(x[0], 2, 2);
    return parts[0] * parts[1];
  }, a);
}

TEST_CASE("ops: gradients of matmul and linear") {
  XG_CHECK_GRAD([](const V& x) { return matmul(x[0], x[1]); }, leaf({2, 3}, 14), leaf({3, 5}, 15));
  XG_CHECK_GRAD([](const V& x) { return matmul(x[0], x[1]); }, leaf({2, 3, 4}, 16), leaf({2, 4, 5}, 17));
  XG_CHECK_GRAD([](const V& x) { return matmul(x[0], x[1]); }, leaf({3, 4}, 18), leaf({2, 4, 5}, 19));
  XG_CHECK_GRAD([](const V& x) { return matmul(x[0], x[1]); }, leaf({2, 1, 3, 4}, 20), leaf({3, 4, 2}, 21));
  XG_CHECK_GRAD([](const V& x) { return matmul(x[0], x[1]); }, leaf({1, 1}, 22), leaf({1, 3}, 23));
  XG_CHECK_GRAD([](const V& x) { return linear(x[0], x[1], x[2]); }, leaf({2, 3, 4}, 24), leaf({5, 4}, 25),
                leaf({5}, 26));
  XG_CHECK_GRAD([](const V& x) { return linear(x[0], x[1]); }, leaf({3, 4}, 27), leaf({2, 4}, 28));
}

TEST_CASE("ops: gradients of indexing ops") {
  std::vector<int64_t> ids = {1, 4, 1, 0, 2, 4};
  XG_CHECK_GRAD([&](const V& x) { return gather_rows(x[0], ids, {2, 3}); }, leaf({5, 3}, 29));
  Tensor cond = tensor({1, 0, 0, 1, 1, 0}, {2, 3}, f64);
  XG_CHECK_GRAD([&](const V& x) { return where(cond, x[0], x[1]); }, leaf({2, 3}, 30), leaf({3}, 31));
  Tensor mask = tensor({0, 1, 0}, {1, 3}, f64);
  XG_CHECK_GRAD([&](const V& x) { return masked_fill(x[0], mask, -7.0); }, leaf({2, 3}, 32));
}

TEST_CASE("ops: gradients of fused ops") {
  Tensor a = leaf({3, 4, 5}, 33);
  for (int64_t axis : {0, 1, -1}) {
    CAPTURE(axis);
    XG_CHECK_GRAD([&](const V& x) { return softmax(x[0], axis); }, a);
    XG_CHECK_GRAD([&](const V& x) { return log_softmax(x[0], axis); }, a);
  }
  XG_CHECK_GRAD([](const V& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }, leaf({2, 3, 6}, 34), leaf({6}, 35),
                leaf({6}, 36));
  XG_CHECK_GRAD([](const V& x) { return layer_norm(x[0], Tensor(), Tensor(), 1e-5); }, leaf({4, 7}, 37));
  XG_CHECK_GRAD([](const V& x) { return add_layer_norm(x[0], x[1], x[2], x[3], 1e-5); }, leaf({2, 3, 6}, 38),
                leaf({2, 3, 6}, 39), leaf({6}, 35), leaf({6}, 36));
  XG_CHECK_GRAD([](const V& x) { return add_layer_norm(x[0], x[1], Tensor(), Tensor(), 1e-5); }, leaf({4, 7}, 37),
                leaf({4, 7}, 40));
  std::vector<int64_t> targets = {2, -100, 0, 4, 1, 3};
  for (double smoothing : {0.0, 0.1}) {
    CAPTURE(smoothing);
    XG_CHECK_GRAD([&](const V& x) { return cross_entropy(reshape(x[0], {6, 5}), targets, CrossEntropyLossOptions().label_smoothing(smoothing));
    }, leaf({2, 3, 5}, 38));
  }
  XG_CHECK_GRAD([](const V& x) {
    Generator g(5);  // the same mask on every call
    return dropout(x[0], 0.3, true, g);
  }, leaf({4, 6}, 39));
}

TEST_CASE("ops: gradients of a custom op and of dtype conversion") {
  CustomOp cube{"cube",
                [](const V& in) { return in[0] * in[0] * in[0]; },
                [](const V& in, const Tensor&, const Tensor& g) { return V{g * in[0] * in[0] * 3.0}; }};
  XG_CHECK_GRAD([&](const V& x) { return apply(cube, {x[0]}); }, leaf({2, 3}, 40));
}

TEST_CASE("ops: the gradient through a dtype conversion is converted back, value for value") {
  // A finite-difference check cannot see through float32 rounding (step 1e-6
  // is 10 float32 ulps), so this compares with the exact answer: d/dx of
  // sum(x.to(f32) * w) is w, converted to x's dtype; through to(f64) and
  // back, twice that.
  Tensor x = leaf({4}, 41);
  Generator g(42);
  Tensor w = rand({4}, g, f32, 1.0, 2.0);
  sum(x.to(f32) * w).backward();
  REQUIRE(x.grad().dtype() == f64);
  for (int64_t i = 0; i < 4; ++i) CHECK(x.grad().at({i}) == static_cast<double>(static_cast<float>(w.at({i}))));
  Tensor y = tensor({1, 2, 3}, {3}, f32).requires_grad_();
  sum(y.to(f64) * 2.0 + y.to(f64).to(f32).to(f64)).backward();
  REQUIRE(y.grad().dtype() == f32);
  for (int64_t i = 0; i < 3; ++i) CHECK(y.grad().at({i}) == 3.0);
}

TEST_CASE("ops: forward values against hand-computed references") {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({10, 20, 30}, {3});
  CHECK((a + b).to_vector() == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK((a * tensor({2, 3}, {2, 1})).to_vector() == std::vector<double>{2, 4, 6, 12, 15, 18});
  Tensor m = matmul(a, tensor({1, 0, 0, 1, 1, 1}, {3, 2}));
  CHECK(m.shape() == Shape{2, 2});
  CHECK(m.to_vector() == std::vector<double>{4, 5, 10, 11});
  CHECK(sum(a, {0}).to_vector() == std::vector<double>{5, 7, 9});
  CHECK(sum(a, {-1}, true).shape() == Shape{2, 1});
  CHECK(max(a, {1}).to_vector() == std::vector<double>{3, 6});
  CHECK(mean(a).item() == doctest::Approx(3.5));
  CHECK(var(a, {1}).to_vector()[0] == doctest::Approx(1.0));  // unbiased by default, as torch.var
  CHECK(var(a, {1}, 0).to_vector()[0] == doctest::Approx(2.0 / 3.0));
  CHECK(xg::std(a, {1}).to_vector()[0] == doctest::Approx(1.0));
  CHECK(var(a, {1}, 1, true).shape() == Shape{a.size(0), 1});
  CHECK(argmax(tensor({0, 5, 2, 9, 1, 1}, {2, 3})) == std::vector<int64_t>{1, 0});
  CHECK(permute(a, {1, 0}).to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(slice(a, 1, 0, 3, 2).to_vector() == std::vector<double>{1, 3, 4, 6});
  CHECK(concat({a, a}, 0).shape() == Shape{4, 3});
  CHECK(gelu(tensor({1.0}, {1}, f64)).item() == doctest::Approx(0.8413447460685429));
  auto sm = softmax(tensor({1, 2, 3}, {3}, f64)).to_vector();
  const double z = std::exp(1) + std::exp(2) + std::exp(3);
  CHECK(sm[0] == doctest::Approx(std::exp(1) / z));
  CHECK(sm[2] == doctest::Approx(std::exp(3) / z));
  // cross-entropy of logits (0, log 3) with target 1: -log(3/4)
  Tensor ce = cross_entropy(tensor({0, std::log(3.0)}, {1, 2}, f64), {1});
  CHECK(ce.item() == doctest::Approx(-std::log(0.75)));
  // layer norm of (1,2,3): (-1,0,1)/sqrt(2/3)
  auto ln = layer_norm(tensor({1, 2, 3}, {1, 3}, f64), Tensor(), Tensor(), 0.0).to_vector();
  CHECK(ln[0] == doctest::Approx(-1 / std::sqrt(2.0 / 3.0)));
  CHECK(ln[1] == doctest::Approx(0.0));
  // softmax of a large-magnitude row stays finite
  auto big = softmax(tensor({1000, 0, -1000}, {3})).to_vector();
  CHECK(big[0] == doctest::Approx(1.0));
  CHECK(std::isfinite(log_softmax(tensor({1000, 0, -1000}, {3})).to_vector()[2]));
}

// Fused ops against their composed twins: values and gradients.
namespace {
void check_same(const std::function<Tensor(const V&)>& fused, const std::function<Tensor(const V&)>& composed,
                const V& inputs) {
  xgt::check_close(xgt::values_and_grads(fused, inputs), xgt::values_and_grads(composed, inputs), 1e-9);
}
}  // namespace

TEST_CASE("ops: fused ops equal their composed twins") {
  Tensor x = leaf({3, 5}, 50);
  check_same([](const V& v) { return softmax(v[0], -1); },
             [](const V& v) {
               Tensor e = exp(v[0] - max(v[0], {-1}, true).detach());
               return e / sum(e, {-1}, true);
             },
             {x});
  check_same([](const V& v) { return log_softmax(v[0], 0); }, [](const V& v) { return log(softmax(v[0], 0)); }, {x});
  Tensor w = leaf({5}, 51), b = leaf({5}, 52);
  check_same([](const V& v) { return layer_norm(v[0], v[1], v[2], 1e-5); },
             [](const V& v) {
               Tensor c = v[0] - mean(v[0], {-1}, true);
               return c / sqrt(var(v[0], {-1}, 0, true) + 1e-5) * v[1] + v[2];
             },
             {x, w, b});
  check_same([](const V& v) { return add_layer_norm(v[0], v[1], v[2], v[3], 1e-5); },
             [](const V& v) { return layer_norm(v[0] + v[1], v[2], v[3], 1e-5); }, {x, leaf({3, 5}, 53), w, b});
  {  // the same tensor as input and residual: layer_norm(2x), gradient 2x
    Tensor same = leaf({3, 5}, 54);
    check_same([](const V& v) { return add_layer_norm(v[0], v[0], v[1], v[2], 1e-5); },
               [](const V& v) { return layer_norm(v[0] * 2.0, v[1], v[2], 1e-5); }, {same, w, b});
  }
  CHECK(xgt::contains(XG_THROW_MESSAGE(add_layer_norm(x, zeros({5, 3}, f64), w, b), ShapeError),
                     "add_layer_norm: residual (5,3) must have the input's shape (3,5)"));
  std::vector<int64_t> t = {1, 4, -100};
  check_same([&](const V& v) { return cross_entropy(v[0], t, CrossEntropyLossOptions().label_smoothing(0.2)); },
             [&](const V& v) {
               Tensor lp = log_softmax(v[0], -1);
               Tensor q = zeros({3, 5}, f64);
               for (int r = 0; r < 2; ++r)
                 for (int j = 0; j < 5; ++j) q.set({r, j}, 0.2 / 5 + (j == t[r] ? 0.8 : 0.0));
               return -sum(lp * q) / 2.0;
             },
             {x});
  Tensor wl = leaf({4, 5}, 53), bl = leaf({4}, 54);
  check_same([](const V& v) { return linear(v[0], v[1], v[2]); },
             [](const V& v) { return matmul(v[0], transpose(v[1], 0, 1)) + v[2]; }, {x, wl, bl});
}

TEST_CASE("ops: float32 runs the same code paths as float64") {
  Generator g(3);
  Tensor a64 = randn({4, 6}, g, f64), w64 = randn({3, 6}, g, f64);
  Tensor a32 = a64.to(f32).requires_grad_(), w32 = w64.to(f32).requires_grad_();
  a64.requires_grad_();
  w64.requires_grad_();
  for (auto [a, w] : {std::pair{a64, w64}, std::pair{a32, w32}})
    sum(log_softmax(gelu(linear(layer_norm(a, Tensor(), Tensor()), w)), -1)).backward();
  CHECK(a32.grad().dtype() == f32);
  auto g64 = a64.grad().to_vector(), g32 = a32.grad().to_vector();
  for (size_t i = 0; i < g64.size(); ++i) CHECK(g32[i] == doctest::Approx(g64[i]).epsilon(1e-4).scale(1.0));
}

TEST_CASE("ops: relu_dropout equals dropout of relu, values and gradients") {
  Tensor x = leaf({6, 7}, 60);
  x.set({0, 0}, 0.0);  // relu's kink: gradient 0, as relu
  check_same(
      [](const V& v) {
        Generator g(3);
        return relu_dropout(v[0], 0.4, true, g);
      },
      [](const V& v) {
        Generator g(3);
        return dropout(relu(v[0]), 0.4, true, g);
      },
      {x});
  // Across words of its 64-bit mask (201 elements: 3 whole words and a part).
  check_same(
      [](const V& v) {
        Generator g(5);
        return relu_dropout(v[0], 0.25, true, g);
      },
      [](const V& v) {
        Generator g(5);
        return dropout(relu(v[0]), 0.25, true, g);
      },
      {leaf({3, 67}, 62)});
  {  // What it saves: one bit per element (in 64-bit words), not its output.
    Tensor big = leaf({3, 67}, 63);
    Generator gen(6);
    const int64_t before = memory_stats().current_bytes;
    Tensor out = relu_dropout(big, 0.25, true, gen);
    CHECK(memory_stats().current_bytes - before == 201 * 8 + 4 * 8);  // float64 output, 4 words
  }
  Generator g(3);
  CHECK(relu_dropout(x, 0.4, false, g).to_vector() == relu(x).to_vector());
  CHECK(relu_dropout(x, 0.0, true, g).to_vector() == relu(x).to_vector());
  CHECK(xgt::contains(XG_THROW_MESSAGE(relu_dropout(x, 1.0, true, g), ShapeError),
                     "relu_dropout: probability must be in [0, 1), got 1"));
  Tensor y = leaf({5, 4}, 61);
  XG_CHECK_GRAD(
      [](const V& v) {
        Generator g(4);
        return relu_dropout(v[0], 0.3, true, g);
      },
      y);
}

TEST_CASE("ops: dropout keeps the expected fraction, scales, and is the identity when off") {
  Generator g(7);
  Tensor x = ones({100000});
  Tensor y = dropout(x, 0.25, true, g);
  auto v = y.to_vector();
  int64_t kept = 0;
  for (double e : v) {
    if (e != 0) {
      ++kept;
      CHECK_EQ(e, doctest::Approx(1.0 / 0.75));
    }
  }
  const double frac = kept / 100000.0;
  CHECK(frac > 0.75 - 0.01);  // 1 sd is 0.0014: this bound is 7 sd
  CHECK(frac < 0.75 + 0.01);
  CHECK((dropout(x, 0.25, false, g).impl() == x.impl()));
  CHECK((dropout(x, 0.0, true, g).impl() == x.impl()));
  CHECK(sum(dropout(x, 1.0, true, g)).item() == 0.0);
}

TEST_CASE("float32 kernels: fast_tanhf and fast_sigmoidf against double, across the series/exp switch") {
  double worst_tanh = 0, worst_sig = 0;
  for (int i = 0; i <= 400000; ++i) {
    // Dense near 0 (the series, and tiny values where relative error shows),
    // then out to +-30 (saturation).
    const double u = -1.0 + 2.0 * i / 400000.0;
    const float x = static_cast<float>(u * u * u * 30.0);
    const double t = std::tanh(static_cast<double>(x)), s = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    if (t != 0) worst_tanh = std::max(worst_tanh, std::fabs(xg::detail::fast_tanhf(x) - t) / std::fabs(t));
    worst_sig = std::max(worst_sig, std::fabs(xg::detail::fast_sigmoidf(x) - s) / s);
  }
  CHECK(worst_tanh < 1e-6);
  CHECK(worst_sig < 1e-6);
  CHECK(xg::detail::fast_tanhf(0.0f) == 0.0f);
  CHECK(xg::detail::fast_tanhf(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(xg::detail::fast_tanhf(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(xg::detail::fast_tanhf(std::nanf(""))));
  CHECK(xg::detail::fast_sigmoidf(-1000.0f) == 0.0f);
  CHECK(xg::detail::fast_sigmoidf(1000.0f) == 1.0f);
  CHECK(std::isnan(xg::detail::fast_sigmoidf(std::nanf(""))));
}

TEST_CASE("float32 elementwise loops: the AVX-512 copy gives the plain copy's values, bit for bit") {
  // What map() and binary_kernel() run where the CPU has AVX-512; gelu's,
  // tanh's and sigmoid's kernels over a sweep with the specials.
  std::vector<float> x;
  for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {0.0f, -0.0f, 1e-30f, 90.0f, -90.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  const float* px = x.data();
  const auto gelu = [](float v) { return 0.5f * v * (1.0f + xg::detail::fast_erff(v * 0.70710678f)); };
  const auto tanh = [](float v) { return xg::detail::fast_tanhf(v); };
  const auto sigmoid = [](float v) { return xg::detail::fast_sigmoidf(v); };
  const auto check = [&](auto f) {
    std::vector<float> plain(x.size()), wide(x.size());
    float *pp = plain.data(), *pw = wide.data();
    xg::detail::for_range_plain(0, n, [=](int64_t i) { pp[i] = f(px[i]); });
    xg::detail::for_range_avx512(0, n, [=](int64_t i) { pw[i] = f(px[i]); });
    CHECK(std::memcmp(plain.data(), wide.data(), x.size() * sizeof(float)) == 0);
  };
  __builtin_cpu_init();
  if (!xg::detail::avx512_loops()) {  // the copy would not run here; the plain one is what runs
    CHECK(!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")));
    return;
  }
  check(gelu);
  check(tanh);
  check(sigmoid);
}

TEST_CASE("float32 softmax rows: softmax_exp_sum's values are softmax_exp's bit for bit at every length, its sum "
          "that of the values, and the one-pass short row gives the same") {
  // The AVX-512 row kernel (where the CPU has it) against the scalar
  // kernel: a sweep over [-100, 100] with the specials, cut into rows of
  // every length from 1 to 70 (every tail of a vector of 16), each row's
  // largest value subtracted as softmax does, and a row of NaN and infinities.
  std::vector<float> x;
  for (int i = -100000; i <= 100000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, 88.2f, 88.4f, -87.0f, -87.1f, -inf, -inf, -inf}) x.push_back(v);
  int64_t checked = 0, start = 0;
  for (int64_t len = 1; start + len <= static_cast<int64_t>(x.size()); len = len % 70 + 1) {
    const float* row = x.data() + start;
    const float mx = xg::detail::row_max(row, len);
    std::vector<float> y(static_cast<size_t>(len));
    const float total = xg::detail::softmax_exp_sum(row, y.data(), len, mx);
    double want_total = 0;
    for (int64_t k = 0; k < len; ++k) {
      const float want = xg::detail::softmax_exp(row[k] - mx);
      want_total += want;
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &y[static_cast<size_t>(k)], 4);
      if (a != b) FAIL_CHECK("row of " << len << " at " << start << ": value " << k << " is " << y[k] << ", want " << want);
      ++checked;
    }
    if (std::isnan(want_total))  // a row of -inf only: every value NaN, as the scalar kernel gives
      CHECK(std::isnan(total));
    else
      CHECK(std::fabs(total - want_total) <= 1e-6 * want_total);
    start += len;
  }
  CHECK(checked > 199900);  // all but the last partial row
  // The one-pass rows of attention's short rows (4 side by side, then one
  // at a time): the values of the passes above and the scaling, bit for
  // bit, and each row's max and 1 / sum, at every length they take.
  xg::Generator g(5);
  const int64_t rows = 6;
  for (int64_t len = 1; len <= 64; ++len) {
    std::vector<float> P(static_cast<size_t>(rows * len)), want(P.size()), want_stat(2 * rows), stat(2 * rows);
    for (float& r : P) r = static_cast<float>(4.0 * g.normal());
    if (len % 7 == 0) P[static_cast<size_t>(len / 2)] = -1e9f;  // a masked score
    for (int64_t i = 0; i < rows; ++i) {
      float* row = P.data() + i * len;
      float* w = want.data() + i * len;
      const float mx = xg::detail::row_max(row, len);
      const float inv = 1.0f / xg::detail::softmax_exp_sum(row, w, len, mx);
      for (int64_t k = 0; k < len; ++k) w[k] *= inv;
      want_stat[static_cast<size_t>(2 * i)] = mx;
      want_stat[static_cast<size_t>(2 * i + 1)] = inv;
    }
    if (!xg::detail::softmax_short_rows_in_place(P.data(), rows, len, stat.data())) {
      CHECK_FALSE(xg::detail::avx512_loops());  // it declines only where there is no AVX-512
      continue;
    }
    CAPTURE(len);
    CHECK(stat == want_stat);
    CHECK(std::memcmp(P.data(), want.data(), P.size() * sizeof(float)) == 0);
  }
  std::vector<float> long_row(65, 1.0f);
  CHECK_FALSE(xg::detail::softmax_short_rows_in_place(long_row.data(), 1, 65, nullptr));
  CHECK_FALSE(xg::detail::softmax_short_rows_in_place(long_row.data(), 1, 0, nullptr));
  std::vector<float> specials{1.0f, std::nanf(""), 2.0f, inf, -inf}, out(5);
  CHECK(std::isnan(xg::detail::softmax_exp_sum(specials.data(), out.data(), 5, 2.0f)));
  CHECK(std::isnan(out[1]));
  CHECK(std::isinf(out[3]));
  CHECK(out[4] == 0.0f);
}

TEST_CASE("float32 kernels: fast_expf and fast_erff against the C library, gelu float32 against float64") {
  double worst_exp = 0, worst_erf = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::fabs(xg::detail::fast_expf(x) - want) / want);
    const float y = -6.0f + 12.0f * static_cast<float>(i) / 200000.0f;
    worst_erf = std::max(worst_erf, std::fabs(xg::detail::fast_erff(y) - std::erf(static_cast<double>(y))));
  }
  CHECK(worst_exp < 3e-7);
  CHECK(worst_erf < 5e-7);
  CHECK(xg::detail::fast_expf(-1000.0f) < 1.3e-38f);  // clamped, never NaN
  CHECK(std::isinf(xg::detail::fast_expf(1000.0f)));
  CHECK(std::isnan(xg::detail::fast_expf(std::nanf(""))));  // passed through (and no NaN-to-int conversion)
  CHECK(std::isnan(xg::detail::fast_erff(std::nanf(""))));
  CHECK(xg::detail::fast_erff(std::numeric_limits<float>::infinity()) == 1.0f);
  std::vector<float> xs(4001);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = -10.0f + 20.0f * static_cast<float>(i) / 4000.0f;
  Tensor x = from_vector(xs, {4001});
  std::vector<double> want = gelu(x.to(f64)).to_vector(), got = gelu(x).to_vector();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  CHECK(worst < 2e-6);
  // and the backward's derivative
  Tensor xf = x.detach().requires_grad_(), xd = x.to(f64).detach().requires_grad_();
  sum(gelu(xf)).backward();
  sum(gelu(xd)).backward();
  std::vector<double> gf = xf.grad().to_vector(), gd = xd.grad().to_vector();
  double worst_g = 0;
  for (size_t i = 0; i < gd.size(); ++i) worst_g = std::max(worst_g, std::fabs(gf[i] - gd[i]));
  CHECK(worst_g < 2e-6);
  // +-inf: the derivative is inf * 0 = NaN in both dtypes (and PyTorch's),
  // not +-inf; 40 values, so that the vector loops see them, not only the tail.
  std::vector<float> with_inf(40, 0.5f);
  with_inf[0] = std::numeric_limits<float>::infinity();
  with_inf[17] = -std::numeric_limits<float>::infinity();
  Tensor inf32 = from_vector(with_inf, {40}).requires_grad_();
  Tensor inf64 = inf32.to(f64).detach().requires_grad_();
  sum(gelu(inf32)).backward();
  sum(gelu(inf64)).backward();
  for (const Tensor& t : {inf32, inf64}) {
    const std::vector<double> d = t.grad().to_vector();
    for (size_t i = 0; i < d.size(); ++i) CHECK(std::isnan(d[i]) == (i == 0 || i == 17));
  }
}

TEST_CASE("float32 kernels: softmax, log_softmax and cross_entropy along the last axis equal float64, values and gradients") {
  // Rows of 1 to 70 values (whole vectors of 16 and remainders), with the
  // largest 200 above the rest in the last place (a maximum missed would
  // overflow e^(x - max)), a -inf, and a value more than 87 below the
  // largest: float32's rows run the vectorised path (fast_expf, the 16
  // partial maxima); float64 computes them with exp. Below float32's
  // smallest normal a float32 weight is 0 by design.
  xgt::ThreadsGuard guard;
  set_num_threads(1);
  Generator gen(61);
  auto close = [](double got, double want, double rel) {
    return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
  };
  for (int64_t n : {1, 7, 16, 17, 50, 70}) {
    CAPTURE(n);
    Tensor x = randn({3, n}, gen, f64, 0.0, 5.0), g = randn({3, n}, gen, f64);
    x.set({0, n - 1}, 200.0);
    if (n > 1) x.set({1, 0}, -std::numeric_limits<double>::infinity()), x.set({2, n / 2}, -95.0);
    for (bool log_form : {false, true}) {
      CAPTURE(log_form);
      auto run = [&](Dtype dt) {
        Tensor a = x.to(dt).detach().requires_grad_();
        Tensor y = log_form ? log_softmax(a, -1) : softmax(a, -1);
        sum(y * g.to(dt)).backward();
        return std::pair{y.to_vector(), a.grad().to_vector()};
      };
      const auto [y32, g32] = run(f32);
      const auto [y64, g64] = run(f64);
      for (size_t i = 0; i < y64.size(); ++i) {
        if (std::isinf(y64[i])) CHECK(y32[i] == y64[i]);  // log_softmax of -inf
        else if (log_form) CHECK(close(y32[i], y64[i], 2e-6));
        else CHECK(std::fabs(y32[i] - y64[i]) <= 1e-5 * y64[i] + 1e-37);  // relative, for small weights too
        CHECK(close(g32[i], g64[i], 2e-5));
      }
    }
    // cross_entropy's log-probabilities come from the same rows (rows 0 and 2:
    // row 1's -inf logit would make its gradient NaN in both dtypes).
    Tensor logits = concat({slice(x, 0, 0, 1), slice(x, 0, 2, 3)}, 0);
    const std::vector<int64_t> t = {0, n - 1};
    auto ce = [&](Dtype dt) {
      Tensor a = logits.to(dt).detach().requires_grad_();
      Tensor loss = cross_entropy(a, t, CrossEntropyLossOptions().label_smoothing(0.1));
      loss.backward();
      std::vector<double> out = a.grad().to_vector();
      out.push_back(loss.item());
      return out;
    };
    const std::vector<double> c32 = ce(f32), c64 = ce(f64);
    for (size_t i = 0; i < c64.size(); ++i) CHECK(close(c32[i], c64[i], 2e-5));
  }
  // NaN, +inf and all -inf rows give NaN rows, as in float64 and PyTorch,
  // wherever the NaN or +inf lies (here in the second block of 16).
  for (double special : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    std::vector<double> row(20, 0.5);
    row[18] = special;
    std::vector<double> all_minus_inf(20, -std::numeric_limits<double>::infinity());
    row.insert(row.end(), all_minus_inf.begin(), all_minus_inf.end());
    Tensor x = from_vector(row, {2, 20}, f32);
    for (double y : softmax(x, -1).to_vector()) CHECK(std::isnan(y));
    for (double y : log_softmax(x, -1).to_vector()) CHECK(std::isnan(y));
  }
}

TEST_CASE("ops: flatten and unflatten reshape as torch does, and refuse bad dimensions by name") {
  Tensor a = leaf({2, 3, 4, 5}, 40);
  CHECK(flatten(a).shape() == Shape{2, 60});
  CHECK(flatten(a, 0).shape() == Shape{120});
  CHECK(flatten(a, 1, 2).shape() == Shape{2, 12, 5});
  CHECK(flatten(a, -2, -1).shape() == Shape{2, 3, 20});
  CHECK(flatten(a, 2, 2).shape() == a.shape());
  CHECK(flatten(scalar(3.0, f64), 0).shape() == Shape{1});
  CHECK(unflatten(flatten(a), 1, {3, -1, 5}).shape() == a.shape());
  CHECK(unflatten(a, -1, {5, 1}).shape() == Shape{2, 3, 4, 5, 1});
  CHECK(bit_equal(unflatten(flatten(a, 1, 2), 1, {3, 4}), a));
  XG_CHECK_GRAD([](const V& x) { return flatten(x[0], 1, 2) * 2.0; }, a);
  XG_CHECK_GRAD([](const V& x) { return unflatten(x[0], 2, {2, 2}); }, a);
  CHECK(XG_THROW_MESSAGE(flatten(a, 2, 1), ShapeError) ==
        "flatten: start_dim 2 comes after end_dim 1 for shape (2,3,4,5)");
  CHECK(XG_THROW_MESSAGE(flatten(a, 4), ShapeError) == "flatten: axis 4 is out of range for a tensor of 4 dimensions");
  CHECK(XG_THROW_MESSAGE(unflatten(a, 1, {2, 2}), ShapeError) ==
        "unflatten: sizes (2,2) do not multiply to the size 3 of dimension 1 of (2,3,4,5)");
  CHECK(XG_THROW_MESSAGE(unflatten(a, 2, {-1, -1}), ShapeError) ==
        "unflatten: sizes (-1,-1): expected sizes >= 0 and at most one -1");
  CHECK(XG_THROW_MESSAGE(unflatten(a, 3, {3, -1}), ShapeError) ==
        "unflatten: sizes (3,-1) do not multiply to the size 5 of dimension 3 of (2,3,4,5)");
}
