// The encoder-decoder Transformer of "Attention Is All You Need", built only
// from the public nn/ API, exactly as a user's model would be.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/beam_search.h"
#include "models/config.h"
#include "nn/nn.h"

namespace xg::models {

// The architecture of a Transformer, its dropout, padding id and seed.
struct TransformerConfig {
  int64_t src_vocab = 16;  // source ids 0 .. src_vocab-1
  int64_t tgt_vocab = 16;  // target ids 0 .. tgt_vocab-1 (V of the logits)
  int64_t layers = 2;     // N, for the encoder and the decoder each
  int64_t d_model = 64;   // C
  int64_t heads = 4;      // H
  int64_t d_ff = 256;     // F, the feed-forward width
  double dropout = 0.1;   // p of every dropout layer, in [0, 1)
  int64_t max_len = 256;  // longest sequence the positional encoding covers
  bool pre_norm = false;  // false: the paper's post-norm, x = norm(x + f(x))
  bool tie_weights = true;  // one embedding for source, target and output projection (needs src_vocab == tgt_vocab)
  int64_t pad_id = 0;     // the padding id of both vocabularies (masked, ignored by the loss)
  uint64_t seed = 0;      // initialisation and dropout
  void validate() const;  // throws std::invalid_argument naming the bad field
  // The number of parameters a Transformer of this configuration has, computed
  // without building it (in double: exact below 2^53, and never overflowing),
  // for instance to check a checkpoint's configuration against the file's size.
  double parameter_count() const;
  // The architecture as checkpoint metadata: cfg.src_vocab, cfg.tgt_vocab,
  // cfg.layers, cfg.d_model, cfg.heads, cfg.d_ff, cfg.max_len, cfg.pre_norm,
  // cfg.tie_weights (dropout, pad_id and seed are the run's, not the shape's).
  Metadata to_metadata() const;
  // The configuration those keys describe, each read within ModelLimits and
  // then validate()d, dropout 0; throws FormatError naming `path`, the key
  // and the accepted range.
  static TransformerConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// A batch of token ids, row-major (B, L), rows padded with pad_id.
struct Batch {
  std::vector<int64_t> ids;  // rows * cols ids, row after row
  // B and L: the batch's rows and their (padded) length.
  int64_t rows = 0, cols = 0;
  int64_t at(int64_t r, int64_t c) const { return ids[r * cols + c]; }  // the id at row r, column c (unchecked)
};

// Incremental decoding: the source mask and each decoder layer's cached keys
// and values, so that each step runs the decoder on one new position only.
struct DecodeState {
  Tensor src_pad;  // (B,S)
  // Per decoder layer: the keys and values of the positions decoded so far
  // (self_kv) and of the memory (cross_kv).
  std::vector<nn::KVCache> self_kv, cross_kv;  // one per decoder layer
  int64_t pos = 0;  // target positions decoded so far
};

// The encoder-decoder model: embeddings scaled by sqrt(C) plus the positional
// encoding, torch.nn's encoder and decoder (nn::TransformerEncoder and
// nn::TransformerDecoder, batch first, ReLU, post-norm or norm_first; the
// final norms only with pre_norm, as the paper's post-norm model has none),
// and the output projection. Its state-dict keys are therefore PyTorch's
// below encoder. and decoder. (encoder.layers.0.self_attn.in_proj_weight,
// decoder.layers.1.multihead_attn.out_proj.bias, encoder.norm.weight, ...);
// a state dict of the layout before, with its own layer classes
// (encoder.0.self_attn.w_q.weight, decoder.0.cross_attn..., encoder.0.ff.linear1...,
// enc_norm...), still loads: load_state_dict rewrites it (upgrade_state_dict).
class Transformer : public nn::Module {
 public:
  explicit Transformer(const TransformerConfig& cfg);  // cfg.validate()d; weights drawn from cfg.seed
  std::string type_name() const override { return "Transformer"; }
  const TransformerConfig& config() const { return cfg_; }  // as given
  // The generator behind every dropout layer (its state goes into checkpoints).
  Generator& dropout_generator() { return *drop_gen_; }

