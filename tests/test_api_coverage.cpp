// Public functions no other test reaches: each case checks what the header
// promises, so that a change in behaviour fails here.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "autograd/xg.h"
#include "helpers.h"
#include "models/transformer.h"
#include "nn/nn.h"

using namespace xg;

TEST_CASE("set_grad_enabled: off records nothing, on records again, per thread") {
  Tensor x = xgt::leaf({3}, 1);
  set_grad_enabled(false);
  Tensor y = x * 2.0;
  CHECK(y.is_leaf());
  CHECK_FALSE(y.requires_grad());
  bool other = false;
  std::thread([&] { other = grad_enabled(); }).join();  // another thread keeps its own (on)
  CHECK(other);
  set_grad_enabled(true);
  Tensor z = x * 2.0;
  CHECK_FALSE(z.is_leaf());
}

TEST_CASE("available_cores: follows the affinity mask, as taskset and cgroup cpusets set it") {
  cpu_set_t all;
  CPU_ZERO(&all);
  REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
  CHECK(available_cores() == CPU_COUNT(&all));
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &all)) first = c;
  int narrowed = 0;
  std::thread([&] {  // a thread of its own: the test's other threads keep their mask
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
    narrowed = available_cores();
  }).join();
  CHECK(narrowed == 1);
}

TEST_CASE("first_nonfinite: the flat index of the first NaN or Inf, -1 when all finite") {
  CHECK(first_nonfinite(tensor({1, 2, 3}, {3})) == -1);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(first_nonfinite(tensor({1, inf, std::nan(""), 4}, {2, 2}, f64)) == 1);
  CHECK(first_nonfinite(tensor({1, 2, 3, -inf}, {4})) == 3);
  CHECK(first_nonfinite(from_ints({1, 2}, {2})) == -1);
}

TEST_CASE("nn::init::constant_: every element, and a version bump") {
  Tensor t = zeros({2, 3});
  const uint64_t v = t.version();
  nn::init::constant_(t, 0.25);
  for (double e : t.to_vector()) CHECK(e == 0.25);
  CHECK(t.version() == v + 1);
}

TEST_CASE("Dropout::forward_relu: dropout(relu(x)) with the same mask, relu alone in eval mode") {
  Generator g(2);
  const Tensor x = randn({4, 8}, g);
  nn::Dropout fused(0.4, std::make_shared<Generator>(9)), plain(0.4, std::make_shared<Generator>(9));
  CHECK(bit_equal(fused.forward_relu(x), plain.forward(relu(x))));
  fused.eval();
  CHECK(bit_equal(fused.forward_relu(x), relu(x)));
}

TEST_CASE("BatchNorm::forward_relu: relu(forward(x)), the same statistics and count, in training and evaluation") {
  Generator g(3);
  for (const Shape& shape : {Shape{4, 16, 5, 5}, Shape{3, 2, 3, 2, 4}}) {  // BatchNorm2d, and 3d's reshape
    CAPTURE(shape_str(shape));
    const Tensor x = randn(shape, g);
    auto make = [&]() -> std::shared_ptr<nn::BatchNorm> {
      if (shape.size() == 5) return std::make_shared<nn::BatchNorm3d>(shape[1]);
      return std::make_shared<nn::BatchNorm2d>(shape[1]);
    };
    auto fused = make(), plain = make();
    nn::init::uniform_(fused->weight(), g, -1, 1);
    plain->weight().copy_(fused->weight());
    for (int step = 0; step < 2; ++step) {  // training twice, then evaluation with what it kept
      const Tensor a = fused->forward_relu(x), b = relu(plain->forward(x));
      xgt::check_close({a, fused->running_mean(), fused->running_var()},
                       {b, plain->running_mean(), plain->running_var()}, 1e-6);
      CHECK(fused->num_batches_tracked().item() == plain->num_batches_tracked().item());
      const std::vector<double> values = a.to_vector();
      CHECK(std::count(values.begin(), values.end(), 0.0) > 0);  // the relu clamps some
    }
    fused->eval();
    plain->eval();
    xgt::check_close({fused->forward_relu(x)}, {relu(plain->forward(x))}, 1e-6);
    CHECK(fused->num_batches_tracked().item() == 2);
  }
}

namespace {
// A user's module that names its ops with scope(), as the built-in ones do.
struct Scaled : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  explicit Scaled(Generator& g) : fc(register_module("fc", std::make_shared<nn::Linear>(2, 2, g))) {}
  std::string type_name() const override { return "Scaled"; }
  Tensor forward(const Tensor& x) override {
    auto s = scope();
    return log(fc->forward(x) * 0.0 - 1.0);  // log of -1: nan
  }
};
struct Outer : nn::Module {
  std::shared_ptr<Scaled> inner;
  explicit Outer(Generator& g) : inner(register_module("inner", std::make_shared<Scaled>(g))) {}
  Tensor forward(const Tensor& x) override { return inner->forward(x); }
};
}  // namespace

TEST_CASE("Module::scope: a user's module is named by its path in anomaly messages") {
  Generator g(3);
  Outer model(g);
  DetectAnomalyGuard on;
  const std::string m = XG_THROW_MESSAGE(model.forward(full({3, 2}, -5.0)), AnomalyError);
  CHECK(m.find("log (in Scaled 'inner')") != std::string::npos);
  {
    NameScope named("my block");  // NameScope directly, outside any module
    const std::string m2 = XG_THROW_MESSAGE(sqrt(full({1}, -1.0)), AnomalyError);
    CHECK(m2.find("sqrt (in my block)") != std::string::npos);
  }
}

TEST_CASE("Transformer::select_rows: the kept rows decode as they would have alone") {
  models::TransformerConfig cfg;
  cfg.layers = 1;
  cfg.d_model = 16;
  cfg.heads = 2;
  cfg.d_ff = 32;
  cfg.dropout = 0;
  models::Transformer model(cfg);
  model.eval();
  const models::Batch src{{3, 4, 5, 6, 7, 8, 9, 10, 11}, 3, 3};
  models::DecodeState all = model.start_decode(src);
  model.decode_step(all, {1, 1, 1});
  models::Transformer::select_rows(all, {2, 0, 0});
  const Tensor got = model.decode_step(all, {5, 6, 7});
  // The same rows decoded from the start without selection.
  const models::Batch picked{{9, 10, 11, 3, 4, 5, 3, 4, 5}, 3, 3};
  models::DecodeState ref = model.start_decode(picked);
  model.decode_step(ref, {1, 1, 1});
  const Tensor want = model.decode_step(ref, {5, 6, 7});
  xgt::check_close({got}, {want}, 1e-5);
  CHECK(all.pos == 2);
}
