// The recurrent encoder-decoder of the seed documents, built from nn/ like a
// user's model: a bidirectional LSTM or GRU encoder and a one-layer
// attentional decoder, Bahdanau's (additive attention on the previous state,
// the context fed into the cell) or Luong's (dot, general or concat attention
// on the new state, with input feeding of the attentional state h~).
//
//   xg::models::RNNSeq2SeqConfig cfg;  cfg.attention = "general";
//   xg::models::RNNSeq2Seq model(cfg);
//   Tensor loss = model.loss(b.src, b.tgt_in, b.tgt_out, 0.1);   // b from models::make_batch
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/transformer.h"
#include "nn/additive_attention.h"
#include "nn/luong_attention.h"
#include "nn/rnn.h"

namespace xg::models {

// The architecture of RNNSeq2Seq.
struct RNNSeq2SeqConfig {
  int64_t src_vocab = 16;  // source token ids 0..src_vocab-1
  int64_t tgt_vocab = 16;  // target token ids 0..tgt_vocab-1 (V)
  int64_t embed = 64;      // E, the width of both embeddings
  int64_t hidden = 64;     // H per encoder direction; the decoder's state is 2H wide
  int64_t layers = 1;      // encoder layers (L); the decoder is one cell
  std::string cell = "lstm";           // lstm | gru
  std::string attention = "bahdanau";  // bahdanau | dot | general | concat (the last three Luong's)
  double dropout = 0;      // on the embeddings, between encoder layers and before the output layer
  int64_t pad_id = 0;      // the padding id of both vocabularies
  uint64_t seed = 0;       // initialisation and dropout
  void validate() const;   // throws std::invalid_argument naming the field and its accepted values
  // The number of parameters an RNNSeq2Seq of this configuration has,
  // computed without building it (in double, as TransformerConfig's).
  double parameter_count() const;
  // The architecture as checkpoint metadata: cfg.model = rnn, cfg.src_vocab,
  // cfg.tgt_vocab, cfg.embed, cfg.hidden, cfg.layers, cfg.cell, cfg.attention.
  Metadata to_metadata() const;
  // The configuration those keys describe, read within ModelLimits and then
  // validate()d, dropout 0; throws FormatError naming `path`, the key and
  // the accepted values.
  static RNNSeq2SeqConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// Encoder: embedding (src_vocab, E), bidirectional LSTM/GRU (E -> H each
// way, L layers) over each row's unpadded length. Bridge: the decoder's
// initial state tanh(W_b [h_forward; h_backward]) of the top layer's final
// states (the LSTM's cell starts at zero). Decoder, per target step t:
//   Bahdanau: c_t = att(s_{t-1}, encoder), s_t = cell([emb(y_{t-1}); c_t], s_{t-1}),
//             logits = W_o [s_t; c_t]
//   Luong:    s_t = cell([emb(y_{t-1}); h~_{t-1}], s_{t-1}), c_t = att(s_t, encoder),
//             h~_t = tanh(W_c [c_t; s_t]), logits = W_o h~_t
class RNNSeq2Seq : public nn::Module {
 public:
  explicit RNNSeq2Seq(const RNNSeq2SeqConfig& cfg);  // validates cfg
  // src (B,S) -> the encoder states (B,S,2H); padded positions are zero.
  Tensor encode(const Batch& src);
  // The same from src (B,S) int64 ids, each row padded at its end with
  // pad_id; an export trace computes the rows' lengths from the ids by ops.
  Tensor encode(const Tensor& src);
  // Teacher forcing: the logits (B,T,V) of tgt_in's next tokens.
  Tensor forward(const Batch& src, const Batch& tgt_in);
  // Mean cross-entropy of forward(src, tgt_in) against tgt_out, padding
  // ignored, with label smoothing.
  Tensor loss(const Batch& src, const Batch& tgt_in, const Batch& tgt_out, double label_smoothing = 0.0);
  Tensor forward(const Tensor& x) override;  // not supported: throws (use forward(src, tgt_in))
  std::string type_name() const override;   // "RNNSeq2Seq(cell=lstm, attention=bahdanau, ...)"
  const RNNSeq2SeqConfig& config() const { return cfg_; }      // as constructed
  Generator& dropout_generator() { return *drop_gen_; }         // the dropout layers' generator
  // Attention weights (B,T,S) of the last forward or decoding call.
  const Tensor& last_attention() const { return last_attention_; }

  // One decoder step, for decoding: the state after the tokens so far.
  struct State {
    Tensor h;       // the decoder's state (B,2H)
    Tensor c;       // the LSTM's cell state (B,2H); undefined for the GRU
    Tensor feed;    // Luong's h~ of the previous step (B,2H)
    Tensor memory;  // the encoder states (B,S,2H)
    Tensor pad;     // the key padding mask (B,S): 1 on padded source positions
  };
  State start(const Batch& src);                                    // encodes and bridges
  State start(const Tensor& src);                                   // the same from src (B,S) int64
  Tensor step(State& state, const std::vector<int64_t>& tokens);   // (B) previous tokens -> logits (B,V)
  Tensor step(State& state, const Tensor& tokens);                 // the same from tokens (B) int64
  static void select_rows(State& state, const std::vector<int64_t>& rows);  // keeps rows `rows`, in order (beam search)

 private:
  Tensor padding_mask(const Tensor& src) const;  // (B,S): 1 where src (B,S) is pad_id
  RNNSeq2SeqConfig cfg_;
  std::shared_ptr<Generator> drop_gen_;
  std::shared_ptr<nn::Embedding> src_embed_, tgt_embed_;
  std::shared_ptr<nn::RNNBase> encoder_;
  std::shared_ptr<nn::RNNCellBase> decoder_;
  std::shared_ptr<nn::Linear> bridge_, combine_, out_;
  std::shared_ptr<nn::AdditiveAttention> additive_;
  std::shared_ptr<nn::LuongAttention> luong_;
  std::shared_ptr<nn::Dropout> dropout_;
  nn::RNNOutput encoder_states_;  // of the last encode()
  Tensor last_attention_, last_step_attention_;
};

// Greedy decoding of each source row: sequences without BOS, stopped at (and
// without) EOS or after max_len tokens.
std::vector<std::vector<int64_t>> greedy_decode(RNNSeq2Seq& model, const Batch& src, int64_t bos, int64_t eos,
                                                int64_t max_len);
// Beam search over one source row (models/beam_search.h): the best hypothesis.
std::vector<int64_t> beam_search(RNNSeq2Seq& model, const std::vector<int64_t>& src, int64_t bos, int64_t eos,
                                 int64_t max_len, int64_t beam_size, double alpha = 0.6);

}  // namespace xg::models
