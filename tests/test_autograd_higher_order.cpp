// Higher-order gradients: xg::grad with create_graph, backward(create_graph),
// gradgradcheck of every op (float64 central differences of the gradient),
// hvp and jvp against finite differences, and the tape's checks (versions,
// anomaly mode, hooks, custom ops) in the second-order graph.
#include <cmath>

#include "autograd/detail/kernels.h"
#include "nn/nn.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;
using V = std::vector<Tensor>;

namespace {
GradOptions create() {
  GradOptions o;
  o.create_graph = true;
  return o;
}
}  // namespace

TEST_CASE("grad: derivatives of x^3 to the third order, exactly") {
  Tensor x = tensor({0.5, -1.25, 2.0}, {3}, f64).requires_grad_();
  Tensor y = sum(mul(mul(x, x), x));
  Tensor d1 = grad({y}, {x}, {}, create())[0];
  Tensor d2 = grad({sum(d1)}, {x}, {}, create())[0];
  Tensor d3 = grad({sum(d2)}, {x})[0];
  for (int64_t i = 0; i < 3; ++i) {
    const double v = x.at({i});
    CHECK(d1.at({i}) == doctest::Approx(3 * v * v).epsilon(1e-14));
    CHECK(d2.at({i}) == doctest::Approx(6 * v).epsilon(1e-14));
    CHECK(d3.at({i}) == doctest::Approx(6.0).epsilon(1e-14));
  }
  CHECK_FALSE(x.grad().defined());  // grad() touches no .grad
  CHECK(d3.is_leaf());              // without create_graph nothing is recorded
  CHECK_FALSE(d3.requires_grad());
}

TEST_CASE("grad: tanh's derivatives through its own output, to the third order") {
  Tensor x = tensor({0.3, -0.7}, {2}, f64).requires_grad_();
  Tensor d1 = grad({sum(tanh(x))}, {x}, {}, create())[0];
  Tensor d2 = grad({sum(d1)}, {x}, {}, create())[0];
  Tensor d3 = grad({sum(d2)}, {x})[0];
  for (int64_t i = 0; i < 2; ++i) {
    const double t = std::tanh(x.at({i}));
    CHECK(d1.at({i}) == doctest::Approx(1 - t * t).epsilon(1e-14));
    CHECK(d2.at({i}) == doctest::Approx(-2 * t * (1 - t * t)).epsilon(1e-14));
    CHECK(d3.at({i}) == doctest::Approx(-2 * (1 - t * t) * (1 - 3 * t * t)).epsilon(1e-13));
  }
}

TEST_CASE("grad: gelu's tanh form in float32 keeps its second derivative where tanh saturates") {
  // Each term of the second derivative carries tanh's slope. Written as
  // 1 - tanh^2 it is what float32's rounding of tanh leaves: at x = 4 a
  // relative error of about 1e-3, from x = 5.2 on exactly 0 (tanh rounds
  // to 1). As sech^2 it keeps float32's precision. From x = 2 on, past
  // the second derivative's zero near 1.4, so that the error is relative.
  std::vector<float> xs;
  for (int i = 0; i <= 80; ++i) xs.push_back(2.0f + 0.05f * static_cast<float>(i));  // 2 .. 6
  Tensor xf = from_vector(xs, {81}).requires_grad_();
  Tensor xd = xf.to(f64).detach().requires_grad_();
  auto second = [](const Tensor& x) {
    Tensor d1 = grad({sum(gelu(x, "tanh"))}, {x}, {}, create())[0];
    return grad({sum(d1)}, {x})[0].to(f64).to_vector();
  };
  const std::vector<double> gf = second(xf), gd = second(xd);
  double worst = 0;
  for (size_t i = 0; i < gd.size(); ++i) {
    REQUIRE(gd[i] != 0);
    worst = std::max(worst, std::fabs(gf[i] - gd[i]) / std::fabs(gd[i]));
  }
  CHECK(worst < 1e-5);
}

