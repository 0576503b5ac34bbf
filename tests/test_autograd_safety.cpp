// Gradients that cannot silently be wrong: version counters, anomaly mode,
// needs-grad per input, non-finite values refused by optim.
#include <cmath>
#include <limits>
#include <thread>

#include "autograd/xg.h"
#include "helpers.h"
#include "nn/nn.h"
#include "optim/optim.h"

using namespace xg;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("version: writing to a saved input after the op throws at backward, naming the op and versions") {
  Tensor x = xgt::leaf({2, 3}, 1);
  Tensor w = xgt::leaf({2, 3}, 2);
  Tensor y = sum(x * w);
  w.detach().set({0, 1}, 5.0);  // the case: w changes between forward and backward
  std::string m = XG_THROW_MESSAGE(y.backward(), std::logic_error);
  CHECK(contains(m, "backward of mul"));
  CHECK(contains(m, "input 1 (2,3)"));
  CHECK(contains(m, "version 0 when saved, 1 now"));
  CHECK(!x.grad().defined());  // nothing accumulated from a wrong gradient
}

TEST_CASE("version: every in-place write through the API counts, views share the counter") {
  Tensor t = zeros({2, 2}, f64);
  Tensor view = t.reshape({4});
  CHECK(t.version() == 0);
  t.set({0, 0}, 1.0);
  t.fill_(2.0);
  t.copy_(ones({2, 2}, f64));
  view.bump_version();
  CHECK(t.version() == 4);
  CHECK(view.version() == 4);
  Tensor c = t.clone();  // new storage, own counter
  CHECK(c.version() == 0);
}

TEST_CASE("version: an op that saved nothing of its input does not mind later writes (as PyTorch)") {
  Tensor x = xgt::leaf({3}, 3);
  Tensor b = xgt::leaf({3}, 4);
  Tensor y = sum(x + b);
  b.detach().fill_(7.0);
  y.backward();
  CHECK(x.grad().at({0}) == 1.0);
}

TEST_CASE("version: a saved output modified in place is caught (exp saves its output)") {
  Tensor x = xgt::leaf({4}, 5);
  Tensor e = exp(x);
  Tensor y = sum(e);
  e.set({2}, 0.0);
  std::string m = XG_THROW_MESSAGE(y.backward(), std::logic_error);
  CHECK(contains(m, "backward of exp"));
  CHECK(contains(m, "output (4,)"));
}

TEST_CASE("version: backward accumulates nothing when the modified tensor's node runs late in the walk") {
  Tensor a = xgt::leaf({4}, 40), b = xgt::leaf({3}, 41);
  // s = sum(exp(b)) + sum(a * 2) with exp's saved output modified. a's
  // accumulator is created at a's first use, after exp: the walk (latest
  // node first) reaches a, whose gradient is right, before exp.
  auto broken = [&] {
    Tensor e = exp(b);
    Tensor s = sum(e) + sum(a * 2.0);
    e.set({1}, 0.0);
    return s;
  };
  CHECK(contains(XG_THROW_MESSAGE(broken().backward(), std::logic_error), "backward of exp"));
  CHECK(!a.grad().defined());
  CHECK(!b.grad().defined());
  // Gradients held from an earlier backward stay as they were.
  (sum(exp(b)) + sum(a * 2.0)).backward();
  const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  CHECK(contains(XG_THROW_MESSAGE(broken().backward(), std::logic_error), "backward of exp"));
  CHECK(a.grad().to_vector() == ga);
  CHECK(b.grad().to_vector() == gb);
  {  // written before the rest of the graph was recorded: found as well
    Tensor e = exp(b);
    e.set({1}, 0.0);
    Tensor s = sum(e) + sum(a * 2.0);
    CHECK(contains(XG_THROW_MESSAGE(s.backward(), std::logic_error), "backward of exp"));
    CHECK(a.grad().to_vector() == ga);
    CHECK(b.grad().to_vector() == gb);
  }
  // xg::grad checks the nodes it would run before running any.
  CHECK(contains(XG_THROW_MESSAGE(grad({broken()}, {a, b}), std::logic_error), "backward of exp"));
}

TEST_CASE("version: a saved tensor modified during the walk (by a hook) is caught when its node runs") {
  Tensor a = xgt::leaf({4}, 42), b = xgt::leaf({3}, 43);
  Tensor e = exp(b);
  Tensor s = sum(e) + sum(a * 2.0);  // a accumulates before exp's backward runs (as above)
  const int64_t id = a.add_post_accumulate_grad_hook([&](const Tensor&) { e.set({1}, 0.0); });
  CHECK(contains(XG_THROW_MESSAGE(s.backward(), std::logic_error), "backward of exp"));
  CHECK(!b.grad().defined());  // nothing computed from the modified output
  a.remove_post_accumulate_grad_hook(id);
}

