// Drawing the next token from a model's logits: temperature, top-k, top-p
// (nucleus) and a multinomial draw from a seeded Generator, as nanoGPT's and
// Hugging Face's generate() do.
//
//   xg::Generator gen(1);
//   xg::nn::SamplingOptions o;
//   o.temperature = 0.8;
//   o.top_k = 40;
//   std::vector<int64_t> next = xg::nn::sample(logits_last_position, gen, o);  // one id per row
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace xg::nn {

// How sample() picks among the ids: temperature, top-k, top-p.
struct SamplingOptions {
  double temperature = 1.0;  // > 0 divides the logits; 0 picks the most likely id (greedy)
  int64_t top_k = 0;         // > 0: only the k most likely ids (0: all)
  double top_p = 1.0;        // in (0, 1]: only the most likely ids whose probabilities reach top_p
};

// One id per row of `logits` (V) or (B, V), any float dtype, no gradient.
// The kept ids' probabilities (softmax of logits / temperature, then top-k,
// then top-p over the top-k's renormalised probabilities) are drawn from with one gen.uniform() per row.
// Ties in top-k / top-p keep the lower id. Throws std::invalid_argument for
// options out of range, ShapeError for a logits tensor that is not 1-D or
// 2-D, and std::invalid_argument naming the row for a NaN or +inf logit.
std::vector<int64_t> sample(const Tensor& logits, Generator& gen, const SamplingOptions& o = {});

// Index i with probability weights[i] / sum(weights): one gen.uniform().
// Weights must be finite and >= 0 with a positive sum (std::invalid_argument otherwise).
int64_t multinomial(const std::vector<double>& weights, Generator& gen);

}  // namespace xg::nn
