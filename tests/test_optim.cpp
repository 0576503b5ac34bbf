// Optimisers against hand-computed steps, schedules against their formulas,
// clipping, and optimiser state on disk.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <cstdio>

#include "optim/optim.h"
#include "tests/helpers.h"

using namespace xg;
using namespace xg::optim;
using xgt::contains;

namespace {
Tensor param(std::vector<double> v, Dtype d = f64) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, d).requires_grad_();
}
void set_grad(Tensor& p, std::vector<double> g) { p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}, p.dtype())); }
void check_values(const Tensor& t, const std::vector<double>& want, double eps = 1e-12) {
  auto got = t.to_vector();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(eps));
}
}  // namespace

TEST_CASE("optim: Adam's first two steps by hand, with and without weight decay") {
  for (double wd : {0.0, 0.1}) {
    CAPTURE(wd);
    Tensor p = param({1.0, -2.0, 0.5});
    AdamOptions o;
    o.lr = 0.1;
    o.weight_decay = wd;
    Adam opt({p}, o);
    std::vector<double> w = {1.0, -2.0, 0.5}, m(3, 0), v(3, 0);
    const std::vector<std::vector<double>> grads = {{0.3, -0.1, 2.0}, {-0.2, 0.4, 1.0}};
    for (int t = 1; t <= 2; ++t) {
      set_grad(p, grads[t - 1]);
      opt.step();
      for (int i = 0; i < 3; ++i) {
        double g = grads[t - 1][i] + wd * w[i];
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.999 * v[i] + 0.001 * g * g;
        double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
        w[i] -= 0.1 * mh / (std::sqrt(vh) + 1e-8);
      }
      check_values(p, w, 1e-10);
    }
  }
}

TEST_CASE("optim: Adam steps all parameters in one pass, equal to each stepped alone, at 1 and 2 threads") {
  // Sizes that put parameter boundaries inside the threads' ranges, an
  // empty one, float32 beside float64, one without a gradient, two groups.
  const std::vector<int64_t> sizes = {70001, 3, 0, 5000, 1, 40000, 7};
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    xgt::ThreadsGuard restore;
    set_num_threads(threads);
    Generator g(11);
    std::vector<Tensor> all, alone;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor v = randn({sizes[i]}, g, i % 2 ? f32 : f64);
      all.push_back(v.detach().clone().requires_grad_());
      alone.push_back(v.detach().clone().requires_grad_());
    }
    std::vector<ParamGroup> groups(2);
    groups[0].params = {all[0], all[1], all[2], all[3]};
    groups[1].params = {all[4], all[5], all[6]};
    groups[1].lr_scale = 0.5;
    groups[1].weight_decay = 0.1;
    AdamWOptions o;
    o.lr = 0.01;
    o.weight_decay = 0.02;
    AdamW together(groups, o);
    std::vector<std::unique_ptr<AdamW>> each;
    for (size_t i = 0; i < sizes.size(); ++i) {
      AdamWOptions oi = o;
      if (i >= 4) oi.lr = 0.005, oi.weight_decay = 0.1;
      each.push_back(std::make_unique<AdamW>(std::vector<Tensor>{alone[i]}, oi));
    }
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (i == 3) continue;  // no gradient: left alone
        Tensor gi = randn({sizes[i]}, g, all[i].dtype());
        all[i].set_grad(gi);
        alone[i].set_grad(gi.detach().clone());
      }
      together.step();
      for (auto& opt : each) opt->step();
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(i);
      CHECK(bit_equal(all[i], alone[i]));
    }
    CHECK(bit_equal(all[3], alone[3]));
  }
}

TEST_CASE("optim: AdamW decouples weight decay, 0.01 unless told, as torch.optim.AdamW") {
  Tensor p = param({1.0, -2.0});
  AdamW opt({p}, {0.01});  // torch.optim.AdamW([p], lr=0.01): weight_decay 0.01
  std::vector<double> w = {1.0, -2.0}, m(2, 0), v(2, 0);
  const std::vector<std::vector<double>> grads = {{0.5, 0.5}, {-1.0, 0.25}};
  for (int t = 1; t <= 2; ++t) {
    set_grad(p, grads[t - 1]);
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double g = grads[t - 1][i];
      w[i] *= 1 - 0.01 * 0.01;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      w[i] -= 0.01 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
    check_values(p, w, 1e-10);
  }
}

