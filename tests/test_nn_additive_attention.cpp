// nn/additive_attention.h
#include <doctest/doctest.h>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn AdditiveAttention: names, shapes, weights that sum to 1 and skip padded keys") {
  Generator g(1);
  nn::AdditiveAttention att(4, 6, 5, g);
  const auto sd = att.state_dict();
  CHECK(sd.size() == 4);
  CHECK(sd.at("w_q.weight").shape() == Shape{5, 4});
  CHECK(sd.at("w_q.bias").shape() == Shape{5});
  CHECK(sd.at("w_k.weight").shape() == Shape{5, 6});
  CHECK(sd.at("v.weight").shape() == Shape{1, 5});
  Tensor q = xgnt::input({2, 3, 4}, 1, f32), k = xgnt::input({2, 5, 6}, 2, f32), v = xgnt::input({2, 5, 7}, 3, f32);
  Tensor pad = from_vector(std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
  const nn::AttentionOutput a = att.forward(q, k, v, pad);
  CHECK(a.context.shape() == Shape{2, 3, 7});
  REQUIRE(a.weights.shape() == Shape{2, 3, 5});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      double total = 0;
      for (int64_t s = 0; s < 5; ++s) total += a.weights.at({b, t, s});
      CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
    }
  CHECK(a.weights.at({0, 1, 3}) == 0.0);
  CHECK(a.weights.at({0, 2, 4}) == 0.0);
  CHECK(a.weights.at({1, 0, 4}) > 0.0);
}

TEST_CASE("nn AdditiveAttention: the score is v^T tanh(W_q q + b + W_k k), by hand") {
  Generator g(2);
  nn::AdditiveAttention att(2, 3, 4, g);
  att.to(f64);
  Tensor q = xgnt::input({1, 1, 2}, 4), k = xgnt::input({1, 2, 3}, 5);
  const Tensor s = att.scores(q, k);
  const auto Wq = att.w_q->weight().to_vector(), bq = att.w_q->bias().to_vector(), Wk = att.w_k->weight().to_vector(),
             v = att.v->weight().to_vector(), qv = q.to_vector(), kv = k.to_vector();
  for (int j = 0; j < 2; ++j) {
    double e = 0;
    for (int a = 0; a < 4; ++a) {
      double x = bq[a];
      for (int i = 0; i < 2; ++i) x += Wq[a * 2 + i] * qv[i];
      for (int i = 0; i < 3; ++i) x += Wk[a * 3 + i] * kv[j * 3 + i];
      e += v[a] * std::tanh(x);
    }
    CHECK(s.at({0, 0, j}) == doctest::Approx(e).epsilon(1e-12));
  }
}

TEST_CASE("nn AdditiveAttention: gradcheck in float64, with a key padding mask") {
  Generator g(3);
  nn::AdditiveAttention att(3, 4, 5, g);
  att.to(f64);
  Tensor q = xgnt::input({2, 3, 3}, 1).requires_grad_(), k = xgnt::input({2, 4, 4}, 2).requires_grad_();
  Tensor v = xgnt::input({2, 4, 2}, 3).requires_grad_();
  Tensor pad = from_vector(std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0}, {2, 4});
  xgnt::check_grad(
      [&] {
        const nn::AttentionOutput a = att.forward(q, k, v, pad);
        return concat({reshape(a.context, {-1}), reshape(a.weights, {-1})}, 0);
      },
      att.parameters(), {q, k, v});
}

TEST_CASE("nn attend: a row whose keys are all padded gets uniform weights, bad shapes are named") {
  Tensor scores = xgnt::input({1, 2, 3}, 1), values = xgnt::input({1, 3, 2}, 2);
  const nn::AttentionOutput a = nn::attend(scores, values, ones({1, 3}, f64));
  for (double w : a.weights.to_vector()) CHECK(w == doctest::Approx(1.0 / 3));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(nn::attend(scores, values, ones({1, 4}, f64)), ShapeError),
                       "key_padding_mask (1,4): expected (1,3) (B,S)"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(nn::attend(scores, xgnt::input({1, 4, 2}, 3)), ShapeError),
                       "scores (1,2,3) (B,T,S) and values (1,4,2) (B,S,Cv) do not match"));
  Generator g(1);
  nn::AdditiveAttention att(4, 6, 5, g);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(att.forward(zeros({2, 3, 4}), zeros({2, 5, 5}), zeros({2, 5, 5})), ShapeError),
                       "expected (B,T,4) and (B,S,6)"));
}
