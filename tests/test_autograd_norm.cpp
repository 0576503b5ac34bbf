// batch_norm and group_norm: float64 central differences to the second
// order (gradgradcheck with mixed partials: the first gradient also with
// respect to x alone, to the weight alone, ...), training and evaluation,
// the running statistics, float32 against float64, and the errors.
// tests/torch/pool_norm_parity compares them with PyTorch.
#include <cmath>

#include "autograd/profile.h"
#include "autograd/xg.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;

namespace {

void close(const Tensor& a, const Tensor& b, double eps) {
  const auto u = a.to_vector(), v = b.to_vector();
  REQUIRE(u.size() == v.size());
  for (size_t i = 0; i < u.size(); ++i) CHECK(u[i] == doctest::Approx(v[i]).epsilon(eps));
}

// batch_norm written out with the per-channel statistics given (1,C,1,...).
Tensor normalised(const Tensor& x, const Tensor& mu, const Tensor& var, const Tensor& w, const Tensor& b, double eps) {
  Shape cs(x.dim(), 1);
  cs[1] = x.size(1);
  return (x - reshape(mu, cs)) / sqrt(reshape(var, cs) + eps) * reshape(w, cs) + reshape(b, cs);
}

}  // namespace

TEST_CASE("batch_norm: training, gradients and gradients of gradients of x, weight and bias by finite differences") {
  for (const Shape& s : {Shape{5, 3}, Shape{3, 2, 4}, Shape{2, 3, 3, 2}}) {
    const int64_t c = s[1];
    Tensor x = leaf(s, 1), w = leaf({c}, 2), b = leaf({c}, 3);
    Tensor rm = zeros({c}, f64), rv = ones({c}, f64);
    auto f = [&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1); };
    XG_CHECK_GRAD(f, x, w, b);
    // Mixed partials: first gradients w.r.t. x alone, weight alone, bias alone and their complements.
    XG_CHECK_GRADGRAD(f, x, w, b);
    auto bare = [&](const std::vector<Tensor>& in) {
      return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
    };
    XG_CHECK_GRAD(bare, x);
    XG_CHECK_GRADGRAD(bare, x);
  }
}

TEST_CASE("batch_norm_relu: relu(batch_norm), gradients and gradients of gradients by finite differences") {
  // Seeds whose outputs keep away from relu's kink (checked): central
  // differences across it would disagree with either one-sided slope.
  for (const Shape& s : {Shape{5, 3}, Shape{3, 2, 4}, Shape{2, 3, 3, 2}}) {
    const int64_t c = s[1];
    Tensor x = leaf(s, 11), w = leaf({c}, 12), b = leaf({c}, 13);
    for (const bool training : {true, false}) {
      CAPTURE(training);
      // Evaluation's running statistics stay as made here: training's calls move only their own.
      Tensor rm = leaf({c}, 14).detach(), rv = leaf({c}, 15, 0.5, 2.0).detach();
      auto f = [&](const std::vector<Tensor>& in) {
        return batch_norm_relu(in[0], rm, rv, in[1], in[2], training, 0.1);
      };
      std::vector<int64_t> axes{0};  // every axis but C's
      for (int64_t i = 2; i < x.dim(); ++i) axes.push_back(i);
      const Tensor pre = training ? normalised(x, mean(x, axes, true), var(x, axes, 0, true), w, b, 1e-5)
                                  : normalised(x, rm, rv, w, b, 1e-5);
      const Tensor y = f({x, w, b});
      close(y, relu(pre), 1e-12);  // against the formula written out
      REQUIRE(-max(neg(abs(pre))).item() > 1e-3);
      CHECK(max(neg(y)).item() == 0.0);  // the relu clamps some values
      XG_CHECK_GRAD(f, x, w, b);
      XG_CHECK_GRADGRAD(f, x, w, b);
    }
  }
}