TEST_CASE("grad: inputs on the tape, several outputs, grad_outputs, unused inputs") {
  Tensor x = leaf({2, 3}, 1);
  Tensor h = tanh(x);  // an intermediate input
  Tensor y1 = sum(mul(h, h)), y2 = h * 3.0;
  Tensor g2 = leaf({2, 3}, 2);
  const V gs = grad({y1, y2}, {h, x}, {Tensor(), g2.detach()});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const double hv = h.at({i, j}), gv = g2.at({i, j});
      CHECK(gs[0].at({i, j}) == doctest::Approx(2 * hv + 3 * gv));
      CHECK(gs[1].at({i, j}) == doctest::Approx((2 * hv + 3 * gv) * (1 - hv * hv)));
    }
  Tensor unused = leaf({2}, 3);
  Tensor z = sum(tanh(x));
  GradOptions keep;
  keep.retain_graph = true;
  const std::string m = XG_THROW_MESSAGE(grad({z}, {x, unused}, {}, keep), std::logic_error);
  CHECK(m.find("input 1 " + shape_str({2})) != std::string::npos);
  CHECK(m.find("allow_unused") != std::string::npos);
  keep.allow_unused = true;
  const V r = grad({z}, {x, unused}, {}, keep);
  CHECK(r[0].defined());
  CHECK_FALSE(r[1].defined());
  const Tensor constant = tensor({1.0, 2.0}, {2}, f64);
  CHECK(XG_THROW_MESSAGE(grad({z}, {constant}), std::logic_error).find("does not require grad") != std::string::npos);
  CHECK(XG_THROW_MESSAGE(grad({x * 2.0}, {x}), ShapeError).find("single-element") != std::string::npos);
}

TEST_CASE("grad: runs only the part of the graph between the outputs and the inputs") {
  Tensor w = leaf({3}, 4);
  Tensor x = leaf({3}, 5);
  Tensor h = mul(w, x);
  Tensor y = sum(exp(h));
  grad({y}, {h});
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(x.grad().defined());
  // Without retain_graph the part that ran is freed, the rest is not: h's own
  // producer still runs in a later backward.
  sum(h).backward();
  CHECK(w.grad().defined());
}

TEST_CASE("backward(create_graph): grad() holds a differentiable gradient") {
  Tensor x = tensor({0.4, 1.5}, {2}, f64).requires_grad_();
  sum(mul(exp(x), x)).backward(false, true);  // d/dx = e^x (1 + x)
  Tensor g = x.grad();
  CHECK_FALSE(g.is_leaf());
  x.zero_grad();
  sum(g).backward();  // d2/dx2 = e^x (2 + x)
  for (int64_t i = 0; i < 2; ++i) {
    const double v = x.at({i});
    CHECK(x.grad().at({i}) == doctest::Approx(std::exp(v) * (2 + v)).epsilon(1e-14));
  }
}

TEST_CASE("backward(create_graph): zero_grad breaks the cycle between a leaf and its recorded gradient") {
  // x.grad()'s graph leads back to x's accumulator, which holds x: a cycle
  // (as in PyTorch) until the gradient is dropped.
  const int64_t before = live_nodes();
  {
    Tensor x = leaf({3}, 60);
    sum(mul(mul(x, x), x)).backward(false, true);
    CHECK(live_nodes() > before);
    x.zero_grad();
  }
  CHECK(live_nodes() == before);
  {
    Tensor x = leaf({3}, 61);
    const Tensor g = grad({sum(mul(mul(x, x), x))}, {x}, {}, create())[0];  // no cycle: nothing in x.grad()
    CHECK_FALSE(x.grad().defined());
  }
  CHECK(live_nodes() == before);
}

TEST_CASE("first-order backward records nothing and frees the graph as before") {
  const int64_t before = live_nodes();
  {
    Tensor x = leaf({4, 3}, 6);
    Tensor w = leaf({2, 3}, 7);
    Tensor y = sum(softmax(linear(tanh(x), w), -1) * 2.0);
    y.backward();
    CHECK(x.grad().is_leaf());
    CHECK_FALSE(x.grad().requires_grad());
    CHECK(w.grad().is_leaf());
  }
  CHECK(live_nodes() == before);
}