TEST_CASE("optim: SGD plain, momentum, Nesterov and weight decay by hand") {
  struct Case {
    SGDOptions o;
  };
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    SGDOptions o;
    o.lr = 0.1;
    if (variant >= 1) o.momentum = 0.9;
    if (variant == 2) o.nesterov = true;
    if (variant == 3) o.weight_decay = 0.5, o.dampening = 0.1;
    Tensor p = param({1.0, -1.0});
    SGD opt({p}, o);
    std::vector<double> w = {1.0, -1.0}, buf(2, 0);
    const std::vector<std::vector<double>> grads = {{1.0, 2.0}, {-0.5, 1.0}};
    for (int t = 0; t < 2; ++t) {
      set_grad(p, grads[t]);
      opt.step();
      for (int i = 0; i < 2; ++i) {
        double d = grads[t][i] + o.weight_decay * w[i];
        if (o.momentum != 0) {
          buf[i] = t == 0 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
          d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
        }
        w[i] -= o.lr * d;
      }
      check_values(p, w);
    }
  }
}

TEST_CASE("optim: parameters without a gradient are left alone, float32 works") {
  Tensor a = param({1.0}, f32), b = param({2.0}, f32);
  SGD opt({a, b}, SGDOptions{0.5});
  set_grad(a, {1.0});
  opt.step();
  CHECK(a.item() == doctest::Approx(0.5));
  CHECK(b.item() == 2.0);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("optim: bad options and parameters are clear errors") {
  Tensor p = param({1.0});
  AdamOptions o;
  o.beta1 = 1.0;
  CHECK(contains(XG_THROW_MESSAGE(Adam({p}, o), std::invalid_argument), "beta1"));
  CHECK(contains(XG_THROW_MESSAGE(SGD({p, p}, SGDOptions{}), std::invalid_argument), "twice"));
  CHECK(contains(XG_THROW_MESSAGE(SGD({ones({1})}, SGDOptions{}), std::invalid_argument), "requires grad"));
  SGD ok({p}, SGDOptions{});
  CHECK(contains(XG_THROW_MESSAGE(ok.set_lr(-1), std::invalid_argument), "learning rate"));
  SGDOptions nesterov;
  nesterov.nesterov = true;
  CHECK(contains(XG_THROW_MESSAGE(SGD({p}, nesterov), std::invalid_argument), "nesterov"));
  CHECK(contains(XG_THROW_MESSAGE(Noam(0, 10), std::invalid_argument), "Noam"));
  CHECK(contains(XG_THROW_MESSAGE(WarmupLinearDecay(1.0, 10, 5), std::invalid_argument), "warmup < total"));
}

TEST_CASE("optim: Noam follows its formula and peaks at the warmup step") {
  Noam s(512, 4000, 2.0);
  for (int64_t step : {1, 10, 3999, 4000, 4001, 100000}) {
    double want = 2.0 * std::pow(512, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000, -1.5));
    CHECK(s.lr(step) == doctest::Approx(want).epsilon(1e-12));
  }
  CHECK(s.lr(4000) > s.lr(3999));
  CHECK(s.lr(4000) > s.lr(4001));
  CHECK_THROWS_AS(s.lr(0), std::invalid_argument);
  WarmupLinearDecay w(1.0, 10, 110);
  CHECK(w.lr(5) == doctest::Approx(0.5));
  CHECK(w.lr(10) == doctest::Approx(1.0));
  CHECK(w.lr(60) == doctest::Approx(0.5));
  CHECK(w.lr(110) == 0.0);
  CHECK(Constant(0.3).lr(7) == 0.3);
  Tensor p = param({1.0});
  SGD opt({p}, SGDOptions{});
  s.apply(opt, 4000);
  CHECK(opt.lr() == s.lr(4000));
}