TEST_CASE("batch_norm: evaluation uses the running statistics, differentiable to the second order") {
  Tensor x = leaf({4, 3, 2, 2}, 4), w = leaf({3}, 5), b = leaf({3}, 6);
  const Tensor rm = leaf({3}, 7).detach(), rv = leaf({3}, 8, 0.5, 2.0).detach();
  const Tensor y = batch_norm(x, rm, rv, w, b, false, 0.1, 1e-3);
  close(y, normalised(x, rm, rv, w, b, 1e-3), 1e-13);
  // Evaluation leaves the running statistics alone.
  CHECK(rm.version() == 0);
  CHECK(rv.version() == 0);
  auto f = [&](const std::vector<Tensor>& in) { return tanh(batch_norm(in[0], rm, rv, in[1], in[2], false)); };
  XG_CHECK_GRAD(f, x, w, b);
  XG_CHECK_GRADGRAD(f, x, w, b);
}

TEST_CASE("batch_norm: training normalises with the batch's statistics and updates the running ones in place") {
  const double m = 0.3, eps = 1e-4;
  Tensor rm = zeros({3}, f64), rv = ones({3}, f64);
  Tensor w = leaf({3}, 9), b = leaf({3}, 10);
  Tensor expect_m = zeros({3}, f64), expect_v = ones({3}, f64);
  for (uint64_t step = 0; step < 3; ++step) {
    const Tensor x = leaf({4, 3, 2, 3}, 11 + step).detach();
    const Tensor bm = mean(x, {0, 2, 3}), bv = var(x, {0, 2, 3}, 0);  // biased
    const Tensor y = batch_norm(x, rm, rv, w, b, true, m, eps);
    close(y, normalised(x, bm, bv, w, b, eps), 1e-13);
    // (1 - m) r + m batch, with the unbiased variance: n = 24 values per channel.
    expect_m = expect_m * (1 - m) + bm * m;
    expect_v = expect_v * (1 - m) + bv * (24.0 / 23.0) * m;
    close(rm, expect_m, 1e-14);
    close(rv, expect_v, 1e-14);
    CHECK(rm.version() == step + 1);
    CHECK_FALSE(rm.requires_grad());
  }
  // momentum 0 keeps them; undefined running statistics are simply not kept.
  const Tensor kept = rm.clone().detach();
  batch_norm(leaf({4, 3}, 20), rm, rv, Tensor(), Tensor(), true, 0.0);
  CHECK(bit_equal(rm, kept));
  const Tensor y = batch_norm(leaf({4, 3}, 21), Tensor(), Tensor(), Tensor(), Tensor(), true);
  close(mean(y, {0}), zeros({3}, f64), 1e-9);
}

TEST_CASE("group_norm: gradients and gradients of gradients, with and without weight and bias") {
  struct Case {
    Shape shape;
    int64_t groups;
  };
  for (const Case& k : {Case{{2, 6, 3, 2}, 3}, Case{{2, 4, 5}, 2}, Case{{3, 4}, 1}, Case{{2, 3, 2, 2}, 3}}) {
    const int64_t c = k.shape[1];
    Tensor x = leaf(k.shape, 12), w = leaf({c}, 13), b = leaf({c}, 14);
    auto f = [&](const std::vector<Tensor>& in) { return group_norm(in[0], k.groups, in[1], in[2], 1e-5); };
    XG_CHECK_GRAD(f, x, w, b);
    XG_CHECK_GRADGRAD(f, x, w, b);
    auto bare = [&](const std::vector<Tensor>& in) { return group_norm(in[0], k.groups); };
    XG_CHECK_GRADGRAD(bare, x);
  }
  // Against the statistics written out: each (n, group) of (2,6,3,2) in 3 groups.
  Tensor x = leaf({2, 6, 3, 2}, 15).detach(), w = leaf({6}, 16).detach(), b = leaf({6}, 17).detach();
  const Tensor xg = reshape(x, {2, 3, 2, 3, 2});
  const Tensor mu = mean(xg, {2, 3, 4}, true), v = var(xg, {2, 3, 4}, 0, true);
  const Tensor expect = reshape((xg - mu) / sqrt(v + 1e-5), {2, 6, 3, 2}) * reshape(w, {1, 6, 1, 1}) +
                        reshape(b, {1, 6, 1, 1});
  close(group_norm(x, 3, w, b), expect, 1e-12);
}