TEST_CASE("gradgradcheck: elementwise ops, broadcasting") {
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3}, {2, 3}}, {{2, 1, 3}, {4, 1}}, {{}, {2, 2}}};
  for (const auto& [sa, sb] : cases) {
    CAPTURE(shape_str(sa));
    CAPTURE(shape_str(sb));
    Tensor a = leaf(sa, 1), b = leaf(sb, 2);
    Tensor ap = leaf(sa, 3, 0.5, 2.0), bp = leaf(sb, 4, 0.5, 2.0);
    XG_CHECK_GRADGRAD([](const V& x) { return add(x[0], x[1]); }, a, b);
    XG_CHECK_GRADGRAD([](const V& x) { return sub(x[0], x[1]); }, a, b);
    XG_CHECK_GRADGRAD([](const V& x) { return mul(x[0], x[1]); }, a, b);
    XG_CHECK_GRADGRAD([](const V& x) { return div(x[0], x[1]); }, a, bp);
    XG_CHECK_GRADGRAD([](const V& x) { return pow(x[0], x[1]); }, ap, b);
    XG_CHECK_GRADGRAD([](const V& x) { return mul(maximum(x[0], x[1]), x[0]); }, a, b);
  }
}

TEST_CASE("gradgradcheck: unary ops and scalar forms") {
  Tensor a = leaf({3, 4}, 8), p = leaf({3, 4}, 9, 0.3, 2.0);
  XG_CHECK_GRADGRAD([](const V& x) { return neg(x[0]) * x[0]; }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return exp(x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return log(x[0]); }, p);
  XG_CHECK_GRADGRAD([](const V& x) { return sqrt(x[0]); }, p);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(abs(x[0]), x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(relu(x[0]), x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return gelu(x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return tanh(x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return sigmoid(x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(clamp(x[0], -1.0, 1.0), x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return pow(x[0], 2.5); }, p);
  XG_CHECK_GRADGRAD([](const V& x) { return (x[0] + 2.0) * (3.0 - x[0]) / 4.0 + 1.5 / x[0]; }, p);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(x[0].clone(), x[0]); }, a);
}

TEST_CASE("gradgradcheck: reductions") {
  Tensor a = leaf({3, 4, 2}, 10);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(sum(x[0], {1}, true), x[0]); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(mean(x[0], {0, 2}), mean(x[0], {0, 2})); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return mul(max(x[0], {-1}), sum(x[0], {-1})); }, a);
  XG_CHECK_GRADGRAD([](const V& x) { return var(x[0], {1}, 1); }, a);
}

TEST_CASE("gradgradcheck: shape ops") {
  Tensor a = leaf({2, 3, 4}, 11), b = leaf({2, 2, 4}, 12);
  auto sq = [](const Tensor& t) { return mul(t, t); };
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(reshape(x[0], {6, 4})); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(permute(x[0], {2, 0, 1})); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(transpose(x[0], 0, -1)); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(slice(x[0], 2, 1, 4, 2)); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(concat({x[0], x[1]}, 1)); }, a, b);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(stack({x[0], x[0]}, 0)); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return mul(split(x[0], {1, 2}, 1)[1], chunk(x[0], 3, 1)[0] + 1.0); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(squeeze(unsqueeze(x[0], 1), 1)); }, a);
  XG_CHECK_GRADGRAD([&](const V& x) { return sq(broadcast_to(x[0], {3, 2, 3, 4})); }, a);
}

TEST_CASE("gradgradcheck: matmul and linear") {
  Tensor a = leaf({2, 3, 4}, 13), b = leaf({4, 5}, 14), c = leaf({2, 1, 4, 2}, 15);
  XG_CHECK_GRADGRAD([](const V& x) { return matmul(x[0], x[1]); }, a, b);
  XG_CHECK_GRADGRAD([](const V& x) { return matmul(x[0], x[1]); }, a, c);
  XG_CHECK_GRADGRAD([](const V& x) { return tanh(matmul(x[0], transpose(x[0], -1, -2))); }, a);
  Tensor x = leaf({2, 3, 4}, 16), w = leaf({5, 4}, 17), bias = leaf({5}, 18);
  XG_CHECK_GRADGRAD([](const V& v) { return linear(v[0], v[1], v[2]); }, x, w, bias);
  XG_CHECK_GRADGRAD([](const V& v) { return tanh(linear(v[0], v[1])); }, x, w);
  Tensor x1 = leaf({4}, 19);
  XG_CHECK_GRADGRAD([](const V& v) { return sigmoid(linear(v[0], v[1], v[2])); }, x1, w, bias);
}