TEST_CASE("version: an optimiser step between forward and backward is caught") {
  Generator g(1);
  nn::Linear lin(3, 2, g);
  optim::SGDOptions so;
  so.lr = 0.1;
  optim::SGD opt(lin.parameters(), so);
  Tensor x = xgt::leaf({4, 3}, 6).to(f32).detach();
  Tensor loss = sum(lin.forward(x));
  loss.backward(true);
  opt.step();  // the weight changes
  std::string m = XG_THROW_MESSAGE(loss.backward(), std::logic_error);
  CHECK(contains(m, "backward of linear"));
}

TEST_CASE("version: the attention weights MultiHeadAttention hands out are guarded") {
  Generator g(7);
  nn::MultiHeadAttention mha(8, 2, 0.0, g, nullptr);
  mha.to(f64);
  mha.set_store_attention(true);
  Tensor x = xgt::leaf({2, 3, 8}, 8);
  Tensor y = sum(mha.forward(x));
  Tensor w = mha.attention_weights(false);  // (B,H,T,S): the buffer backward reads
  w.set({0, 0, 0, 0}, 0.5);
  std::string m = XG_THROW_MESSAGE(y.backward(), std::logic_error);
  CHECK(contains(m, "backward of attention"));
  CHECK(contains(m, "(2,2,3,3)"));
  // Averaged weights are a new tensor: writing to them is harmless.
  Tensor y2 = sum(mha.forward(x));
  mha.attention_weights(true).set({0, 0, 0}, 0.5);
  y2.backward();
  CHECK(x.grad().defined());
}

TEST_CASE("version: a raw-pointer write is seen only after bump_version()") {
  Tensor x = xgt::leaf({3}, 9);
  Tensor w = xgt::leaf({3}, 10);
  Tensor y = sum(x * w);
  w.detach().data<double>()[0] = 3.0;  // bypasses the counter (documented)
  Tensor w2 = w.detach();
  w2.bump_version();
  CHECK_THROWS_AS(y.backward(), std::logic_error);
}

TEST_CASE("version: convert_, nn::init and gradient clipping count as in-place writes") {
  {  // convert_ on a saved leaf
    Tensor p = xgt::leaf({3}, 30);
    Tensor y = sum(p * p);
    p.convert_(f32);
    const std::string m = XG_THROW_MESSAGE(y.backward(), std::logic_error);
    CHECK(contains(m, "backward of mul"));
    CHECK(contains(m, "modified in place"));
  }
  {  // nn::init on a saved parameter
    Tensor p = xgt::leaf({2, 3}, 31);
    Tensor y = sum(tanh(p) * p);
    nn::init::constant_(p, 0.5);
    CHECK(contains(XG_THROW_MESSAGE(y.backward(), std::logic_error), "modified in place"));
    Tensor q = xgt::leaf({2, 3}, 32);
    Tensor z = sum(q * q);
    Generator g(1);
    nn::init::normal_(q, g);
    CHECK(contains(XG_THROW_MESSAGE(z.backward(), std::logic_error), "modified in place"));
  }
  {  // clipping a gradient that a second-order graph saved
    Tensor p = xgt::leaf({4}, 33);
    sum(p * p * p).backward(false, true);  // p.grad() = 3 p^2, with history
    const Tensor penalty = sum(p.grad() * p.grad());  // mul saves the gradient
    CHECK(optim::clip_grad_norm({p}, 1e-3) > 1e-3);  // scales it in place
    const std::string m = XG_THROW_MESSAGE(penalty.backward(), std::logic_error);
    CHECK(contains(m, "backward of mul"));
    CHECK(contains(m, "modified in place"));
    p.zero_grad();  // p.grad()'s recorded graph leads back to p: drop the cycle
  }
}

TEST_CASE("custom op: a backward returning the wrong shape or dtype is refused by name") {
  CustomOp op;
  op.name = "sloppy";
  op.forward = [](const std::vector<Tensor>& in) { return in[0] * 2.0; };
  Tensor x = xgt::leaf({2, 2}, 34);
  op.backward = [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{reshape(g, {4})};
  };
  std::string m = XG_THROW_MESSAGE(sum(apply(op, {x})).backward(), std::logic_error);
  CHECK(contains(m, "backward of sloppy: gradient for input 0 has shape (4,), expected (2,2)"));
  op.backward = [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) { return std::vector<Tensor>{g.to(f32)}; };
  m = XG_THROW_MESSAGE(sum(apply(op, {x})).backward(), std::logic_error);
  CHECK(contains(m, "backward of sloppy: gradient for input 0 is float32, the input is float64"));
  op.backward = [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) { return std::vector<Tensor>{g, g}; };
  m = XG_THROW_MESSAGE(sum(apply(op, {x})).backward(), std::logic_error);
  CHECK(contains(m, "custom op 'sloppy': backward returned 2 gradients for 1 inputs"));
}