TEST_CASE("batch_norm and group_norm: float32 agrees with float64") {
  const Tensor x = leaf({4, 6, 3, 2}, 18).detach(), w = leaf({6}, 19).detach(), b = leaf({6}, 20).detach();
  Tensor rm64 = zeros({6}, f64), rv64 = ones({6}, f64), rm32 = zeros({6}, f32), rv32 = ones({6}, f32);
  close(batch_norm(x.to(f32), rm32, rv32, w.to(f32), b.to(f32), true), batch_norm(x, rm64, rv64, w, b, true), 1e-4);
  close(rv32, rv64, 1e-5);
  close(batch_norm(x.to(f32), rm32, rv32, w.to(f32), b.to(f32), false), batch_norm(x, rm64, rv64, w, b, false), 1e-4);
  close(group_norm(x.to(f32), 2, w.to(f32), b.to(f32)), group_norm(x, 2, w, b), 1e-4);
}

TEST_CASE("batch_norm and group_norm: bad inputs and options are refused by name, with the accepted range") {
  Tensor x = leaf({4, 3, 2}, 21), c3 = leaf({3}, 22);
  const Tensor none;
  CHECK(XG_THROW_MESSAGE(batch_norm(leaf({4}, 23), none, none, none, none, true), ShapeError) ==
        "batch_norm: expected an input (N,C), (N,C,L) or (N,C,H,W), got (4,)");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, none, none, leaf({4}, 24), none, true), ShapeError) ==
        "batch_norm: weight (4,) does not match the 3 channels of input (4,3,2): expected (3,)");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, zeros({3, 1}, f64), ones({3}, f64), none, none, true), ShapeError) ==
        "batch_norm: running_mean (3,1) does not match the 3 channels of input (4,3,2): expected (3,)");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, zeros({3}, f64), ones({3}, f32), none, none, true), ShapeError) ==
        "batch_norm: dtype mismatch, input float64 vs running_var float32");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, none, none, c3, c3, true, 0.1, 0.0), std::invalid_argument) ==
        "batch_norm: eps 0: expected > 0");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, none, none, c3, c3, true, 1.5), std::invalid_argument) ==
        "batch_norm: momentum 1.5: expected in [0, 1]");
  CHECK(XG_THROW_MESSAGE(batch_norm(x, none, ones({3}, f64), c3, c3, false), std::invalid_argument) ==
        "batch_norm: evaluation (training false) normalises with running_mean and running_var: both must be defined");
  CHECK(XG_THROW_MESSAGE(batch_norm(leaf({1, 3}, 25), none, none, none, none, true), ShapeError) ==
        "batch_norm: training needs more than 1 value per channel, got input (1,3)");
  // batch_norm_relu's checks are batch_norm's, under its own name.
  CHECK(XG_THROW_MESSAGE(batch_norm_relu(leaf({4}, 23), none, none, none, none, true), ShapeError) ==
        "batch_norm_relu: expected an input (N,C), (N,C,L) or (N,C,H,W), got (4,)");
  CHECK(XG_THROW_MESSAGE(batch_norm_relu(x.to(f32), none, none, leaf({4}, 24).to(f32), none, true), ShapeError) ==
        "batch_norm_relu: weight (4,) does not match the 3 channels of input (4,3,2): expected (3,)");
  CHECK(XG_THROW_MESSAGE(batch_norm_relu(x, none, none, c3, c3, true, -0.5), std::invalid_argument) ==
        "batch_norm_relu: momentum -0.5: expected in [0, 1]");
  CHECK(XG_THROW_MESSAGE(batch_norm_relu(x.to(f32), none, none, none, none, false), std::invalid_argument) ==
        "batch_norm_relu: evaluation (training false) normalises with running_mean and running_var: both must be "
        "defined");
  CHECK(XG_THROW_MESSAGE(batch_norm_relu(leaf({1, 3}, 25), none, none, none, none, true, 0.1, 0.0),
                         std::invalid_argument) == "batch_norm_relu: eps 0: expected > 0");
  Tensor g = leaf({2, 6, 3}, 26);
  CHECK(XG_THROW_MESSAGE(group_norm(g, 4), ShapeError) ==
        "group_norm: groups 4 does not divide the 6 channels of input (2,6,3)");
  CHECK(XG_THROW_MESSAGE(group_norm(g, 0), std::invalid_argument) == "group_norm: groups 0: expected at least 1");
  CHECK(XG_THROW_MESSAGE(group_norm(g, 3, c3), ShapeError) ==
        "group_norm: weight (3,) does not match the 6 channels of input (2,6,3): expected (6,)");
  CHECK(XG_THROW_MESSAGE(group_norm(g, 3, none, none, -1e-5), std::invalid_argument) ==
        "group_norm: eps -1e-05: expected > 0");
  CHECK(XG_THROW_MESSAGE(group_norm(leaf({6}, 27), 3), ShapeError) ==
        "group_norm: expected an input (N,C,...), got (6,)");
}