TEST_CASE("gradgradcheck: indexing, where, masked_fill") {
  Tensor table = leaf({5, 3}, 20);
  XG_CHECK_GRADGRAD([](const V& x) { return tanh(gather_rows(x[0], {4, 0, 4, 2}, {2, 2})); }, table);
  Tensor a = leaf({3, 4, 2}, 21);
  const Tensor idx = from_ints({3, 0, 3}, {3});
  XG_CHECK_GRADGRAD([&](const V& x) { return tanh(index_select(x[0], 1, idx)); }, a);
  Tensor b = leaf({4, 2}, 22);
  const Tensor cond = tensor({1, 0, 0, 1, 1, 0, 1, 0}, {4, 2}, f64);
  XG_CHECK_GRADGRAD([&](const V& x) { return tanh(where(cond, x[0], x[1])); }, a, b);
  XG_CHECK_GRADGRAD([&](const V& x) { return tanh(masked_fill(x[0], cond, 0.5)); }, a);
}

TEST_CASE("gradgradcheck: softmax, log-softmax, layer norm") {
  Tensor a = leaf({3, 4, 5}, 23);
  for (int64_t axis : {-1, 1, 0}) {
    CAPTURE(axis);
    XG_CHECK_GRADGRAD([axis](const V& x) { return softmax(x[0], axis); }, a);
    XG_CHECK_GRADGRAD([axis](const V& x) { return log_softmax(x[0], axis); }, a);
  }
  Tensor x = leaf({3, 2, 5}, 24), w = leaf({5}, 25), b = leaf({5}, 26);
  XG_CHECK_GRADGRAD([](const V& v) { return layer_norm(v[0], v[1], v[2]); }, x, w, b);
  XG_CHECK_GRADGRAD([](const V& v) { return layer_norm(v[0], Tensor(), Tensor(), 1e-3); }, x);
  XG_CHECK_GRADGRAD([](const V& v) { return layer_norm(v[0], v[1], Tensor()); }, x, w);
  Tensor r = leaf({3, 2, 5}, 27);
  XG_CHECK_GRADGRAD([](const V& v) { return add_layer_norm(v[0], v[1], v[2], v[3]); }, x, r, w, b);
  XG_CHECK_GRADGRAD([](const V& v) { return add_layer_norm(v[0], v[1], Tensor(), Tensor(), 1e-3); }, x, r);
}

TEST_CASE("gradgradcheck: cross-entropy with label smoothing and ignored rows") {
  Tensor logits = leaf({6, 5}, 27);
  const std::vector<int64_t> t = {1, 4, -100, 0, 2, 2};
  XG_CHECK_GRADGRAD([&](const V& x) { return cross_entropy(x[0], t); }, logits);
  XG_CHECK_GRADGRAD([&](const V& x) { return cross_entropy(x[0], t, CrossEntropyLossOptions().label_smoothing(0.1)); }, logits);
  XG_CHECK_GRADGRAD([&](const V& x) { return cross_entropy(x[0], {7, 7, 7, 7, 7, 7}, CrossEntropyLossOptions().ignore_index(7)); }, logits);  // all ignored
}

TEST_CASE("gradgradcheck: dropout and relu_dropout keep their mask") {
  Tensor a = leaf({4, 6}, 28);
  XG_CHECK_GRADGRAD([](const V& x) {
    Generator g(3);
    return mul(dropout(x[0], 0.4, true, g), x[0]);
  }, a);
  XG_CHECK_GRADGRAD([](const V& x) {
    Generator g(4);
    return mul(relu_dropout(x[0], 0.3, true, g), x[0]);
  }, a);
}