TEST_CASE("needs_input_grad: a backward closure learns which inputs need a gradient") {
  std::vector<int> seen;
  CustomOp op;
  op.name = "probe";
  op.forward = [](const std::vector<Tensor>& in) { return in[0] * in[1]; };
  op.backward = [&](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
    seen = {needs_input_grad(0), needs_input_grad(1)};
    return std::vector<Tensor>{needs_input_grad(0) ? g * in[1] : Tensor(), needs_input_grad(1) ? g * in[0] : Tensor()};
  };
  Tensor a = xgt::leaf({2}, 11);
  Tensor b = xgt::leaf({2}, 12).detach();  // requires no grad
  sum(apply(op, {a, b})).backward();
  CHECK(seen == std::vector<int>{1, 0});
  sum(apply(op, {b, a})).backward();
  CHECK(seen == std::vector<int>{0, 1});
  CHECK(needs_input_grad(0));  // outside backward
}

TEST_CASE("needs_input_grad: matmul and linear gradients stay right when only one input needs one") {
  Tensor a = xgt::leaf({3, 4}, 13), b = xgt::leaf({4, 2}, 14);
  Tensor bd = b.detach();
  sum(matmul(a, bd)).backward();
  Tensor ga_only = a.grad();
  a.zero_grad();
  sum(matmul(a, b)).backward();
  CHECK(bit_equal(ga_only, a.grad()));
  // linear with x needing no gradient: w's and the bias's equal those when all three need one.
  Tensor x = xgt::leaf({5, 4}, 15), w = xgt::leaf({3, 4}, 16), bias = xgt::leaf({3}, 17);
  const Tensor gy = xgt::leaf({5, 3}, 18).detach();
  sum(linear(x, w, bias) * gy).backward();
  const Tensor gw_all = w.grad(), gb_all = bias.grad();
  w.zero_grad();
  bias.zero_grad();
  sum(linear(x.detach(), w, bias) * gy).backward();
  CHECK(bit_equal(w.grad(), gw_all));
  CHECK(bit_equal(bias.grad(), gb_all));
}