TEST_CASE("batch_norm across processes: two processes' halves train as one process's whole batch") {
  // Two processes holding the same half h of a batch [h; h]: their sums
  // over both are twice their own, so `across` is t -> 2t, and its backward
  // doubles the gradient as the other process's identical one would add.
  const Tensor h = leaf({3, 2, 2, 2}, 31).detach(), wy = leaf({3, 2, 2, 2}, 32).detach();
  const Tensor w = leaf({2}, 33).detach(), b = leaf({2}, 34).detach();
  auto twice = [](const Tensor& t) { return t * 2.0; };
  Tensor rm1 = zeros({2}, f64), rv1 = ones({2}, f64), rm2 = zeros({2}, f64), rv2 = ones({2}, f64);
  Tensor half = h.clone().requires_grad_(), whole = concat({h, h}, 0).requires_grad_();
  const Tensor y1 = batch_norm(half, rm1, rv1, w, b, true, 0.1, 1e-5, twice);
  const Tensor y2 = batch_norm(whole, rm2, rv2, w, b, true, 0.1, 1e-5);
  sum(y1 * wy).backward();
  sum(y2 * concat({wy, wy}, 0)).backward();
  close(y1.detach(), slice(y2.detach(), 0, 0, 3), 1e-12);
  close(half.grad(), slice(whole.grad(), 0, 0, 3), 1e-10);
  close(rm1, rm2, 1e-12);
  close(rv1, rv2, 1e-12);  // the unbiased variance over all 2N values
  // The duplicated halves have the whole batch's mean and biased variance,
  // so only the count tells the two apart: alone, the running variance is
  // unbiased over N values, not 2N. Distinct halves: the vision CTest
  // vision_resnet_sync_bn_mpi_np2_equals_np1.
  Tensor rm3 = zeros({2}, f64), rv3 = ones({2}, f64);
  batch_norm(h, rm3, rv3, w, b, true);
  CHECK(std::abs(rv3.to_vector()[0] - rv2.to_vector()[0]) > 1e-6);
  auto f = [&](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5, twice); };
  for (const auto& r : {gradcheck(f, {leaf({3, 2, 2}, 35), leaf({2}, 36), leaf({2}, 37)}),
                        gradgradcheck(f, {leaf({3, 2, 2}, 35), leaf({2}, 36), leaf({2}, 37)})})
    CHECK_MESSAGE(r.ok, r.message);
}