TEST_CASE("gradgradcheck: the fused attention core with masks, dropout and a cache") {
  Tensor q = leaf({2, 3, 4}, 29), k = leaf({2, 4, 4}, 30), v = leaf({2, 4, 4}, 31);
  AttentionOptions o;
  o.heads = 2;
  XG_CHECK_GRADGRAD([&](const V& x) { return attention(x[0], x[1], x[2], o); }, q, k, v);
  AttentionOptions m = o;
  m.key_padding_mask = tensor({0, 0, 1, 0, 0, 0, 0, 1}, {2, 4}, f64);
  m.causal = true;
  XG_CHECK_GRADGRAD([&](const V& x) { return attention(x[0], x[1], x[2], m); }, q, k, v);
  AttentionOptions d = o;
  d.dropout = 0.3;
  XG_CHECK_GRADGRAD([&](const V& x) {
    Generator g(5);
    AttentionOptions dd = d;
    dd.gen = &g;
    return attention(x[0], x[1], x[2], dd);
  }, q, k, v);
  AttentionOptions c = o;
  c.kv_length = 3;
  XG_CHECK_GRADGRAD([&](const V& x) { return attention(x[0], x[1], x[2], c); }, q, k, v);
  // Self-attention: one tensor in all three places.
  XG_CHECK_GRADGRAD([&](const V& x) { return attention(x[0], x[0], x[0], o); }, q);
}

TEST_CASE("the fused attention's second order equals its composition's") {
  Tensor q = leaf({2, 3, 4}, 32), k = leaf({2, 4, 4}, 33), v = leaf({2, 4, 4}, 34);
  AttentionOptions o;
  o.heads = 2;
  o.causal = true;
  auto composed = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    auto heads = [](const Tensor& t) { return permute(reshape(t, {2, t.size(1), 2, 2}), {0, 2, 1, 3}); };
    Tensor s = matmul(heads(q), transpose(heads(k), -1, -2)) * (1 / std::sqrt(2.0));
    Tensor mask = zeros({1, 1, 3, 4}, f64);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = i + 1; j < 4; ++j) mask.set({0, 0, i, j}, 1);
    Tensor p = softmax(masked_fill(s, mask, -1e9), -1);
    return reshape(permute(matmul(p, heads(v)), {0, 2, 1, 3}), {2, 3, 4});
  };
  auto second = [&](bool fused) {
    Tensor y = fused ? attention(q, k, v, o) : composed(q, k, v);
    Generator g(1);
    const V g1 = grad({sum(mul(y, rand(y.shape(), g, f64)))}, {q, k, v}, {}, create());
    const Tensor pen = sum(mul(g1[0], g1[0])) + sum(mul(g1[1], g1[2]));
    return grad({pen}, {q, k, v});
  };
  const V a = second(true), b = second(false);
  xgt::check_close(a, b, 1e-12);
}

TEST_CASE("custom ops: twice differentiable when they say so, a named error otherwise") {
  CustomOp cube;  // x^3, backward 3 x^2 g written with ops
  cube.name = "cube";
  cube.forward = [](const V& in) { return mul(mul(in[0], in[0]), in[0]); };
  cube.backward = [](const V& in, const Tensor&, const Tensor& g) { return V{mul(g, mul(in[0], in[0]) * 3.0)}; };
  cube.twice_differentiable = true;
  Tensor x = leaf({3}, 35);
  XG_CHECK_GRADGRAD([&](const V& v) { return xg::apply(cube, v); }, x);
  CustomOp once = cube;
  once.name = "once_cube";
  once.twice_differentiable = false;
  XG_CHECK_GRAD([&](const V& v) { return xg::apply(once, v); }, x);  // first order still right
  Tensor g = grad({sum(xg::apply(once, {x}))}, {x}, {}, create())[0];
  const std::string m = XG_THROW_MESSAGE(grad({sum(g)}, {x}), std::logic_error);
  CHECK(m.find("custom op 'once_cube'") != std::string::npos);
  CHECK(m.find("twice_differentiable") != std::string::npos);
}

