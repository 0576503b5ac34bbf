// The tape: diamonds, reuse, accumulation, no-grad, detach, deep graphs,
// releasing saved values, and the running-loss leak made loud.
#include <thread>

#include "autograd/detail/impl.h"
#include "tests/helpers.h"

using namespace xg;

TEST_CASE("tape: a value used several times (diamond) gets every path's gradient") {
  Tensor x = tensor({3.0}, {1}, f64).requires_grad_();
  Tensor a = x * x;        // 2x
  Tensor b = x * 4.0;      // 4
  Tensor y = a * b + a;    // 4x^3 + x^2 -> 12x^2 + 2x
  sum(y).backward();
  CHECK(x.grad().item() == doctest::Approx(12 * 9 + 6));
}

TEST_CASE("tape: a wide diamond is linear, not exponential") {
  Tensor x = tensor({1.0}, {1}, f64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 60; ++i) y = y + y * 0.0;  // 2^60 paths if revisited
  sum(y).backward();
  CHECK(x.grad().item() == doctest::Approx(1.0));
}

TEST_CASE("tape: gradients accumulate over backward calls on separate graphs, zero_grad clears") {
  Tensor x = tensor({1.0, 2.0}, {2}, f64).requires_grad_();
  sum(x * 3.0).backward();
  sum(x * x).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{3 + 2, 3 + 4});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 1});
}

TEST_CASE("tape: a second backward adds into grad() in place, unless a handle to it is held") {
  auto storage_of = [](const Tensor& t) -> const void* {
    return t.dtype() == f32 ? static_cast<const void*>(t.data<float>()) : static_cast<const void*>(t.data<double>());
  };
  for (Dtype dt : {f32, f64}) {
    CAPTURE(dtype_name(dt));
    Tensor x = tensor({1.0, 2.0, 3.0}, {3}, dt).requires_grad_();
    sum(x * x).backward();
    const void* storage = storage_of(x.grad());  // no handle kept: only grad() sees its values
    sum(x * 3.0).backward();
    CHECK(storage_of(x.grad()) == storage);  // as PyTorch's AccumulateGrad: added in place
    CHECK(x.grad().to_vector() == std::vector<double>{2 + 3, 4 + 3, 6 + 3});
    // A handle to grad() keeps its values: the next backward makes a new tensor.
    const Tensor held = x.grad();
    sum(x).backward();
    CHECK(held.to_vector() == std::vector<double>{5, 7, 9});
    CHECK(x.grad().to_vector() == std::vector<double>{6, 8, 10});
    CHECK(storage_of(x.grad()) != storage_of(held));
  }
}

TEST_CASE("tape: a gradient handed to two inputs unchanged is summed into, not written over") {
  // add's backward passes the same gradient tensor to both of its inputs, so
  // p's and q's waiting gradients are one tensor when w's backward sends p
  // more: that sum must be a new tensor, or q would receive it too.
  Tensor x = tensor({1.0, 2.0}, {2}, f64).requires_grad_();
  Tensor p = x * 2.0, q = x * 3.0;
  Tensor w = p * 7.0;
  Tensor s = p + q;
  sum((s + w) * tensor({1.0, 10.0}, {2}, f64)).backward();  // 2x + 3x + 14x
  CHECK(x.grad().to_vector() == std::vector<double>{19, 190});
  Tensor u = tensor({1.0, 2.0}, {2}, f64).requires_grad_();
  sum((u + u) * (u + u)).backward();  // 4u^2 -> 8u: the same gradient sent twice to u
  CHECK(u.grad().to_vector() == std::vector<double>{8, 16});
}

namespace {
// x itself as an op whose backward asks for the gradient already waiting for
// x (detail::accumulating_grad) and adds its own into it when offered one,
// counting the offers.
Tensor probe(const Tensor& x, int* offers) {
  return record("probe", x.detach().clone(), {x}, [offers](const Tensor& g) {
    Tensor into = detail::accumulating_grad(0);
    if (!into.defined()) return std::vector<Tensor>{g.clone()};
    ++*offers;
    into.copy_(add(into, g));
    return std::vector<Tensor>{into};
  });
}
}  // namespace

