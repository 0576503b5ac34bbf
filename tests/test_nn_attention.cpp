// nn/attention.h. Shapes: B batch, T query length, S key length, C width, H heads.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

namespace {

// (B,S) mask, nonzero = padded: batch 0 pads its last key, batch 1 its last two.
Tensor pad_mask(int64_t B, int64_t S, Dtype d = f64) {
  Tensor m = zeros({B, S}, d);
  m.set({0, S - 1}, 1.0);
  if (B > 1) {
    m.set({1, S - 1}, 1.0);
    m.set({1, S - 2}, 1.0);
  }
  return m;
}

nn::MultiHeadAttention make_mha(uint64_t seed, int64_t C = 8, int64_t H = 2) {
  Generator g(seed);
  return nn::MultiHeadAttention(C, H, 0.0, g, nullptr);
}

}  // namespace

TEST_CASE("nn MultiHeadAttention: submodules, shapes, self-attention shorthand") {
  Generator g(1);
  nn::MultiHeadAttention mha(8, 2, 0.0, g, nullptr);
  std::vector<std::string> names;
  for (auto& c : mha.named_children()) names.push_back(c.first);
  CHECK(names == std::vector<std::string>{"w_q", "w_k", "w_v", "w_o"});
  CHECK(mha.num_parameters() == 4 * (64 + 8));
  Tensor x = xgnt::input({2, 5, 8}, 2, f32);
  Tensor y = mha.forward(x, x, x);
  CHECK(y.shape() == Shape{2, 5, 8});
  CHECK(bit_equal(mha.forward(x), y));
  Tensor mem = xgnt::input({2, 3, 8}, 3, f32);
  CHECK(mha.forward(x, mem, mem).shape() == Shape{2, 5, 8});
}

TEST_CASE("nn MultiHeadAttention: gradcheck, self-attention with key-padding and causal masks") {
  auto mha = make_mha(4);
  mha.to(f64);
  Tensor x = xgnt::input({2, 4, 8}, 5).requires_grad_();
  Tensor mask = pad_mask(2, 4);
  SUBCASE("padding and causal") {
    xgnt::check_grad([&] { return mha.forward(x, x, x, mask, /*causal=*/true); }, mha.parameters(), {x});
  }
  SUBCASE("padding only") {
    xgnt::check_grad([&] { return mha.forward(x, x, x, mask); }, mha.parameters(), {x});
  }
}

TEST_CASE("nn MultiHeadAttention: gradcheck, cross-attention with T != S") {
  auto mha = make_mha(6);
  mha.to(f64);
  Tensor q = xgnt::input({2, 3, 8}, 7).requires_grad_();   // (B,T,C)
  Tensor kv = xgnt::input({2, 5, 8}, 8).requires_grad_();  // (B,S,C)
  Tensor mask = pad_mask(2, 5);
  xgnt::check_grad([&] { return mha.forward(q, kv, kv, mask); }, mha.parameters(), {q, kv});
}

TEST_CASE("nn MultiHeadAttention: every parameter gets a gradient (the key bias's is zero by construction)") {
  auto mha = make_mha(9);
  Tensor q = xgnt::input({2, 3, 8}, 1, f32), kv = xgnt::input({2, 5, 8}, 2, f32);
  // Adding b_k to every key adds q·b_k to a whole softmax row: the output
  // does not depend on it, as in PyTorch.
  xgnt::check_all_params_get_grad(mha, mha.forward(q, kv, kv, pad_mask(2, 5, f32)), 7, {"w_k.bias"});
}

TEST_CASE("nn MultiHeadAttention: causal, query i does not see key j > i") {
  auto mha = make_mha(10);
  mha.to(f64);
  const int64_t T = 6, j = 3;
  Tensor x = xgnt::input({2, T, 8}, 11);
  Tensor x2 = x.clone();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 8; ++c) x2.set({b, j, c}, x.at({b, j, c}) + 1.0);
  Tensor y = mha.forward(x, x, x, Tensor(), true), y2 = mha.forward(x2, x2, x2, Tensor(), true);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t) {
      double diff = 0;
      for (int64_t c = 0; c < 8; ++c) diff = std::max(diff, std::abs(y.at({b, t, c}) - y2.at({b, t, c})));
      CAPTURE(t);
      if (t < j) CHECK(diff < 1e-12);
      else CHECK(diff > 1e-6);  // positions j.. do see the change
    }
  // Without the mask, earlier positions see it too.
  Tensor z = mha.forward(x), z2 = mha.forward(x2);
  CHECK(std::abs(z.at({0, 0, 0}) - z2.at({0, 0, 0})) > 1e-6);
}

