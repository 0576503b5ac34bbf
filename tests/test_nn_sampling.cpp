// Sampling the next token: greedy, temperature, top-k, top-p, multinomial.
#include <cmath>

#include "nn/sampling.h"
#include "tests/helpers.h"

using namespace xg;
using nn::SamplingOptions;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Frequencies of `n` draws from one row of logits.
std::vector<double> frequencies(const Tensor& logits, const SamplingOptions& o, int n, uint64_t seed = 1) {
  Generator g(seed);
  std::vector<double> f(logits.size(-1), 0.0);
  for (int i = 0; i < n; ++i) f[nn::sample(logits, g, o)[0]] += 1.0 / n;
  return f;
}
}  // namespace

TEST_CASE("sampling: multinomial draws each index in proportion to its weight") {
  Generator g(3);
  const std::vector<double> w{1, 0, 3, 6};
  std::vector<double> f(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) f[nn::multinomial(w, g)] += 1.0 / n;
  for (int i = 0; i < 4; ++i) {
    const double p = w[i] / 10, sigma = std::sqrt(p * (1 - p) / n);
    CHECK(std::abs(f[i] - p) <= 4 * sigma + 1e-12);
  }
  CHECK(f[1] == 0);
  CHECK(contains(XG_THROW_MESSAGE(nn::multinomial({1, -1}, g), std::invalid_argument), "weight 1 is -1"));
  CHECK(contains(XG_THROW_MESSAGE(nn::multinomial({0, 0}, g), std::invalid_argument), "sum to 0"));
  CHECK(contains(XG_THROW_MESSAGE(nn::multinomial({1, NAN}, g), std::invalid_argument), "weight 1 is nan"));
}

TEST_CASE("sampling: softmax probabilities at temperature 1, sharper below, greedy at 0") {
  const Tensor logits = tensor({0.0, std::log(2.0), std::log(7.0)}, {3}, f64);  // probabilities 0.1, 0.2, 0.7
  const int n = 40000;
  const auto f = frequencies(logits, {}, n);
  const double want[] = {0.1, 0.2, 0.7};
  for (int i = 0; i < 3; ++i) CHECK(std::abs(f[i] - want[i]) <= 4 * std::sqrt(want[i] * (1 - want[i]) / n));
  SamplingOptions cold;
  cold.temperature = 0.5;  // probabilities ~ 1 : 4 : 49
  const auto c = frequencies(logits, cold, n);
  CHECK(std::abs(c[2] - 49.0 / 54) <= 4 * std::sqrt((49.0 / 54) * (5.0 / 54) / n));
  SamplingOptions greedy;
  greedy.temperature = 0;
  Generator g(1);
  CHECK(nn::sample(tensor({1.0, 5.0, 5.0, 2.0}, {4}), g, greedy) == std::vector<int64_t>{1});  // first of ties
}

TEST_CASE("sampling: top-k keeps the k most likely, top-p the smallest prefix reaching p") {
  const Tensor logits = tensor({std::log(0.05), std::log(0.5), std::log(0.15), std::log(0.3)}, {4}, f64);
  SamplingOptions k2;
  k2.top_k = 2;  // ids 1 and 3, renormalised 0.625 / 0.375
  const int n = 20000;
  const auto f = frequencies(logits, k2, n);
  CHECK(f[0] == 0);
  CHECK(f[2] == 0);
  CHECK(std::abs(f[1] - 0.625) <= 4 * std::sqrt(0.625 * 0.375 / n));
  SamplingOptions p;
  p.top_p = 0.79;  // 0.5 + 0.3 reaches 0.79: ids 1 and 3 only
  const auto fp = frequencies(logits, p, n);
  CHECK(fp[0] == 0);
  CHECK(fp[2] == 0);
  CHECK(fp[1] > 0.55);
  p.top_p = 0.81;  // needs id 2 as well
  CHECK(frequencies(logits, p, n)[2] > 0.1);
  SamplingOptions both;
  both.top_k = 3;
  both.top_p = 0.52;  // of the top 3 (mass 0.95), id 1 holds 0.526: it alone reaches 0.52
  const auto fb = frequencies(logits, both, 2000);
  CHECK(fb[0] == 0);
  CHECK(fb[2] == 0);
  CHECK(fb[3] == 0);
}

TEST_CASE("sampling: one id per row, reproducible from the seed") {
  Generator g1(5), g2(5);
  Tensor logits = tensor({0, 1, 2, 3, 3, 2, 1, 0}, {2, 4});
  const auto a = nn::sample(logits, g1), b = nn::sample(logits, g2);
  CHECK(a.size() == 2);
  CHECK(a == b);
  SamplingOptions greedy;
  greedy.temperature = 0;
  CHECK(nn::sample(logits, g1, greedy) == std::vector<int64_t>{3, 0});
}

TEST_CASE("sampling: bad options and logits are clear errors") {
  Generator g(1);
  Tensor ok = zeros({4});
  SamplingOptions o;
  o.temperature = -1;
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(ok, g, o), std::invalid_argument), "temperature -1"));
  o = {};
  o.top_k = -2;
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(ok, g, o), std::invalid_argument), "top_k -2"));
  o = {};
  o.top_p = 0;
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(ok, g, o), std::invalid_argument), "expected a number in (0, 1]"));
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(zeros({2, 2, 2}), g), ShapeError), "(B,V)"));
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(tensor({0, NAN, 1}, {3}), g), std::invalid_argument),
                 "row 0 holds nan at id 1"));
  CHECK(contains(XG_THROW_MESSAGE(nn::sample(full({3}, -INFINITY), g), std::invalid_argument), "is -inf"));
}