TEST_CASE("gradgradcheck: the fused recurrence, every cell, direction, lengths and bias") {
  for (RecurrentCell cell : {RecurrentCell::tanh, RecurrentCell::relu, RecurrentCell::lstm, RecurrentCell::gru}) {
    const int64_t G = cell == RecurrentCell::lstm ? 4 : cell == RecurrentCell::gru ? 3 : 1, H = 2;
    for (bool reverse : {false, true})
      for (bool with_lengths : {false, true}) {
        CAPTURE(static_cast<int>(cell));
        CAPTURE(reverse);
        CAPTURE(with_lengths);
        const std::vector<int64_t> lengths = with_lengths ? std::vector<int64_t>{3, 1} : std::vector<int64_t>{};
        Tensor proj = leaf({2, 3, G * H}, 50), w = leaf({G * H, H}, 51, -1, 1), b = leaf({G * H}, 52);
        Tensor h0 = leaf({2, H}, 53), c0 = leaf({2, H}, 54);
        const bool lstm = cell == RecurrentCell::lstm;
        if (lstm)
          XG_CHECK_GRADGRAD([&](const V& x) { return recurrence(cell, x[0], x[1], x[2], x[3], x[4], lengths, reverse); },
                            proj, w, b, h0, c0);
        else
          XG_CHECK_GRADGRAD([&](const V& x) { return recurrence(cell, x[0], x[1], x[2], x[3], Tensor(), lengths, reverse); },
                            proj, w, b, h0);
        if (!lstm && !with_lengths)  // no bias
          XG_CHECK_GRADGRAD([&](const V& x) { return recurrence(cell, x[0], x[1], Tensor(), x[2], Tensor(), {}, reverse); },
                            proj, w, h0);
      }
  }
}

TEST_CASE("hvp equals finite differences of gradients, jvp equals finite differences of values") {
  Generator gen(40);
  Tensor w1 = randn({6, 4}, gen, f64, 0, 0.5).requires_grad_(), b1 = randn({6}, gen, f64).requires_grad_();
  Tensor w2 = randn({3, 6}, gen, f64, 0, 0.5).requires_grad_();
  const Tensor x = randn({5, 4}, gen, f64);
  const std::vector<int64_t> t = {0, 2, 1, 1, 2};
  const V params = {w1, b1, w2};
  auto loss = [&]() { return cross_entropy(linear(gelu(linear(x, w1, b1)), w2), t, CrossEntropyLossOptions().label_smoothing(0.1)); };
  V v;
  for (const Tensor& p : params) v.push_back(randn(p.shape(), gen, f64));
  Tensor value;
  const V hv = hvp(loss, params, v, &value);
  CHECK(value.item() == doctest::Approx(loss().item()));
  const double eps = 1e-5;
  auto grads_at = [&](double s) {
    {
      NoGradGuard off;
      for (size_t i = 0; i < params.size(); ++i) const_cast<Tensor&>(params[i]).copy_(params[i] + v[i] * s);
    }
    const V g = grad({loss()}, params);
    {
      NoGradGuard off;
      for (size_t i = 0; i < params.size(); ++i) const_cast<Tensor&>(params[i]).copy_(params[i] - v[i] * s);
    }
    return g;
  };
  const V gp = grads_at(eps), gm = grads_at(-eps);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto a = hv[i].to_vector(), p = gp[i].to_vector(), m = gm[i].to_vector();
    double diff = 0, scale = 1e-300;
    for (size_t j = 0; j < a.size(); ++j) {
      diff = std::max(diff, std::abs(a[j] - (p[j] - m[j]) / (2 * eps)));
      scale = std::max(scale, std::abs(a[j]));
    }
    CAPTURE(i);
    CHECK(diff / scale < 1e-6);
  }
  // jvp of a vector function.
  const Tensor a = randn({3, 4}, gen, f64), dir = randn({3, 4}, gen, f64);
  auto f = [](const V& in) { return softmax(tanh(in[0]) * 2.0, -1); };
  const Tensor jv = jvp(f, {a}, {dir});
  Tensor plus, minus;
  {
    NoGradGuard off;
    plus = f({a + dir * eps});
    minus = f({a - dir * eps});
  }
  const auto j = jv.to_vector(), p = plus.to_vector(), m = minus.to_vector();
  for (size_t i = 0; i < j.size(); ++i) CHECK(j[i] == doctest::Approx((p[i] - m[i]) / (2 * eps)).epsilon(1e-7));
  CHECK(XG_THROW_MESSAGE(hvp(loss, params, {v[0]}), std::invalid_argument).find("3 inputs") != std::string::npos);
  CHECK(XG_THROW_MESSAGE(jvp(f, {a}, {dir.reshape({12})}), ShapeError).find("direction 0") != std::string::npos);
}

