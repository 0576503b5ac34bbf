// linear_cross_entropy against cross_entropy(linear(...)): values, gradients
// of every order, chunking, what it saves, bf16, errors.
#include <cmath>

#include "tests/helpers.h"

using namespace xg;
using V = std::vector<Tensor>;
using xgt::leaf;

namespace {
// Targets for `rows` rows over `v` classes, every fifth one ignored (-1).
std::vector<int64_t> targets_for(int64_t rows, int64_t v, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> t;
  for (int64_t r = 0; r < rows; ++r) t.push_back(r % 5 == 4 ? -1 : static_cast<int64_t>(g.engine()() % v));
  return t;
}
}  // namespace

TEST_CASE("linear_cross_entropy: equals cross_entropy of linear, values and gradients, with and without bias") {
  const auto t = targets_for(6, 7, 1);
  for (double smoothing : {0.0, 0.2}) {
    CAPTURE(smoothing);
    Tensor x = leaf({2, 3, 5}, 1), w = leaf({7, 5}, 2), b = leaf({7}, 3);
    xgt::check_close(
        xgt::values_and_grads([&](const V& v) { return linear_cross_entropy(v[0], v[1], v[2], t, -1, smoothing); },
                              {x, w, b}),
        xgt::values_and_grads(
            [&](const V& v) { return cross_entropy(reshape(linear(v[0], v[1], v[2]), {6, 7}), t, CrossEntropyLossOptions().ignore_index(-1).label_smoothing(smoothing)); }, {x, w, b}),
        1e-12);
    xgt::check_close(
        xgt::values_and_grads([&](const V& v) { return linear_cross_entropy(v[0], v[1], Tensor(), t, -1, smoothing); },
                              {x, w}),
        xgt::values_and_grads([&](const V& v) { return cross_entropy(reshape(linear(v[0], v[1]), {6, 7}), t, CrossEntropyLossOptions().ignore_index(-1).label_smoothing(smoothing)); }, {x, w}),
        1e-12);
    XG_CHECK_GRAD([&](const V& v) { return linear_cross_entropy(v[0], v[1], v[2], t, -1, smoothing); }, x, w, b);
  }
}

TEST_CASE("linear_cross_entropy: second order, by finite differences of its gradient") {
  const auto t = targets_for(4, 5, 2);
  XG_CHECK_GRADGRAD([&](const V& v) { return linear_cross_entropy(v[0], v[1], v[2], t, -1, 0.1); }, leaf({4, 3}, 4),
                    leaf({5, 3}, 5), leaf({5}, 6));
}

TEST_CASE("linear_cross_entropy: many chunks of rows give what one does, and only row statistics are saved") {
  // float64 logits of 5000 classes: 104 rows a chunk (4 MiB), so 300 rows
  // take 3 chunks.
  const int64_t rows = 300, c = 16, v = 5000;
  const auto t = targets_for(rows, v, 3);
  Tensor x = leaf({rows, c}, 7), w = leaf({v, c}, 8, -0.5, 0.5), b = leaf({v}, 9);
  xgt::check_close(
      xgt::values_and_grads([&](const V& in) { return linear_cross_entropy(in[0], in[1], in[2], t, -1, 0.1); },
                            {x, w, b}),
      xgt::values_and_grads([&](const V& in) { return cross_entropy(linear(in[0], in[1], in[2]), t, CrossEntropyLossOptions().ignore_index(-1).label_smoothing(0.1)); },
                            {x, w, b}),
      1e-11);
  const int64_t before = memory_stats().current_bytes;
  Tensor loss = linear_cross_entropy(x, w, b, t, -1, 0.1);
  // The loss and each row's log-sum-exp; not the (rows, V) logits of the
  // composed form (12 MB here).
  CHECK(memory_stats().current_bytes - before == (1 + rows) * 8);
}

TEST_CASE("linear_cross_entropy: float32 equals float64, values and gradients, over rows of 1 to 70 classes") {
  // float64 is the reference for float32's rows (its products, its
  // log-sum-exp on the C library's exp). Label smoothing and ignored rows.
  Generator gen(12);
  for (int64_t v : {1, 7, 16, 17, 37, 70}) {
    CAPTURE(v);
    const auto t = targets_for(9, v, 13);
    Tensor x = randn({9, 6}, gen, f64, 0.0, 2.0), w = randn({v, 6}, gen, f64), b = randn({v}, gen, f64);
    auto run = [&](Dtype dt) {
      V in = {x.to(dt).detach().requires_grad_(), w.to(dt).detach().requires_grad_(), b.to(dt).detach().requires_grad_()};
      Tensor loss = linear_cross_entropy(in[0], in[1], in[2], t, -1, 0.1);
      loss.backward();
      std::vector<double> out = {loss.item()};
      for (const Tensor& i : in)
        for (double g : i.grad().to_vector()) out.push_back(g);
      return out;
    };
    const std::vector<double> got = run(f32), want = run(f64);
    for (size_t i = 0; i < want.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 1e-5 * std::max(1.0, std::fabs(want[i])));
  }
}

