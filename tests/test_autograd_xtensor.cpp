// xtensor both ways: zero-copy views and adoption, and xtensor as the
// reference for NumPy broadcasting and elementwise semantics.
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/xg.h"
#include "autograd/xtensor.h"
#include "helpers.h"

using namespace xg;

namespace {

// A random output shape (0 to 4 dimensions of 1 to 4) and two input shapes
// that broadcast to it: suffixes of it, with some dimensions set to 1.
struct Case {
  Shape out, a, b;
};
Case random_case(std::mt19937_64& r) {
  Case c;
  const int nd = static_cast<int>(r() % 5);
  for (int i = 0; i < nd; ++i) c.out.push_back(1 + static_cast<int64_t>(r() % 4));
  for (Shape* s : {&c.a, &c.b}) {
    const int keep = nd == 0 ? 0 : static_cast<int>(r() % (nd + 1));
    for (int i = nd - keep; i < nd; ++i) s->push_back(r() % 3 == 0 ? 1 : c.out[i]);
  }
  return c;
}

xt::xarray<double> to_xarray(const Tensor& t) {
  xt::xarray<double> a = as_xtensor<double>(t);  // a copy, for xtensor's own expressions
  return a;
}

void check_same(const Tensor& got, const xt::xarray<double>& want, const std::string& what, double rel = 0) {
  CAPTURE(what);
  REQUIRE(got.shape() == Shape(want.shape().begin(), want.shape().end()));
  auto g = as_xtensor<double>(got);
  for (size_t i = 0; i < want.size(); ++i) {
    if (rel == 0) CHECK(g.data()[i] == want.data()[i]);
    else CHECK(g.data()[i] == doctest::Approx(want.data()[i]).epsilon(rel));
  }
}

}  // namespace

TEST_CASE("xtensor: as_xtensor is a view of the tensor's storage") {
  Tensor t = zeros({2, 3}, f32);
  auto v = as_xtensor<float>(t);
  CHECK(v.shape()[0] == 2);
  CHECK(v.shape()[1] == 3);
  v(1, 2) = 5.0f;
  CHECK(t.at({1, 2}) == 5.0);
  t.set({0, 1}, 7.0);
  CHECK(v(0, 1) == 7.0f);
  CHECK_THROWS_AS(as_xtensor<double>(t), ShapeError);  // wrong element type
}

TEST_CASE("xtensor: from_xtensor takes an rvalue's buffer without a copy, copies an lvalue") {
  xt::xarray<double> a = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
  const double* buf = a.data();
  Tensor t = from_xtensor(std::move(a));
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == f64);
  CHECK(t.data<double>() == buf);  // the same memory
  CHECK(t.at({1, 0}) == 4.0);
  xt::xtensor<float, 1> b = {1.0f, 2.0f};
  Tensor u = from_xtensor(b);
  CHECK(u.data<float>() != b.data());
  b(0) = 9.0f;
  CHECK(u.at({0}) == 1.0);
  xt::xarray<double, xt::layout_type::column_major> cm = {{1.0, 2.0}, {3.0, 4.0}};
  Tensor w = from_xtensor(cm);
  CHECK(w.at({0, 1}) == 2.0);  // row-major order whatever the source layout
  CHECK(w.at({1, 0}) == 3.0);
  // A tensor made this way takes part in autograd like any other.
  Tensor x = from_xtensor(xt::xarray<double>{1.0, 2.0}).requires_grad_();
  sum(x * x).backward();
  CHECK(x.grad().at({1}) == 4.0);
}

TEST_CASE("xtensor: broadcasting binary ops equal xtensor's on 300 random shape pairs") {
  std::mt19937_64 r(5);
  int64_t zeros = 0, nonzeros = 0;  // of where's condition, over all cases
  for (int n = 0; n < 300; ++n) {
    Case c = random_case(r);
    CAPTURE(shape_str(c.a));
    CAPTURE(shape_str(c.b));
    Tensor a = xgt::leaf(c.a, 100 + n, 0.5, 2.0).detach(), b = xgt::leaf(c.b, 500 + n, 0.5, 2.0).detach();
    const xt::xarray<double> xa = to_xarray(a), xb = to_xarray(b);
    check_same(a + b, xa + xb, "add");
    check_same(a - b, xa - xb, "sub");
    check_same(a * b, xa * xb, "mul");
    check_same(a / b, xa / xb, "div");
    check_same(maximum(a, b), xt::maximum(xa, xb), "maximum");
    check_same(pow(a, b), xt::pow(xa, xb), "pow", 1e-15);
    // A condition of zeros and nonzeros (of either sign): both branches taken.
    Generator gc(900 + n);
    std::vector<double> cv;
    for (int64_t i = 0; i < shape_numel(c.a); ++i) cv.push_back(std::vector<double>{0.0, 1.0, -2.0}[gc.uniform() < 0.5 ? 0 : gc.uniform() < 0.5 ? 1 : 2]);
    for (double v : cv) (v == 0 ? zeros : nonzeros)++;
    Tensor cond = from_vector(cv, c.a);
    const xt::xarray<double> xc = to_xarray(cond);
    check_same(where(cond, a, b), xt::where(xt::not_equal(xc, 0.0), xa, xb), "where");
  }
  CHECK(zeros > 100);  // both branches were taken, many times
  CHECK(nonzeros > 100);
}