TEST_CASE("second-order graph: version counters, anomaly mode and hooks keep working") {
  Tensor x = leaf({3}, 41);
  Tensor c = leaf({3}, 42);
  Tensor g = grad({sum(mul(mul(x, x), c))}, {x}, {}, create())[0];  // 2 x c, recorded with c saved
  c.fill_(2.0);
  const std::string m = XG_THROW_MESSAGE(grad({sum(g)}, {c}), std::logic_error);
  CHECK(m.find("backward of mul") != std::string::npos);
  CHECK(m.find("modified in place") != std::string::npos);

  // z^1.5: finite value and first derivative at 0, infinite second derivative.
  Tensor z = tensor({0.0, 1.0}, {2}, f64).requires_grad_();
  Tensor gz = grad({sum(pow(z, 1.5))}, {z}, {}, create())[0];
  {
    DetectAnomalyGuard anomaly;
    const std::string am = XG_THROW_MESSAGE(grad({sum(gz)}, {z}), AnomalyError);
    CHECK(am.find("backward of pow produced inf") != std::string::npos);
  }
  Tensor y = tensor({0.5, 2.0}, {2}, f64).requires_grad_();
  int fired = 0;
  y.add_post_accumulate_grad_hook([&](const Tensor&) { ++fired; });
  sum(mul(mul(y, y), y)).backward(false, true);
  CHECK(fired == 1);
  Tensor gy = y.grad();
  y.zero_grad();
  sum(gy).backward();
  CHECK(fired == 2);
  CHECK(y.grad().at({1}) == doctest::Approx(12.0));  // d/dy sum(3 y^2) = 6 y
}

TEST_CASE("gradgradcheck: linear_cross_entropy, first gradients with respect to each input alone too") {
  Tensor x = leaf({2, 3, 4}, 60), w = leaf({5, 4}, 61), b = leaf({5}, 62);
  const std::vector<int64_t> t = {1, 4, -100, 0, 2, 2};
  XG_CHECK_GRADGRAD([&](const V& v) { return linear_cross_entropy(v[0], v[1], v[2], t, -100, 0.1); }, x, w, b);
  XG_CHECK_GRADGRAD([&](const V& v) { return linear_cross_entropy(v[0], v[1], Tensor(), t); }, x, w);
}

// Modules: gradgradcheck over an input and every parameter (mixed partials:
// the first gradient with respect to each alone and each complement too).
TEST_CASE("gradgradcheck: modules whose backward recomputes (bidirectional LSTM with lengths, LayerNorm, cross-attention)") {
  Generator gen(70);
  nn::LSTM lstm(nn::RNNOptions(2, 2).batch_first(true).bidirectional(true), gen);
  lstm.to(f64);
  Tensor x = leaf({2, 3, 2}, 71);
  std::vector<Tensor> ps = lstm.parameters();
  ps.push_back(x);
  GradcheckOptions o;
  o.max_samples_per_input = 6;
  auto r = gradgradcheck([&]() { return lstm.forward(x, Tensor(), {3, 2}).output; }, ps, o);
  CHECK_MESSAGE(r.ok, r.message);

  nn::LayerNorm ln(4);
  ln.to(f64);
  Tensor y = leaf({3, 4}, 72);
  std::vector<Tensor> lp = ln.parameters();
  lp.push_back(y);
  r = gradgradcheck([&]() { return tanh(ln.forward(y)); }, lp);
  CHECK_MESSAGE(r.ok, r.message);

  nn::MultiHeadAttention mha(4, 2, 0.0, gen, nullptr);
  mha.to(f64);
  Tensor q = leaf({1, 2, 4}, 73), mem = leaf({1, 3, 4}, 74);
  const Tensor pad = tensor({0, 0, 1}, {1, 3}, f64);
  std::vector<Tensor> mp = mha.parameters();
  mp.push_back(q);
  mp.push_back(mem);
  r = gradgradcheck([&]() { return mha.forward(q, mem, mem, pad); }, mp, o);
  CHECK_MESSAGE(r.ok, r.message);
}
