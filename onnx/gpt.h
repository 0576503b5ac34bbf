// models::GPT as the ONNX graphs a runtime needs to generate with it, and
// what each graph's file declares (for a manifest). docs/onnx.md.
#pragma once

#include <string>
#include <vector>

#include "onnx/graph_info.h"

namespace xg::models {
class GPT;
}  // namespace xg::models

namespace xg::onnx {

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