TEST_CASE("anomaly: forward names the op, the module path and the shapes of a NaN") {
  Generator g(18);
  nn::Module root;
  auto net = root.register_module(
      "body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                  std::make_shared<nn::Linear>(4, 3, g), std::make_shared<nn::Linear>(3, 2, g)}));
  root.to(f64);
  Tensor x = xgt::leaf({5, 4}, 19).detach();
  // A NaN injected into a weight mid-training.
  root.named_parameters()[2].second.detach().set({1, 1}, std::nan(""));
  CHECK_NOTHROW(net->forward(x));  // no anomaly mode: no check
  DetectAnomalyGuard guard;
  std::string m = XG_THROW_MESSAGE(net->forward(x), AnomalyError);
  CHECK(contains(m, "linear (in Linear(in=3, out=2) 'body.1')"));
  CHECK(contains(m, "produced nan"));
  CHECK(contains(m, "(5,2)"));
  CHECK(contains(m, "1 (2,3) (already holds nan at 4)"));
}

TEST_CASE("anomaly: backward names the op whose gradient is not finite") {
  DetectAnomalyGuard guard;
  Tensor x = tensor({0.0, 1.0}, {2}, f64).requires_grad_();
  Tensor y = sum(sqrt(x));  // sqrt(0) is finite, its derivative is not
  std::string m = XG_THROW_MESSAGE(y.backward(), AnomalyError);
  INFO(m);
  CHECK(contains(m, "backward of sqrt produced inf"));
  CHECK(contains(m, "input 0 (2,)"));
}

TEST_CASE("anomaly: two threads at once, one in anomaly mode, each sees only its own mode") {
  // Both threads hold their state across a barrier, so the modes overlap in time.
  xgt::Meeting meeting(2);
  auto meet = [&] { meeting.arrive_and_wait(); };
  std::string caught;
  bool other_saw_anomaly = true, other_threw = false;
  std::thread a([&] {
    DetectAnomalyGuard on;
    meet();
    Tensor x = tensor({-1.0}, {1}, f64);
    try {
      (void)sqrt(x);  // nan: anomaly mode names the op
    } catch (const AnomalyError& e) {
      caught = e.what();
    }
  });
  std::thread b([&] {
    meet();
    other_saw_anomaly = anomaly_enabled();
    try {
      Tensor x = tensor({-1.0}, {1}, f64);
      (void)sqrt(x);  // nan, silently: anomaly mode is off in this thread
    } catch (...) {
      other_threw = true;
    }
  });
  a.join();
  b.join();
  CHECK(contains(caught, "sqrt produced nan"));
  CHECK_FALSE(other_saw_anomaly);
  CHECK_FALSE(other_threw);
}

TEST_CASE("anomaly: the guard restores the previous mode and is per thread") {
  CHECK(!anomaly_enabled());
  {
    DetectAnomalyGuard on;
    CHECK(anomaly_enabled());
    {
      DetectAnomalyGuard off(false);
      CHECK(!anomaly_enabled());
    }
    CHECK(anomaly_enabled());
  }
  CHECK(!anomaly_enabled());
}

TEST_CASE("optim: clipping reports a non-finite norm instead of skipping, naming the parameter") {
  Tensor p = zeros({3}, f64).requires_grad_();
  Tensor q = zeros({2}, f64).requires_grad_();
  p.set_grad(tensor({1.0, 2.0, 3.0}, {3}, f64));
  q.set_grad(tensor({1.0, std::nan("")}, {2}, f64));
  std::string m = XG_THROW_MESSAGE(optim::clip_grad_norm({p, q}, 1.0), optim::NonFiniteError);
  CHECK(contains(m, "parameter 1 (2,)"));
  CHECK(p.grad().at({2}) == 3.0);  // untouched
  CHECK(std::isnan(optim::clip_grad_norm({p, q}, 1.0, false)));
}

TEST_CASE("optim: non-finite or out-of-range hyper-parameters are refused at construction") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor p = zeros({2}).requires_grad_();
  optim::AdamOptions bad_lr;
  bad_lr.lr = inf;
  CHECK(contains(XG_THROW_MESSAGE(optim::Adam({p}, bad_lr), std::invalid_argument), "learning rate"));
  optim::AdamOptions bad_eps;
  bad_eps.eps = nan;
  CHECK(contains(XG_THROW_MESSAGE(optim::AdamW({p}, optim::AdamWOptions(bad_eps)), std::invalid_argument), "eps"));
  optim::AdamOptions bad_wd;
  bad_wd.weight_decay = inf;
  CHECK_THROWS_AS(optim::Adam({p}, bad_wd), std::invalid_argument);
  CHECK_THROWS_AS(optim::Noam(512, 4000, nan), std::invalid_argument);
  CHECK_THROWS_AS(optim::Noam(512, 4000, inf), std::invalid_argument);
  CHECK_THROWS_AS(optim::Constant{inf}, std::invalid_argument);
  CHECK_THROWS_AS(optim::WarmupLinearDecay(nan, 10, 100), std::invalid_argument);
  optim::SGD sgd({p}, optim::SGDOptions{});
  CHECK_THROWS_AS(sgd.set_lr(inf), std::invalid_argument);
  CHECK_THROWS_AS(sgd.set_lr(nan), std::invalid_argument);
}

TEST_CASE("memory: freed storage is reused from the cache, empty_cache releases it") {
  empty_cache();
  const MemoryStats before = memory_stats();
  CHECK(before.cached_bytes == 0);
  { Tensor t = empty({1000, 250}); }  // 1 MB, back to the cache
  const MemoryStats mid = memory_stats();
  CHECK(mid.cached_bytes >= 1000 * 250 * 4);
  CHECK(mid.cached_bytes <= 1000 * 250 * 4 + 4096);  // rounded to pages
  { Tensor t = empty({100, 1000}); }  // smaller: carved out of the cached block, no new memory
  CHECK(memory_stats().cache_misses == mid.cache_misses);
  { Tensor t = empty({250, 1000}); }  // the same size: a hit again (the carved span merged back)
  const MemoryStats after = memory_stats();
  CHECK(after.cache_hits == mid.cache_hits + 2);
  CHECK(after.cache_misses == mid.cache_misses);
  CHECK(after.current_bytes == before.current_bytes);
  empty_cache();
  CHECK(memory_stats().cached_bytes == 0);
  set_cache_limit(0);  // no caching
  { Tensor t = empty({1000}); }
  CHECK(memory_stats().cached_bytes == 0);
  set_cache_limit(int64_t{4} << 30);
  CHECK_THROWS_AS(set_cache_limit(-1), std::invalid_argument);
}

TEST_CASE("memory: from_blob wraps memory it does not own, and keeps the owner alive") {
  auto owner = std::make_shared<std::vector<double>>(std::vector<double>{1, 2, 3, 4, 5, 6});
  Tensor t = from_blob(owner->data(), {2, 3}, f64, owner);
  std::weak_ptr<std::vector<double>> watch = owner;
  owner.reset();
  CHECK(!watch.expired());
  CHECK(t.at({1, 2}) == 6.0);
  t.set({0, 0}, 10.0);
  CHECK(watch.lock()->at(0) == 10.0);  // same memory
  t = Tensor();
  CHECK(watch.expired());
  CHECK_THROWS_AS(from_blob(nullptr, {2}, f32), ShapeError);
}