TEST_CASE("optim: clip_grad_norm returns the total norm and clips to max_norm") {
  Tensor a = param({3.0, 0.0}), b = param({4.0});
  set_grad(a, {3.0, 0.0});
  set_grad(b, {4.0});
  CHECK(clip_grad_norm({a, b}, 10.0) == doctest::Approx(5.0));
  CHECK(a.grad().to_vector()[0] == 3.0);  // under the bound: untouched
  CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(5.0));
  double n = 0;
  for (const Tensor& t : {a, b})
    for (double g : t.grad().to_vector()) n += g * g;
  CHECK(std::sqrt(n) == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("optim: grad_norm sums every element, in float32 and float64, whatever the length") {
  for (Dtype dt : {f32, f64})
    for (int n : {1, 7, 8, 9, 37}) {
      std::vector<double> v(static_cast<size_t>(n));
      double sq = 0;
      for (int i = 0; i < n; ++i) sq += (v[static_cast<size_t>(i)] = 0.25 * (i + 1)) * v[static_cast<size_t>(i)];
      Tensor a = param(v, dt), b = param({2.0}, dt);
      set_grad(a, v);
      set_grad(b, {2.0});
      CAPTURE(n);
      CHECK(grad_norm({a, b}) == doctest::Approx(std::sqrt(sq + 4.0)).epsilon(1e-12));
    }
}

TEST_CASE("optim: state round trip through a file continues bit-identically") {
  auto make = [] { return std::vector<Tensor>{param({0.5, -1.5, 2.0}, f32), param({1.0}, f32)}; };
  auto grads_at = [](int t) {
    return std::vector<std::vector<double>>{{0.1 * t, -0.2, 0.3 / t}, {std::sin(t)}};
  };
  auto run = [&](std::vector<Tensor>& ps, Adam& opt, int from, int to) {
    for (int t = from; t < to; ++t) {
      auto g = grads_at(t);
      for (size_t i = 0; i < ps.size(); ++i) set_grad(ps[i], g[i]);
      opt.step();
    }
  };
  AdamOptions o;
  o.lr = 0.05;
  auto ps = make();
  Adam opt(ps, o);
  run(ps, opt, 1, 4);
  std::string path = std::string(XG_TEST_TMPDIR) + "/adam_state.safetensors";
  opt.save(path);
  auto copies = make();
  for (size_t i = 0; i < ps.size(); ++i) copies[i].copy_(ps[i]);
  run(ps, opt, 4, 7);
  Adam opt2(copies, AdamOptions{});
  opt2.load(path);
  CHECK(opt2.steps() == 3);
  CHECK(opt2.lr() == doctest::Approx(0.05));
  run(copies, opt2, 4, 7);
  for (size_t i = 0; i < ps.size(); ++i) CHECK(bit_equal(ps[i], copies[i]));

  // Malformed state
  auto state = opt.state_dict();
  Adam fewer({param({1.0, 2.0, 3.0}, f32)}, AdamOptions{});
  CHECK(contains(XG_THROW_MESSAGE(fewer.load_state_dict(state), std::invalid_argument), "2 parameters"));
  auto bad = state;
  bad["0.exp_avg"] = zeros({2});
  Adam same(make(), AdamOptions{});
  CHECK(contains(XG_THROW_MESSAGE(same.load_state_dict(bad), std::invalid_argument), "0.exp_avg"));
  bad = state;
  bad.erase("1.exp_avg_sq");
  CHECK(contains(XG_THROW_MESSAGE(same.load_state_dict(bad), std::invalid_argument), "1.exp_avg_sq"));
  bad = state;
  bad["7.exp_avg"] = zeros({1});
  CHECK(contains(XG_THROW_MESSAGE(same.load_state_dict(bad), std::invalid_argument), "7.exp_avg"));
}

TEST_CASE("optim: a running loss kept with its history before backward is warned about once") {
  Tensor w = zeros({3}, f64).requires_grad_();
  optim::SGDOptions so;
  so.lr = 0.01;
  optim::SGD opt({w}, so);
  Tensor x = tensor({1, 2, 3}, {3}, f64);
  Tensor running = scalar(0.0, f64);
  std::string err;
  {
    // stderr (fd 2) goes to a file for the loop, then back.
    const std::string path = std::string(XG_TEST_TMPDIR) + "/leak_warning.txt";
    std::fflush(stderr);
    const int saved = dup(2);
    const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(saved >= 0);
    REQUIRE(file >= 0);
    dup2(file, 2);
    close(file);
    for (int i = 0; i < 25; ++i) {
      opt.zero_grad();
      Tensor loss = sum(w * x);
      running = running + loss;  // the leak: before backward, with history
      loss.backward();
      opt.step();
    }
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::FILE* f = std::fopen(path.c_str(), "r");
    REQUIRE(f != nullptr);
    char buf[1024];
    while (std::fgets(buf, sizeof buf, f)) err += buf;
    std::fclose(f);
  }
  CHECK(err.find("xgrad warning:") != std::string::npos);
  CHECK(err.find("running = running + loss") != std::string::npos);
  CHECK(err.find("xgrad warning:", err.find("xgrad warning:") + 1) == std::string::npos);  // once
}

TEST_CASE("optim: WarmupCosine warms up linearly, follows half a cosine to min_lr, then stays there") {
  WarmupCosine s(6e-4, 100, 1100, 6e-5);
  CHECK(s.lr(1) == doctest::Approx(6e-6));
  CHECK(s.lr(50) == doctest::Approx(3e-4));
  CHECK(s.lr(100) == doctest::Approx(6e-4));
  CHECK(s.lr(600) == doctest::Approx(6e-5 + 0.5 * (6e-4 - 6e-5)));  // half way down
  CHECK(s.lr(350) == doctest::Approx(6e-5 + 0.5 * (6e-4 - 6e-5) * (1 + std::cos(M_PI * 0.25))));
  CHECK(s.lr(1100) == doctest::Approx(6e-5));
  CHECK(s.lr(5000) == doctest::Approx(6e-5));
  for (int64_t t = 101; t < 1100; ++t) CHECK(s.lr(t + 1) <= s.lr(t));  // never rises after the warmup
  CHECK(WarmupCosine(1.0, 0, 10).lr(1) == doctest::Approx(0.5 * (1 + std::cos(M_PI * 0.1))));
  CHECK(contains(XG_THROW_MESSAGE(WarmupCosine(1.0, 10, 10), std::invalid_argument), "0 <= warmup < total"));
  CHECK(contains(XG_THROW_MESSAGE(WarmupCosine(1.0, 1, 10, 2.0), std::invalid_argument), "min_lr <= peak"));
  CHECK_THROWS_AS(s.lr(0), std::invalid_argument);
}

TEST_CASE("optim: parameter groups give each group its own learning rate and weight decay") {
  // Two groups in one AdamW equal two AdamW set up like each group, to the bit.
  auto grad_of = [](Tensor& p, double k) { p.set_grad(p.detach() * k + 0.25); };
  Tensor a = param({1.0, -2.0, 0.5}), b = param({3.0, 0.25});
  Tensor a1 = param({1.0, -2.0, 0.5}), b1 = param({3.0, 0.25});
  AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.01;
  std::vector<ParamGroup> groups(2);
  groups[0].params = {a};
  groups[0].weight_decay = 0.2;
  groups[1].params = {b};
  groups[1].lr_scale = 0.5;  // weight decay: the optimiser's 0.01
  AdamW grouped(groups, o);
  AdamWOptions oa = o, ob = o;
  oa.weight_decay = 0.2;
  ob.lr = 0.05;
  AdamW alone_a({a1}, oa), alone_b({b1}, ob);
  for (int step = 0; step < 3; ++step) {
    grad_of(a, 2), grad_of(b, -1), grad_of(a1, 2), grad_of(b1, -1);
    grouped.step();
    alone_a.step();
    alone_b.step();
  }
  CHECK(bit_equal(a, a1));
  CHECK(bit_equal(b, b1));
  CHECK(grouped.params().size() == 2);
  CHECK(grouped.state_dict().count("1.exp_avg") == 1);  // parameters numbered through the groups
  // SGD takes groups too.
  std::vector<ParamGroup> sg(1);
  Tensor c = param({1.0});
  sg[0].params = {c};
  sg[0].lr_scale = 2;
  SGDOptions so;
  so.lr = 0.1;
  SGD sgd(sg, so);
  c.set_grad(param({1.0}).detach());
  sgd.step();
  CHECK(c.at({0}) == doctest::Approx(1.0 - 0.2));
}

TEST_CASE("optim: weight_decay_groups decays matrices only, not biases, norms or embeddings") {
  Tensor w = param({1, 2, 3, 4}).detach().reshape({2, 2}).requires_grad_();
  Tensor bias = param({1, 2}), gain = param({1, 1});
  Tensor emb = param({1, 2, 3, 4}).detach().reshape({2, 2}).requires_grad_();
  const auto g = weight_decay_groups({{"fc.weight", w}, {"fc.bias", bias}, {"norm.weight", gain}, {"src_embed.weight", emb}},
                                     0.1);
  REQUIRE(g.size() == 2);
  CHECK(g[0].weight_decay.value() == 0.1);
  CHECK(g[1].weight_decay.value() == 0.0);
  REQUIRE(g[0].params.size() == 1);
  CHECK((g[0].params[0].impl() == w.impl()));
  CHECK(g[1].params.size() == 3);
}

TEST_CASE("optim: bad groups are clear errors") {
  Tensor p = param({1.0});
  std::vector<ParamGroup> g(2);
  g[0].params = {p};
  g[1].params = {p};
  CHECK(contains(XG_THROW_MESSAGE(Adam(g, AdamOptions{}), std::invalid_argument), "appears twice"));
  std::vector<ParamGroup> neg(1);
  neg[0].params = {p};
  neg[0].lr_scale = -1;
  CHECK(contains(XG_THROW_MESSAGE(Adam(neg, AdamOptions{}), std::invalid_argument), "group 0: lr_scale"));
  neg[0].lr_scale = 1;
  neg[0].weight_decay = NAN;
  CHECK(contains(XG_THROW_MESSAGE(SGD(neg, SGDOptions{}), std::invalid_argument), "group 0: weight_decay"));
}