  // (B,S) float mask, 1 where the token is padding.
  Tensor padding_mask(const Batch& b) const;
  // The same of ids (B,S) int64, computed by ops (a lookup in a (V,1) table
  // of padding flags), so that an exported encoder computes it from its
  // input. An id outside the vocabularies throws ShapeError naming it.
  Tensor padding_mask(const Tensor& ids) const;
  // src (B,S) -> memory (B,S,C)
  Tensor encode(const Batch& src);
  // tgt (B,T), memory (B,S,C) -> logits (B,T,V)
  Tensor decode(const Batch& tgt, const Tensor& memory, const Tensor& src_pad);
  // Teacher-forced logits (B,T,V) for target inputs tgt_in.
  Tensor forward(const Batch& src, const Batch& tgt_in);
  // Runs the encoder and projects its output for every cross-attention.
  DecodeState start_decode(const Batch& src);
  // The same of src ids (B,S) int64: what start_decode(Batch) runs, and
  // what the ONNX encoder graph is traced from (onnx/transformer.h). `memory`,
  // if given, receives the encoder's output (B,S,C).
  DecodeState start_decode(const Tensor& src, Tensor* memory = nullptr);
  // Feeds one token per row at position state.pos -> logits (B,V) of the next token.
  Tensor decode_step(DecodeState& state, const std::vector<int64_t>& tokens);
  // One decoding step with tensors: tokens (B,1) int64 at position (1,)
  // int64, appended to state's self-attention caches -> logits (B,V);
  // state.pos is not read or advanced. decode_step runs it, and the ONNX
  // decoder-step graph is traced from it (onnx/transformer.h): one code path.
  Tensor step(DecodeState& state, const Tensor& tokens, const Tensor& position);
  // Keeps rows `rows` of the state, in that order (beam search).
  static void select_rows(DecodeState& state, const std::vector<int64_t>& rows);
  // Label-smoothed cross-entropy of the logits against tgt_out, padding ignored.
  Tensor loss(const Batch& src, const Batch& tgt_in, const Batch& tgt_out, double label_smoothing);

  // The submodules, registered under these names: embeddings, positional
  // encoding, the encoder and decoder stacks (their final norm, `norm`,
  // pre-norm only) and the output projection.
  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;  // the same module when tied
  std::shared_ptr<nn::PositionalEncoding> pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;  // encoder->layers: nn::TransformerEncoderLayer each
  std::shared_ptr<nn::TransformerDecoder> decoder;  // decoder->layers: nn::TransformerDecoderLayer each
  std::shared_ptr<nn::Linear> out_proj;             // untied only
  // Decoder layer i.
  nn::TransformerDecoderLayer& decoder_layer(size_t i) { return *decoder->layers->at<nn::TransformerDecoderLayer>(i); }

 protected:
  // The layout before nn's Transformer layers: see the class comment.
  void upgrade_state_dict(std::map<std::string, Tensor>& state, const std::string& prefix) const override;

 private:
  Tensor embed(nn::Embedding& e, const Tensor& ids);         // ids (B,L) int64 -> (B,L,C)
  Tensor encode(const Tensor& src, const Tensor& src_pad);  // the mask computed once by the caller
  // The decoder's output before the projection: (B,T,C).
  Tensor decode_hidden(const Batch& tgt, const Tensor& memory, const Tensor& src_pad);
  TransformerConfig cfg_;
  std::shared_ptr<Generator> drop_gen_;
};

// Decoding. Sequences are returned without BOS, and stop at (and exclude) EOS.
// The encoder runs once per call.
std::vector<std::vector<int64_t>> greedy_decode(Transformer& model, const Batch& src, int64_t bos, int64_t eos,
                                                int64_t max_len);
// Beam search over one source row, scored by log-probability divided by the
// length penalty ((5 + |Y|) / 6)^alpha of Wu et al. (as in the paper, alpha 0.6).
std::vector<int64_t> beam_search(Transformer& model, const std::vector<int64_t>& src, int64_t bos, int64_t eos,
                                 int64_t max_len, int64_t beam_size, double alpha = 0.6);
// The n-best list behind beam_search: the final beams, best score first.
std::vector<Hypothesis> beam_search_nbest(Transformer& model, const std::vector<int64_t>& src, int64_t bos,
                                          int64_t eos, int64_t max_len, int64_t beam_size, double alpha = 0.6);

}  // namespace xg::models