TEST_CASE("linear_cross_entropy: under Autocast(bf16) its products run in bf16, close to float32") {
  xgt::Bf16Products bf16_products;
  Generator g(4);
  const auto t = targets_for(64, 50, 4);
  Tensor x = randn({64, 32}, g).requires_grad_(), w = randn({50, 32}, g, f32, 0, 0.2).requires_grad_(),
         b = randn({50}, g, f32, 0, 0.1).requires_grad_();
  const V g32 = xgt::values_and_grads([&](const V& in) { return linear_cross_entropy(in[0], in[1], in[2], t, -1); },
                                      {x, w, b});
  V g16;
  {
    Autocast cast(bf16);
    g16 = xgt::values_and_grads([&](const V& in) { return linear_cross_entropy(in[0], in[1], in[2], t, -1); },
                                {x, w, b});
  }
  // bf16 operands (a unit roundoff of 2^-9 = 2.0e-3): the loss and every
  // gradient within 1e-2 relative (measured: loss 1.4e-4, x 2.9e-3, w 2.8e-3,
  // bias 8.6e-4), and not equal to float32's.
  for (size_t i = 0; i < g32.size(); ++i) {
    CAPTURE(i);
    auto a = g16[i].to_vector(), r = g32[i].to_vector();
    double num = 0, den = 0;
    for (size_t j = 0; j < a.size(); ++j) num += (a[j] - r[j]) * (a[j] - r[j]), den += r[j] * r[j];
    CHECK(std::sqrt(num / den) < 1e-2);
    CHECK(num > 0);
  }
}

TEST_CASE("linear_cross_entropy: bad shapes, targets and options are named") {
  Tensor x = leaf({4, 3}, 10), w = leaf({5, 3}, 11);
  const std::vector<int64_t> t = {0, 1, 2, 3};
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, leaf({5, 2}, 12), Tensor(), t), ShapeError),
                      "linear_cross_entropy: expected x (..., C) and weight (V, C), got x (4,3), weight (5,2)"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, w, leaf({4}, 13), t), ShapeError),
                      "bias (4,) must be (V,) = (5,)"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, w, Tensor(), {0, 1, 2}), ShapeError),
                      "x (4,3) has 4 rows but 3 targets were given"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, w, Tensor(), {0, 1, 5, 2}), ShapeError),
                      "target 5 at row 2 is out of range for 5 classes"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, w, Tensor(), t, -100, 1.5), ShapeError),
                      "label_smoothing must be in [0, 1], got 1.5"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(linear_cross_entropy(x, w, Tensor(), t, -100, std::nan("")), ShapeError),
                      "linear_cross_entropy: label_smoothing must be in [0, 1], got nan"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(cross_entropy(leaf({4, 5}, 14), t, CrossEntropyLossOptions().label_smoothing(std::nan(""))), ShapeError),
                      "cross_entropy: label_smoothing must be in [0, 1], got nan"));
  // Every row ignored: a zero loss and zero gradients, as cross_entropy.
  Tensor l = linear_cross_entropy(x, w, Tensor(), {-100, -100, -100, -100});
  l.backward();
  CHECK(l.item() == 0.0);
  CHECK(bit_equal(x.grad(), zeros({4, 3}, f64)));
}

TEST_CASE("cross_entropy: classes at dimension 1 of (N,C,H,W), as PyTorch, when C equals W too") {
  Tensor x = leaf({2, 3, 2, 3}, 21);  // N=2, C=3, H=2, W=3: the case classes-last would misread silently
  const std::vector<int64_t> t = {0, 2, 1, 1, 0, 2, 2, 2, 0, 1, 1, 0};  // (N,H,W)
  const Tensor lp = log_softmax(x, 1);
  double ref = 0;  // the mean of -log p[n, t[n,h,w], h, w]
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t w = 0; w < 3; ++w) ref -= lp.at({n, t[(n * 2 + h) * 3 + w], h, w});
  ref /= 12;
  CHECK(cross_entropy(x, from_ints(t, {2, 2, 3})).item() == doctest::Approx(ref).epsilon(1e-12));
  CHECK(cross_entropy(x, t).item() == doctest::Approx(ref).epsilon(1e-12));
  XG_CHECK_GRADGRAD([&](const V& v) { return cross_entropy(v[0], t); }, x);
  // Classes last with the batch's shape as targets: an error naming both shapes, and the way out.
  const std::string msg = XG_THROW_MESSAGE(cross_entropy(leaf({2, 3, 5}, 22), from_ints({1, 2, 0, 4, 3, 0}, {2, 3})),
                                           ShapeError);
  CHECK(xgt::contains(msg, "target (2,3) must be input (2,3,5)'s shape without dimension 1"));
  CHECK(xgt::contains(msg, "reshape (B,T,V) logits to (B*T,V)"));
}