TEST_CASE("nn MultiHeadAttention: padded keys are ignored, an all-padded row gives no NaN") {
  auto mha = make_mha(12);
  mha.to(f64);
  Tensor q = xgnt::input({2, 3, 8}, 1), kv = xgnt::input({2, 4, 8}, 2);
  Tensor mask = pad_mask(2, 4);
  Tensor kv2 = kv.clone();
  for (int64_t c = 0; c < 8; ++c) kv2.set({1, 2, c}, 100.0);  // a padded key of batch 1
  Tensor y = mha.forward(q, kv, kv, mask), y2 = mha.forward(q, kv2, kv2, mask);
  for (size_t i = 0; i < y.to_vector().size(); ++i) CHECK(std::abs(y.to_vector()[i] - y2.to_vector()[i]) < 1e-12);

  Tensor all = ones({2, 4}, f64);
  Tensor yall = mha.forward(q, kv, kv, all);
  for (double v : yall.to_vector()) CHECK(std::isfinite(v));
  // Gradients through a fully masked row are finite too (float32).
  auto m32 = make_mha(14);
  Tensor pq = xgnt::input({2, 3, 8}, 3, f32).requires_grad_();
  Tensor pkv = xgnt::input({2, 4, 8}, 4, f32).requires_grad_();
  sum(m32.forward(pq, pkv, pkv, ones({2, 4}))).backward();
  for (double v : pq.grad().to_vector()) CHECK(std::isfinite(v));
  for (double v : pkv.grad().to_vector()) CHECK(std::isfinite(v));
}