TEST_CASE("tape: a backward may add its gradient into the one already waiting, only when no one else sees it") {
  // u = x * 1 is recorded first, so its node runs after both of its users.
  const Tensor w1 = tensor({1.0, 10.0}, {2}, f64), w2 = tensor({100.0, 1000.0}, {2}, f64);
  int offers = 0;
  auto run = [&](bool probe_first, bool create_graph) {
    Tensor x = tensor({1.0, 2.0}, {2}, f64).requires_grad_();
    Tensor u = x * 1.0, a, b;
    if (probe_first) {
      b = probe(u, &offers);
      a = u * 2.0;  // recorded later, so its backward runs first
    } else {
      a = u * 2.0;
      b = probe(u, &offers);
    }
    sum(a * w1 + b * w2).backward(false, create_graph);
    CHECK(x.grad().to_vector() == std::vector<double>{102, 1020});
  };
  run(true, false);  // u's gradient from 2u arrives first, alone: the probe adds into it
  CHECK(offers == 1);
  offers = 0;
  run(false, false);  // the probe runs first: nothing waits yet
  run(true, true);    // create_graph: the sum must be recorded, so the walk adds
  {
    DetectAnomalyGuard anomaly;  // each gradient checked alone: the walk adds
    run(true, false);
  }
  CHECK(offers == 0);
  {  // two edges of one node lead to u: neither may write into u's waiting sum
    Tensor x = tensor({1.0, 2.0}, {2}, f64).requires_grad_();
    Tensor u = x * 1.0;
    Tensor b = record("probe2", u.detach().clone(), {u, u}, [&offers](const Tensor& g) {
      for (size_t i : {0, 1})
        if (detail::accumulating_grad(i).defined()) ++offers;
      return std::vector<Tensor>{g * 0.5, g * 0.5};
    });
    Tensor a = u * 2.0;
    sum(a * w1 + b * w2).backward();
    CHECK(offers == 0);
    CHECK(x.grad().to_vector() == std::vector<double>{102, 1020});
  }
  {  // u's waiting gradient is also v's (add passes one tensor to both): no offer
    Tensor x = tensor({1.0, 2.0}, {2}, f64).requires_grad_(), y = tensor({3.0, 4.0}, {2}, f64).requires_grad_();
    Tensor v = y * 1.0, u = x * 1.0;
    Tensor b = probe(u, &offers);
    Tensor s = u + v;
    sum(s * w1 + b * w2).backward();
    CHECK(offers == 0);
    CHECK(x.grad().to_vector() == std::vector<double>{101, 1010});
    CHECK(y.grad().to_vector() == std::vector<double>{1, 10});
  }
}

TEST_CASE("tape: no-grad guard records nothing and restores the mode") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard g;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  CHECK_FALSE((x * 2.0).is_leaf());
}

TEST_CASE("tape: detach cuts the graph and shares storage") {
  Tensor x = tensor({2.0}, {1}, f64).requires_grad_();
  Tensor y = x * x;
  Tensor d = y.detach();
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  sum(y * d).backward();  // d is a constant 4: dy/dx * d = 2x * 4
  CHECK(x.grad().item() == doctest::Approx(16.0));
}

TEST_CASE("tape: a 200k-node chain runs backward and is destroyed without recursion") {
  Tensor x = tensor({1.0}, {1}, f64).requires_grad_();
  int64_t before = live_nodes();
  {
    Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = y + 1e-6;
    sum(y).backward();
    CHECK(x.grad().item() == doctest::Approx(1.0));
    Tensor z = x;
    for (int i = 0; i < 200000; ++i) z = z * 1.0;  // never backwarded: destroyed as a whole chain
  }
  CHECK(live_nodes() <= before + 1);
}