// The sum of `full` (the output's shape) over the axes along which an input
// of shape `in` was broadcast, reshaped to `in`: the input's gradient.
xt::xarray<double> reduce_to(const xt::xarray<double>& full, const Shape& out, const Shape& in) {
  const size_t lead = out.size() - in.size();
  std::vector<size_t> axes;
  for (size_t i = 0; i < out.size(); ++i)
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) axes.push_back(i);
  xt::xarray<double> r = axes.empty() ? full : xt::xarray<double>(xt::sum(full, axes, xt::evaluation_strategy::immediate));
  r.reshape(std::vector<size_t>(in.begin(), in.end()));
  return r;
}

TEST_CASE("xtensor: gradients of every broadcasting binary op reduce like xtensor's sums, 300 shape pairs") {
  std::mt19937_64 r(6);
  for (int n = 0; n < 300; ++n) {
    Case c = random_case(r);
    CAPTURE(shape_str(c.a));
    CAPTURE(shape_str(c.b));
    Tensor a = xgt::leaf(c.a, 1000 + n, 0.5, 2.0), b = xgt::leaf(c.b, 2000 + n, 0.5, 2.0);
    Tensor w = xgt::leaf(c.out, 3000 + n).detach();
    const xt::xarray<double> xa = to_xarray(a.detach()), xb = to_xarray(b.detach()), xw = to_xarray(w);
    const auto A = xt::xarray<double>(xt::broadcast(xa, xw.shape())), B = xt::xarray<double>(xt::broadcast(xb, xw.shape()));
    struct Op {
      const char* name;
      std::function<Tensor(const Tensor&, const Tensor&)> f;
      xt::xarray<double> da, db;  // the partial derivatives at the broadcast values
    };
    const xt::xarray<double> one = xt::ones_like(A);
    const std::vector<Op> ops = {
        {"add", [](const Tensor& x, const Tensor& y) { return x + y; }, one, one},
        {"sub", [](const Tensor& x, const Tensor& y) { return x - y; }, one, -one},
        {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }, B, A},
        {"div", [](const Tensor& x, const Tensor& y) { return x / y; }, 1.0 / B, -A / (B * B)},
        {"pow", [](const Tensor& x, const Tensor& y) { return pow(x, y); }, B * xt::pow(A, B - 1.0), xt::pow(A, B) * xt::log(A)},
        {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); },
         xt::cast<double>(xt::greater_equal(A, B)), xt::cast<double>(xt::less(A, B))}};
    for (const Op& op : ops) {
      a.zero_grad();
      b.zero_grad();
      sum(op.f(a, b) * w).backward();
      check_same(a.grad(), reduce_to(op.da * xw, c.out, c.a), std::string(op.name) + " grad a", 1e-12);
      check_same(b.grad(), reduce_to(op.db * xw, c.out, c.b), std::string(op.name) + " grad b", 1e-12);
    }
  }
}

TEST_CASE("xtensor: unary ops and reductions equal xtensor's") {
  std::mt19937_64 r(7);
  for (int n = 0; n < 50; ++n) {
    Case c = random_case(r);
    Tensor a = xgt::leaf(c.out, 4000 + n, 0.1, 3.0).detach();
    const xt::xarray<double> xa = to_xarray(a);
    check_same(exp(a), xt::exp(xa), "exp", 1e-15);
    check_same(log(a), xt::log(xa), "log", 1e-15);
    check_same(sqrt(a), xt::sqrt(xa), "sqrt");
    check_same(tanh(a), xt::tanh(xa), "tanh", 1e-15);
    check_same(relu(a - 1.0), xt::maximum(xa - 1.0, 0.0), "relu");
    check_same(abs(a - 1.0), xt::abs(xa - 1.0), "abs");
    if (!c.out.empty()) {
      const int64_t ax = static_cast<int64_t>(r() % c.out.size());
      check_same(sum(a, {ax}), xt::sum(xa, {static_cast<size_t>(ax)}, xt::evaluation_strategy::immediate),
                 "sum", 1e-13);
      check_same(mean(a, {ax}), xt::mean(xa, {static_cast<size_t>(ax)}, xt::evaluation_strategy::immediate),
                 "mean", 1e-13);
    }
  }
}
