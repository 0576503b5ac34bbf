// nn/luong_attention.h
#include <doctest/doctest.h>

#include "test_nn_helpers.h"

using namespace xg;

namespace {

nn::LuongOptions luong(const std::string& score, int64_t q, int64_t k, int64_t window = 0) {
  nn::LuongOptions o;
  o.score = score;
  o.query_size = q;
  o.key_size = k;
  o.window = window;
  return o;
}

}  // namespace

TEST_CASE("nn LuongAttention: dot, general and concat scores, by hand") {
  Generator g(1);
  Tensor q = xgnt::input({1, 1, 3}, 1), k = xgnt::input({1, 2, 3}, 2);
  const auto qv = q.to_vector(), kv = k.to_vector();
  nn::LuongAttention dot(luong("dot", 3, 3), g), general(luong("general", 3, 3), g);
  general.to(f64);
  const auto W = general.state_dict().at("w_a.weight").to_vector();  // (Ck,Cq)
  for (int j = 0; j < 2; ++j) {
    double d = 0, gen = 0;
    for (int i = 0; i < 3; ++i) d += qv[i] * kv[j * 3 + i];
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 3; ++i) gen += kv[j * 3 + c] * W[c * 3 + i] * qv[i];
    CHECK(dot.scores(q, k).at({0, 0, j}) == doctest::Approx(d).epsilon(1e-12));
    CHECK(general.scores(q, k).at({0, 0, j}) == doctest::Approx(gen).epsilon(1e-12));
  }
  nn::LuongAttention concat(luong("concat", 3, 4), g);
  CHECK(concat.state_dict().count("w_a.v.weight") == 1);
  CHECK(concat.scores(zeros({2, 5, 3}), zeros({2, 6, 4})).shape() == Shape{2, 5, 6});
}

TEST_CASE("nn LuongAttention: gradcheck in float64 of every score, global and local-p, with padding") {
  for (const char* score : {"dot", "general", "concat"})
    for (int64_t window : {0, 2}) {
      CAPTURE(score);
      CAPTURE(window);
      Generator g(5);
      nn::LuongAttention att(luong(score, 3, 3, window), g);
      att.to(f64);
      Tensor q = xgnt::input({2, 3, 3}, 1).requires_grad_(), k = xgnt::input({2, 6, 3}, 2).requires_grad_();
      Tensor v = xgnt::input({2, 6, 2}, 3).requires_grad_();
      Tensor pad = from_vector(std::vector<double>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}, {2, 6});
      xgnt::check_grad(
          [&] {
            const nn::AttentionOutput a = att.forward(q, k, v, pad);
            return concat({reshape(a.context, {-1}), reshape(a.weights, {-1})}, 0);
          },
          att.parameters(), {q, k, v});
    }
}

TEST_CASE("nn LuongAttention: local-p's window and Gaussian against a hand computation") {
  Generator g(7);
  const int64_t S = 9, D = 2;
  nn::LuongAttention att(luong("dot", 2, 2, D), g);
  att.to(f64);
  Tensor q = xgnt::input({1, 1, 2}, 1), k = xgnt::input({1, S, 2}, 2), v = xgnt::input({1, S, 1}, 3);
  Tensor pad = zeros({1, S}, f64);
  pad.set({0, 8}, 1);  // row length 8
  const nn::AttentionOutput a = att.forward(q, k, v, pad);
  // p = 8 sigmoid(v_p . tanh(W_p q))
  const auto sd = att.state_dict();
  const auto Wp = sd.at("w_p.weight").to_vector(), vp = sd.at("v_p.weight").to_vector(), qv = q.to_vector(),
             kv = k.to_vector();
  double e = 0;
  for (int h = 0; h < 2; ++h) e += vp[h] * std::tanh(Wp[h * 2] * qv[0] + Wp[h * 2 + 1] * qv[1]);
  const double p = 8.0 / (1.0 + std::exp(-e));
  CHECK(att.aligned_positions(q, pad, S).item() == doctest::Approx(p).epsilon(1e-12));
  std::vector<double> w(S, 0.0);
  double total = 0;
  for (int s = 0; s < 8; ++s)
    if (std::abs(s - p) <= D) total += std::exp(qv[0] * kv[s * 2] + qv[1] * kv[s * 2 + 1]);
  int inside = 0;
  for (int s = 0; s < 8; ++s)
    if (std::abs(s - p) <= D) {
      ++inside;
      w[s] = std::exp(qv[0] * kv[s * 2] + qv[1] * kv[s * 2 + 1]) / total * std::exp(-(s - p) * (s - p) / (2.0 * 1.0 * 1.0));
    }
  CHECK(inside >= 1);
  for (int s = 0; s < S; ++s) CHECK(a.weights.at({0, 0, s}) == doctest::Approx(w[s]).epsilon(1e-12));
}

TEST_CASE("nn LuongAttention: bad options name the option and the accepted values") {
  Generator g(1);
  CHECK(XGN_THROW_MESSAGE(nn::LuongAttention(luong("mlp", 3, 3), g), std::invalid_argument) ==
        "LuongAttention: score 'mlp': expected dot, general or concat");
  CHECK(XGN_THROW_MESSAGE(nn::LuongAttention(luong("dot", 3, 4), g), std::invalid_argument) ==
        "LuongAttention: the dot score needs query_size == key_size, got 3 and 4");
  CHECK(XGN_THROW_MESSAGE(nn::LuongAttention(luong("general", 0, 4), g), std::invalid_argument) ==
        "LuongAttention: query_size 0: expected 1..16777216");
  CHECK(XGN_THROW_MESSAGE(nn::LuongAttention(luong("general", 3, 4, -1), g), std::invalid_argument) ==
        "LuongAttention: window -1: expected 0 (global) to 16777216");
  nn::LuongAttention global(luong("general", 3, 4), g);
  CHECK_THROWS_AS(global.aligned_positions(zeros({1, 1, 3}), Tensor(), 4), std::logic_error);
}