TEST_CASE("tape: backward releases saved values, a second backward is a clear error") {
  Tensor x = ones({3}, f64).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  std::string msg = XG_THROW_MESSAGE(y.backward(), std::logic_error);
  CHECK(xgt::contains(msg, "already freed"));
  CHECK(xgt::contains(msg, "retain_graph"));
}

TEST_CASE("tape: retain_graph allows a second backward, which accumulates") {
  Tensor x = ones({3}, f64).requires_grad_();
  Tensor y = sum(x * x);
  y.backward(true);
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<double>{4, 4, 4});
}

TEST_CASE("tape: a running loss kept without detach is a loud error, not a leak") {
  Tensor w = ones({4}, f64).requires_grad_();
  Tensor running = scalar(0.0, f64);
  Tensor loss = sum(w * w);
  loss.backward();
  std::string msg = XG_THROW_MESSAGE(running = running + loss, std::logic_error);
  CHECK(xgt::contains(msg, "item()"));
  // The supported ways:
  running = running + loss.detach();
  double total = loss.item();
  CHECK(total == doctest::Approx(4.0));
}

TEST_CASE("tape: a training loop of many steps has a flat node count") {
  Tensor w = ones({8}, f64).requires_grad_();
  double running = 0;
  int64_t after_first = 0;
  for (int step = 0; step < 2000; ++step) {
    Tensor loss = sum(tanh(w * 0.5) * w);
    loss.backward();
    running += loss.item();
    w.zero_grad();
    if (step == 0) after_first = live_nodes();
  }
  CHECK(live_nodes() <= after_first);
  CHECK(running > 0);
}

TEST_CASE("tape: backward on a non-scalar needs a gradient of the output's shape") {
  Tensor x = ones({2, 3}, f64).requires_grad_();
  Tensor y = x * 2.0;
  std::string msg = XG_THROW_MESSAGE(y.backward(), ShapeError);
  CHECK(xgt::contains(msg, "(2,3)"));
  msg = XG_THROW_MESSAGE(y.backward(ones({3}, f64)), ShapeError);
  CHECK(xgt::contains(msg, "(3,)"));
  y.backward(full({2, 3}, 0.5, f64));
  CHECK(x.grad().to_vector() == std::vector<double>(6, 1.0));
}

TEST_CASE("tape: backward from something that needs no gradient is a clear error") {
  Tensor x = ones({2});
  std::string msg = XG_THROW_MESSAGE(sum(x).backward(), std::logic_error);
  CHECK(xgt::contains(msg, "requires_grad"));
}

TEST_CASE("tape: requires_grad_ only on leaves") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_THROWS_AS(y.requires_grad_(), std::logic_error);
}

TEST_CASE("tape: a custom op takes part like a built-in one") {
  // softplus(x) = log(1 + e^x), d/dx = sigmoid(x)
  CustomOp softplus{"softplus",
                    [](const std::vector<Tensor>& in) { return log(exp(in[0]) + 1.0); },
                    [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
                      return std::vector<Tensor>{g * sigmoid(in[0])};
                    }};
  Tensor x = tensor({0.0, 1.0}, {2}, f64).requires_grad_();
  Tensor y = apply(softplus, {x * 2.0});
  CHECK_FALSE(y.is_leaf());
  sum(y).backward();
  CHECK(x.grad().to_vector()[0] == doctest::Approx(2 * 0.5));
  CustomOp bad{"bad", [](const std::vector<Tensor>& in) { return in[0] * 1.0; },
               [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) { return std::vector<Tensor>{g, g}; }};
  Tensor z = apply(bad, {x});
  std::string msg = XG_THROW_MESSAGE(sum(z).backward(), std::logic_error);
  CHECK(xgt::contains(msg, "bad"));
}

