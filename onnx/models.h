// The shipped models' graphs (issue 41): each model family written as the
// ONNX graphs a runtime needs to decode with it, and what each graph's file
// declares (for a manifest). Decoding outside xgrad, with ONNX Runtime:
// docs/onnx.md.
#pragma once

#include <string>
#include <vector>

#include "onnx/graph_info.h"

namespace xg::models {
class Transformer;
class GPT;
}  // namespace xg::models

namespace xg::onnx {

// The inputs and outputs declared by the ONNX model at `path`; ExportError
// naming the file if it cannot be read or parsed as one.
GraphSignature read_signature(const std::string& path);

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

// The GPT as two graphs in `dir`:
//   prefill.onnx  a prompt: tokens (B,T) int64 -> logits (B,V) of the token
//                 after it and per block i present_k_i, present_v_i (B,T,C);
//                 traced from GPT::prefill;
//   step.onnx     tokens (B,1) int64, position (1,) int64 and per block i
//                 past_k_i, past_v_i (B,L,C) -> logits (B,V) and present_k_i,
//                 present_v_i (B,L+1,C); traced from GPT::step.
// Returns their signatures.
std::vector<GraphSignature> export_gpt(models::GPT& model, const std::string& dir);

}  // namespace xg::onnx
