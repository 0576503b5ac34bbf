// models::Transformer as the ONNX graphs a runtime needs to decode with it,
// and what each graph's file declares (for a manifest). Decoding outside
// xgrad, with ONNX Runtime: docs/onnx.md.
#pragma once

#include <string>
#include <vector>

#include "onnx/graph_info.h"

namespace xg::models {
class Transformer;
}  // namespace xg::models

namespace xg::onnx {

// The Transformer as two graphs in `dir` (which must exist), each written
// whole or not at all (export_model), with axes B (batch), S (source
// length) and L (positions decoded so far) left to the runtime:
//   encoder.onnx       src (B,S) int64 -> memory (B,S,C), src_pad (B,S)
//                      (1 at padding), and per decoder layer i the
//                      cross-attention's keys and values memory_k_i,
//                      memory_v_i (B,S,C), projected once per source;
//   decoder_step.onnx  tokens (B,1) int64, position (1,) int64 (the step,
//                      0 for BOS), src_pad, memory_k_i, memory_v_i, and the
//                      self-attention cache past_k_i, past_v_i (B,L,C) ->
//                      logits (B,V) of the next token and present_k_i,
//                      present_v_i (B,L+1,C), the cache for the next step
//                      (L = 0 at the first step).
// Both are traced from the model's own decoding (Transformer::start_decode
// and Transformer::step, which decode_step runs). Returns their signatures.
std::vector<GraphSignature> export_transformer(models::Transformer& model, const std::string& dir);

}  // namespace xg::onnx