TEST_CASE("tape: a post-accumulate hook fires once per backward, after every contribution") {
  // w is used early and late in the graph: its accumulator node runs twice
  // in one backward; the hook must see the full gradient, once.
  Tensor w = tensor({2.0}, {1}, f64).requires_grad_();
  Tensor x = tensor({3.0}, {1}, f64).requires_grad_();
  std::vector<double> seen_w;
  int calls_x = 0;
  const int64_t id = w.add_post_accumulate_grad_hook([&](const Tensor& leaf) { seen_w.push_back(leaf.grad().item()); });
  x.add_post_accumulate_grad_hook([&](const Tensor&) { ++calls_x; });
  Tensor a = w * x;            // dw: x = 3
  Tensor b = a * a;
  Tensor y = b + w * 10.0;     // dw: 2 a x + 10 = 2*6*3 + 10 = 46
  sum(y).backward();
  REQUIRE(seen_w.size() == 1);
  CHECK(seen_w[0] == doctest::Approx(46));
  CHECK(calls_x == 1);
  // A second backward accumulates: the hook sees the sum.
  sum(w * 1.0).backward();
  REQUIRE(seen_w.size() == 2);
  CHECK(seen_w[1] == doctest::Approx(47));
  CHECK(calls_x == 1);  // not reached
  w.remove_post_accumulate_grad_hook(id);
  sum(w * 1.0).backward();
  CHECK(seen_w.size() == 2);
}

TEST_CASE("tape: a post-accumulate hook fires when the last path brings no gradient") {
  // where() gives its condition no gradient; here the leaf's last edge is
  // that one, after its gradient arrived through another path.
  Tensor c = tensor({1.0, 0.0}, {2}, f64).requires_grad_();
  int calls = 0;
  double got = 0;
  c.add_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    got = leaf.grad().defined() ? sum(leaf.grad()).item() : -1;
  });
  // where() runs first (lowest seq), so its edge into c is processed last.
  Tensor y1 = where(c, tensor({5.0, 7.0}, {2}, f64), tensor({8.0, 9.0}, {2}, f64));  // (5, 9)
  Tensor y = y1 * (c * 2.0);
  sum(y).backward();
  CHECK(calls == 1);
  CHECK(got == doctest::Approx(2 * (5 + 9)));
}

TEST_CASE("tape: post-accumulate hooks only on leaves that require grad") {
  Tensor x = ones({2});
  CHECK(XG_THROW_MESSAGE(x.add_post_accumulate_grad_hook([](const Tensor&) {}), std::logic_error)
            .find("only leaves that require grad") != std::string::npos);
  Tensor w = ones({2}).requires_grad_();
  Tensor y = w * 2.0;
  CHECK_THROWS_AS(y.add_post_accumulate_grad_hook([](const Tensor&) {}), std::logic_error);
}

TEST_CASE("tape: functions between backward nodes run once after each formula, on this thread, until removed") {
  Tensor x = tensor({2.0, 3.0}, {2}, f64).requires_grad_();
  int first = 0, second = 0;
  std::string order;
  const int64_t a = add_between_backward_nodes([&] {
    ++first;
    order += "a";
  });
  const int64_t b = add_between_backward_nodes([&] {
    ++second;
    order += "b";
  });
  sum(exp(x) * x).backward();  // three formulas: sum, mul, exp
  CHECK(first == 3);
  CHECK(second == 3);
  CHECK(order == "ababab");  // each node: every function, in the order they were added
  int other_thread = -1;
  std::thread([&] {  // another thread's walk runs none of them
    Tensor y = tensor({1.0}, {1}, f64).requires_grad_();
    sum(y * 2.0).backward();
    other_thread = first;
  }).join();
  CHECK(other_thread == 3);
  remove_between_backward_nodes(a);
  remove_between_backward_nodes(12345);  // unknown: ignored
  sum(x * 2.0).backward();
  CHECK(first == 3);
  CHECK(second == 5);
  remove_between_backward_nodes(b);
  sum(x * 2.0).backward();
  CHECK(second == 5);
}
