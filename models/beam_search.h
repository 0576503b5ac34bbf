// Beam search over any decoder that steps a batch of hypotheses: the search
// of the Transformer and of the recurrent encoder-decoder, written once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/tensor.h"

namespace xg::models {

// One entry of beam_search_nbest's list.
struct Hypothesis {
  std::vector<int64_t> tokens;  // without BOS and EOS
  double logp = 0;              // log-probability, EOS included when finished
  double score = 0;             // logp / ((5 + |Y|) / 6)^alpha, |Y| counting EOS
  bool finished = false;        // ended with EOS (else it reached max_len)
};

// What beam search needs of a decoder whose state holds one row per live
// hypothesis (one row at the start).
struct BeamDecoder {
  // Keeps rows `rows` of the state, in that order (a row may repeat).
  std::function<void(const std::vector<int64_t>& rows)> select_rows;
  // Feeds one token per row; returns the next token's logits (rows,V).
  std::function<Tensor(const std::vector<int64_t>& tokens)> step;
};

// The final beams, best score first: at each step every live hypothesis is
// extended by every token, and the beam_size best by score (logp divided by
// the length penalty ((5 + |Y|) / 6)^alpha of Wu et al.) are kept, finished
// ones included. Throws std::invalid_argument when beam_size < 1.
std::vector<Hypothesis> beam_search_steps(const BeamDecoder& decoder, int64_t bos, int64_t eos, int64_t max_len,
                                          int64_t beam_size, double alpha);

}  // namespace xg::models