TEST_CASE("nn MultiHeadAttention: stored attention weights, per head and averaged") {
  auto mha = make_mha(13);
  CHECK_THROWS_AS(mha.attention_weights(), std::logic_error);
  mha.set_store_attention(true);
  Tensor x = xgnt::input({2, 4, 8}, 1, f32);
  mha.forward(x, x, x, pad_mask(2, 4, f32), true);
  Tensor per_head = mha.attention_weights(false), avg = mha.attention_weights();
  REQUIRE(per_head.shape() == Shape{2, 2, 4, 4});  // (B,H,T,S)
  REQUIRE(avg.shape() == Shape{2, 4, 4});          // (B,T,S)
  CHECK_FALSE(per_head.requires_grad());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 4; ++t) {
      double row = 0;
      for (int64_t s = 0; s < 4; ++s) {
        row += avg.at({b, t, s});
        if (s > t) CHECK(avg.at({b, t, s}) == 0.0);             // causal
        if (s == 3 && t == 3) CHECK(avg.at({b, t, s}) == 0.0);  // padded (both batches)
      }
      CHECK(row == doctest::Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("nn MultiHeadAttention: dropout on the weights in training only") {
  Generator g(1);
  nn::MultiHeadAttention mha(8, 2, 0.5, g, std::make_shared<Generator>(2));
  Tensor x = xgnt::input({2, 4, 8}, 1, f32);
  CHECK_FALSE(bit_equal(mha.forward(x), mha.forward(x)));
  mha.eval();
  CHECK(bit_equal(mha.forward(x), mha.forward(x)));
}

TEST_CASE("nn MultiHeadAttention: errors name the op and the shapes") {
  Generator g(1);
  CHECK_THROWS_AS(nn::MultiHeadAttention(10, 3, 0.0, g, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(nn::MultiHeadAttention(8, 2, 0.1, g, nullptr), std::invalid_argument);
  nn::MultiHeadAttention mha(8, 2, 0.0, g, nullptr);
  Tensor q = zeros({2, 3, 8}), k = zeros({2, 5, 8});
  std::string msg = XGN_THROW_MESSAGE(mha.forward(q, k, zeros({2, 4, 8})), ShapeError);
  CHECK(xgnt::contains(msg, "MultiHeadAttention"));
  CHECK(xgnt::contains(msg, "(2,5,8)"));
  CHECK(xgnt::contains(msg, "(2,4,8)"));
  msg = XGN_THROW_MESSAGE(mha.forward(zeros({2, 3, 6}), k, k), ShapeError);
  CHECK(xgnt::contains(msg, "(2,3,6)"));
  msg = XGN_THROW_MESSAGE(mha.forward(q, k, k, zeros({2, 3})), ShapeError);
  CHECK(xgnt::contains(msg, "key_padding_mask (2,3)"));
  CHECK(xgnt::contains(msg, "(2,5)"));
  CHECK_THROWS_AS(mha.forward(zeros({3, 8}), k, k), ShapeError);
}

TEST_CASE("nn MultiHeadAttention: the self-attention cache is written in place, preallocated, and differentiable under grad") {
  auto mha = make_mha(31);
  mha.to(f64);
  Tensor x = xgt::leaf({2, 4, 8}, 32).detach();
  nn::MultiHeadAttention::KVCache cache;
  cache.reserve = 6;
  {
    NoGradGuard ng;
    const double* storage = nullptr;
    for (int64_t t = 0; t < 4; ++t) {
      Tensor step = slice(x, 1, t, t + 1);
      mha.extend_kv(cache, step, step);
      CHECK(cache.length() == t + 1);
      CHECK(cache.k.size(1) == 6);  // the reserved capacity, allocated once
      if (t == 0) storage = cache.k.data<double>();
      CHECK(cache.k.data<double>() == storage);  // no reallocation, no copy of earlier positions
    }
    // The cached projections equal projecting the whole prefix at once.
    nn::MultiHeadAttention::KVCache whole = mha.project_kv(x, x);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 8; ++c) CHECK(cache.k.at({b, t, c}) == doctest::Approx(whole.k.at({b, t, c})).epsilon(1e-14));
    // Attending to it equals attending to the whole prefix.
    Tensor q = xgt::leaf({2, 1, 8}, 33).detach();
    xgt::check_close({mha.attend(q, cache)}, {mha.attend(q, whole)}, 1e-12);
    for (int64_t t = 4; t < 8; ++t) mha.extend_kv(cache, slice(x, 1, 0, 1), slice(x, 1, 0, 1));
    CHECK(cache.length() == 8);
    CHECK(cache.k.size(1) == 12);  // doubled once full
  }
  // Under grad mode the cache concatenates, so gradients reach w_k and w_v:
  // the same gradients as through a cache filled in one call.
  auto grads = [&](bool stepwise) {
    mha.zero_grad();
    nn::MultiHeadAttention::KVCache c;
    if (stepwise)
      for (int64_t t = 0; t < 2; ++t) mha.extend_kv(c, slice(x, 1, t, t + 1), slice(x, 1, t, t + 1));
    else
      mha.extend_kv(c, slice(x, 1, 0, 2), slice(x, 1, 0, 2));
    sum(mha.attend(slice(x, 1, 1, 2), c) * slice(x, 1, 0, 1)).backward();
    return std::vector<Tensor>{mha.w_k->weight().grad(), mha.w_v->weight().grad(), mha.w_q->weight().grad()};
  };
  const std::vector<Tensor> step = grads(true), once = grads(false);
  for (const Tensor& g : step) {
    REQUIRE(g.defined());
    CHECK(sum(g * g).item() > 0);
  }
  xgt::check_close(step, once, 1e-12);
}

TEST_CASE("nn MultiHeadAttention: equals softmax(q k^T / sqrt(D)) v per head from its own projections, distinct key and value") {
  Generator init(21);
  nn::MultiHeadAttention mha(8, 2, 0.0, init, nullptr);
  mha.to(f64);
  const Tensor q_in = xgt::leaf({2, 3, 8}, 22).detach(), k_in = xgt::leaf({2, 5, 8}, 23).detach(),
               v_in = xgt::leaf({2, 5, 8}, 24).detach();
  const Tensor mask = from_vector({0, 0, 0, 1, 1, 0, 1, 0, 0, 0}, {2, 5}, f64);
  const Tensor got = mha.forward(q_in, k_in, v_in, mask);
  // The reference, from the module's weights and ops only.
  auto heads = [](const Tensor& t) { return t.reshape({2, t.size(1), 2, 4}).permute({0, 2, 1, 3}); };  // (B,H,n,D)
  const Tensor q = heads(linear(q_in, mha.w_q->weight(), mha.w_q->bias()));
  const Tensor k = heads(linear(k_in, mha.w_k->weight(), mha.w_k->bias()));
  const Tensor v = heads(linear(v_in, mha.w_v->weight(), mha.w_v->bias()));
  Tensor scores = matmul(q, transpose(k, -1, -2)) * (1 / std::sqrt(4.0));
  scores = masked_fill(scores, mask.reshape({2, 1, 1, 5}), -1e9);
  const Tensor ctx = matmul(softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({2, 3, 8});
  const Tensor want = linear(ctx, mha.w_o->weight(), mha.w_o->bias());
  xgt::check_close({got}, {want}, 1e-12);
}