namespace {

// One batch_norm case for the fused float32 path against the float64 one.
struct BnCase {
  Shape shape;
  bool training, affine;
  double offset;  // added to x: a mean large against the deviation
  bool relu = false;  // batch_norm_relu
};

// batch_norm's output, the gradients of sum(y * wy) with respect to x,
// weight and bias (by the first-order walk, and again with create_graph,
// which takes the second order's path), the running statistics after the
// call, and the second order: the gradient with respect to x of
// sum(dx * v), dx taken with create_graph. In x's dtype.
struct BnResult {
  std::vector<Tensor> values;
  bool fused;  // whether the op recorded itself as one fused batch_norm
};

BnResult run_batch_norm(const BnCase& k, Dtype dt, uint64_t seed) {
  const int64_t c = k.shape[1];
  Tensor x = (leaf(k.shape, seed) + k.offset).detach().to(dt).requires_grad_();
  Tensor w = k.affine ? leaf({c}, seed + 1).detach().to(dt).requires_grad_() : Tensor();
  Tensor b = k.affine ? leaf({c}, seed + 2).detach().to(dt).requires_grad_() : Tensor();
  Tensor rm = leaf({c}, seed + 3).detach().to(dt), rv = (leaf({c}, seed + 4, 0.5, 2.0)).detach().to(dt);
  const Tensor wy = leaf(k.shape, seed + 5).detach().to(dt), v = leaf(k.shape, seed + 6).detach().to(dt);
  Tensor y;
  bool fused = false;
  {
    OpProfile prof;
    y = (k.relu ? batch_norm_relu : batch_norm)(x, rm, rv, w, b, k.training, 0.3, 1e-5, {});
    const char* name = k.relu ? "batch_norm_relu" : "batch_norm";
    for (const auto& [key, cost] : prof.costs()) fused = fused || std::get<2>(key) == name;
  }
  std::vector<Tensor> inputs{x};
  if (k.affine) inputs.push_back(w), inputs.push_back(b);
  GradOptions first;
  first.retain_graph = true;
  const std::vector<Tensor> g1 = grad({sum(y * wy)}, inputs, {}, first);
  GradOptions keep;
  keep.create_graph = true;
  const std::vector<Tensor> g = grad({sum(y * wy)}, inputs, {}, keep);
  // In evaluation dx = weight invstd g does not depend on x (nor on
  // anything without a weight): no second order in x.
  GradOptions unused;
  unused.allow_unused = true;
  Tensor gxx = !g[0].is_leaf() ? grad({sum(g[0] * v)}, {x}, {}, unused)[0] : Tensor();
  if (!gxx.defined()) gxx = zeros(k.shape, dt);
  // Training: dx depends on x through the batch's statistics.
  if (k.training) CHECK(max(abs(gxx)).item() > 1e-3);
  std::vector<Tensor> out{y.detach(), rm, rv, g[0].detach(), gxx};
  for (const Tensor& t : g1) out.push_back(t);
  if (k.affine) out.push_back(g[1].detach()), out.push_back(g[2].detach());
  return {out, fused};
}

}  // namespace

TEST_CASE("batch_norm: the fused float32 path agrees with float64 to every order, at 1 and 2 threads alike") {
  const int before = num_threads();
  const std::vector<BnCase> cases{
      {{1, 3, 5, 5}, true, true, 0},     {{5, 3}, true, true, 0},       {{3, 17, 4}, true, false, 0},
      {{4, 19, 3, 5}, true, true, 0},    {{2, 33, 7, 7}, true, true, 0}, {{6, 16, 9, 9}, false, true, 0},
      {{3, 5, 2, 3}, false, false, 0},   {{7, 4, 6, 6}, true, true, 1e3}, {{1, 2, 1, 2}, true, true, 0},
      {{4, 19, 3, 5}, true, true, 0, true}, {{2, 33, 7, 7}, true, false, 0, true}, {{6, 16, 9, 9}, false, true, 0, true},
      {{5, 3}, true, true, 0, true}};
  uint64_t seed = 40;
  for (const BnCase& k : cases) {
    const std::string shape = shape_str(k.shape);
    CAPTURE(shape);
    CAPTURE(k.training);
    CAPTURE(k.offset);
    CAPTURE(k.relu);
    seed += 10;
    const BnResult ref = run_batch_norm(k, f64, seed);
    CHECK_FALSE(ref.fused);
    std::vector<std::vector<double>> at_one;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const BnResult r = run_batch_norm(k, f32, seed);
      CHECK(r.fused);
      REQUIRE(r.values.size() == ref.values.size());
      for (size_t i = 0; i < r.values.size(); ++i) {
        CAPTURE(i);
        // The offset's rounding in float32 (1e3 + x) is the input's own error.
        close(r.values[i].to(f64), ref.values[i], k.offset > 0 ? 2e-3 : 1e-4);
        if (threads == 1) at_one.push_back(r.values[i].to_vector());
        else CHECK(r.values[i].to_vector() == at_one[i]);  // each channel summed on one thread
      }
    }
  }
  set_num_threads(before);
}
