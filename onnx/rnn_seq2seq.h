// The recurrent encoder-decoder (models::RNNSeq2Seq) as two ONNX graphs, so
// that greedy or beam decoding runs outside xgrad: the encoder once per
// batch, the decoder step once per generated token.
//
//   encoder.onnx       src (B,S) int64, each row padded at its end with pad_id
//                      -> memory (B,S,2H), pad (B,S) (1 on padding), h (B,2H)
//   decoder_step.onnx  tokens (B) int64 (the previous tokens, BOS first),
//                      h (B,2H), c (B,2H) for an LSTM, feed (B,2H) for Luong's
//                      attention, memory (B,S,2H), pad (B,S)
//                      -> logits (B,V), h_next, c_next (LSTM), feed_next (Luong)
// A decode starts c and feed at zeros (B,2H), as RNNSeq2Seq::start does, and
// feeds each step's *_next back as the next step's state.
#pragma once

#include <string>
#include <vector>

#include "onnx/graph_info.h"

namespace xg::models {
class RNNSeq2Seq;
}

namespace xg::onnx {

// Writes OUTDIR/encoder.onnx and OUTDIR/decoder_step.onnx from the model's
// weights as they are, B and S left to the runtime, and returns what a
// manifest says of each (encoder first). Throws as export_model does.
std::vector<GraphSignature> export_rnn_seq2seq(models::RNNSeq2Seq& model, const std::string& outdir);

}  // namespace xg::onnx
