// What the encoder-decoder models of models/ train on: token ids with three
// special tokens, (source, target) pairs, and padded teacher-forcing batches.
//
//   auto b = xg::models::make_batch({{{3, 4, 5}, {5, 4, 3}}});  // src (1,3), tgt_in BOS 5 4 3, tgt_out 5 4 3 EOS
//   Tensor loss = transformer.loss(b.src, b.tgt_in, b.tgt_out, 0.1);
#pragma once

#include <cstdint>
#include <vector>

#include "models/transformer.h"

namespace xg::models {

// Token ids: 0 padding, 1 begin, 2 end; symbols are 3 .. vocab-1.
constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kFirstSymbol = 3;
// The applications' decoders stop a source's output after
// kOutputPerSourceToken * |src| + kOutputExtra tokens unless told otherwise
// (and never past the model's positions): apps/common's output_limit, and
// what xg_export's manifest tells a runtime.
constexpr int64_t kOutputPerSourceToken = 2, kOutputExtra = 5;

// A (source, target) pair of token sequences.
struct Example {
  // src and tgt: symbols only (no BOS/EOS).
  std::vector<int64_t> src, tgt;  // symbols only (no BOS/EOS)
};

// Padded batch: src (B,S); tgt_in = BOS + tgt (B,T); tgt_out = tgt + EOS (B,T).
struct TrainBatch {
  // src (B,S), tgt_in and tgt_out (B,T), padded with kPad.
  Batch src, tgt_in, tgt_out;
  int64_t target_tokens = 0;  // non-padding positions of tgt_out
};
// The TrainBatch of `examples`, in order: S the longest source (at least 1),
// T the longest target + 1.
TrainBatch make_batch(const std::vector<Example>& examples);

}  // namespace xg::models
