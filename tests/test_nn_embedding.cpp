// nn/embedding.h
#include <doctest/doctest.h>

#include <limits>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Embedding: lookup shape, values and the zeroed padding row") {
  Generator g(1);
  nn::Embedding emb(10, 4, g, /*padding_idx=*/0);
  Tensor out = emb.forward({3, 0, 9, 3, 1, 0}, {2, 3});
  REQUIRE(out.shape() == Shape{2, 3, 4});
  for (int64_t c = 0; c < 4; ++c) {
    CHECK(out.at({0, 0, c}) == emb.weight().at({3, c}));
    CHECK(out.at({1, 0, c}) == emb.weight().at({3, c}));
    CHECK(out.at({0, 1, c}) == 0.0);
    CHECK(out.at({1, 2, c}) == 0.0);
  }
  // The tensor form of the ids gives the same result.
  CHECK(bit_equal(emb.forward(from_ints({3, 0, 9, 3, 1, 0}, {2, 3})), out));
}

TEST_CASE("nn Embedding: gradcheck w.r.t. the weight in float64") {
  Generator g(2);
  nn::Embedding emb(6, 3, g);
  emb.to(f64);
  xgnt::check_grad([&] { return emb.forward({1, 4, 4, 0, 5, 2, 1, 3}, {2, 4}); }, emb.parameters());
}

TEST_CASE("nn Embedding: the padding row gets no gradient, every other used row does") {
  // (No gradcheck here: the output does depend on the padding row, whose
  // gradient is suppressed on purpose, as in PyTorch.)
  Generator g(2);
  nn::Embedding emb(5, 3, g, /*padding_idx=*/2);
  Tensor out = emb.forward({2, 1, 2, 0, 4, 3}, {3, 2});
  xgnt::check_all_params_get_grad(emb, out);
  Tensor grad = emb.weight().grad();
  for (int64_t v = 0; v < 5; ++v) {
    bool nonzero = false;
    for (int64_t c = 0; c < 3; ++c) nonzero = nonzero || grad.at({v, c}) != 0.0;
    CHECK(nonzero == (v != 2));
  }
}

TEST_CASE("nn Embedding and EmbeddingBag: padding_idx -1 is the last row, as in PyTorch") {
  Generator g(2);
  nn::Embedding emb(5, 3, g, /*padding_idx=*/-1);
  REQUIRE(emb.padding_idx() == std::optional<int64_t>(4));
  for (int64_t c = 0; c < 3; ++c) CHECK(emb.weight().at({4, c}) == 0.0);
  sum(emb.forward({4, 1}, {2})).backward();
  for (int64_t c = 0; c < 3; ++c) CHECK(emb.weight().grad().at({4, c}) == 0.0);
  CHECK(!nn::Embedding(5, 3, g).padding_idx());
  nn::EmbeddingBag bag(4, 2, g, "sum", false, /*padding_idx=*/-2);
  for (int64_t c = 0; c < 2; ++c) CHECK(bag.weight().at({2, c}) == 0.0);  // zeroed, as PyTorch's reset_parameters
  {
    NoGradGuard off;
    bag.weight().copy_(ones({4, 2}));
  }
  CHECK(bag.forward(from_ints({2, 1, 2, 3}, {1, 4})).at({0, 0}) == 2.0);  // the two 2s count for nothing
}

TEST_CASE("nn Embedding: a bad id names Embedding, the id and the vocabulary size") {
  Generator g(2);
  nn::Embedding emb(5, 3, g);
  std::string msg = XGN_THROW_MESSAGE(emb.forward({1, 7}, {2}), std::invalid_argument);
  CHECK(xgnt::contains(msg, "Embedding"));
  CHECK(xgnt::contains(msg, "id 7"));
  CHECK(xgnt::contains(msg, "size 5"));
  msg = XGN_THROW_MESSAGE(emb.forward({-1}, {1}), std::invalid_argument);
  CHECK(xgnt::contains(msg, "id -1"));
  CHECK_THROWS_AS(emb.forward({1, 2, 3}, {2, 2}), ShapeError);
  CHECK_THROWS_AS(nn::Embedding(5, 3, g, 5), std::invalid_argument);
}

TEST_CASE("nn Embedding: ids from a tensor must be int64, and are range-checked like a vector of ids") {
  Generator g(2);
  nn::Embedding emb(5, 3, g);
  const std::string who = XGN_THROW_MESSAGE(emb.forward({7}, {1}), ShapeError);
  const std::string prefix = who.substr(0, who.find(": id "));  // describe(), as the other id errors say it
  CHECK(XGN_THROW_MESSAGE(emb.forward(tensor({1, 2}, {2}, f64)), ShapeError) ==
        prefix + ": ids must be an int64 tensor, got float64 (2,) (convert with .to(xg::i64))");
  CHECK(XGN_THROW_MESSAGE(emb.forward(from_ints({1, -1}, {2})), ShapeError) ==
        prefix + ": id -1 at position 1 is outside the vocabulary of size 5");
  CHECK(XGN_THROW_MESSAGE(emb.forward(from_ints({1, 5}, {2})), ShapeError) ==
        prefix + ": id 5 at position 1 is outside the vocabulary of size 5");
  Tensor ids = from_ints({1, 4, 4, 0, 2, 3}, {2, 3});
  Tensor out = emb.forward(ids);
  CHECK(out.shape() == Shape{2, 3, 3});
  CHECK(bit_equal(out, emb.forward({1, 4, 4, 0, 2, 3}, {2, 3})));
}

TEST_CASE("nn Embedding: init_std sets the spread of the initial weights, a bad one is an error") {
  Generator g(2);
  auto rms = [](nn::Embedding& e) {
    double sq = 0;
    for (double v : e.weight().to_vector()) sq += v * v;
    return std::sqrt(sq / static_cast<double>(e.weight().numel()));
  };
  nn::Embedding unit(100, 16, g), small(100, 16, g, std::nullopt, 0.02);
  CHECK(rms(unit) == doctest::Approx(1.0).epsilon(0.1));
  CHECK(rms(small) == doctest::Approx(0.02).epsilon(0.1));
  nn::Embedding padded(10, 4, g, 3, 0.02);
  for (int64_t c = 0; c < 4; ++c) CHECK(padded.weight().at({3, c}) == 0.0);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(nn::Embedding(10, 4, g, std::nullopt, -0.5), std::invalid_argument),
                 "Embedding: init_std -0.5: expected a finite number >= 0"));
}
