// A decoder-only Transformer (GPT-2's layout), built from nn/ only, like the
// encoder-decoder: token embedding + positions (learned or sinusoidal), N
// pre-norm blocks (causal self-attention, GELU feed-forward, each with a
// residual connection and dropout), a final LayerNorm, and the output
// projection tied to the token embedding.
//
//   xg::models::GPTConfig c;  c.vocab = 65;  c.max_len = 128;
//   xg::models::GPT gpt(c);
//   Tensor loss = gpt.loss(ids, targets);        // (B,T) each, targets = ids shifted by one
//   auto text = gpt.generate({prompt}, 200, gen, {0.8, 40});
#pragma once

#include <memory>
#include <vector>

#include "models/transformer.h"  // Batch
#include "nn/nn.h"

namespace xg::models {

// The architecture of a GPT, its dropout and its seed.
struct GPTConfig {
  int64_t vocab = 65;     // V: ids 0 .. vocab-1
  int64_t max_len = 128;  // positions (the context window)
  int64_t layers = 4;     // N blocks
  int64_t d_model = 128;  // C
  int64_t heads = 4;      // H
  int64_t d_ff = 512;     // GPT-2: 4 C
  double dropout = 0.0;   // p of every dropout layer, in [0, 1)
  bool learned_positions = true;  // false: the paper's sinusoids
  uint64_t seed = 0;              // initialisation and dropout
  void validate() const;          // throws std::invalid_argument naming the bad field
  double parameter_count() const;  // without building the model
  // The architecture as checkpoint metadata: cfg.vocab, cfg.layers,
  // cfg.d_model, cfg.heads, cfg.d_ff, cfg.max_len, cfg.learned_positions.
  Metadata to_metadata() const;
  // Those keys read back within ModelLimits, then validate()d, dropout 0;
  // throws FormatError naming `path`, the key and the accepted range.
  static GPTConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// One pre-norm block: x + drop1(attn(ln1(x))) with causal self-attention,
// then h + drop2(ff(ln2(h))) with a GELU feed-forward. Without the causal
// mask it is the pre-norm encoder block of a Vision Transformer (ViT).
class GPTBlock : public nn::Module {
 public:
  // Weights drawn from `init`; every dropout layer draws from `drop`. Only
  // cfg's d_model, heads, d_ff and dropout are read. causal false: every
  // position attends to every other.
  GPTBlock(const GPTConfig& cfg, Generator& init, std::shared_ptr<Generator> drop, bool causal = true);
  Tensor forward(const Tensor& x) override;  // (B,T,C), causal unless built otherwise
  // x (B,T,C) at the positions after the cache's: appends them to `kv`.
  // With T > 1 the cache must be empty (a prompt), T == 1 afterwards.
  // Causal blocks only (std::logic_error otherwise): a cache of earlier
  // positions means nothing to a block whose positions see later ones.
  Tensor forward_step(const Tensor& x, nn::MultiHeadAttention::KVCache& kv);
  bool causal() const { return causal_; }  // as built
  std::string type_name() const override { return "GPTBlock"; }  // "GPTBlock"

  // The sublayers: ln1, attn and drop1 on the attention branch, ln2, ff and
  // drop2 on the feed-forward branch.
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::PositionwiseFeedForward> ff;
  std::shared_ptr<nn::Dropout> drop1, drop2;

 private:
  bool causal_;
};

// A decoder-only Transformer language model (GPT-2's layout).
class GPT : public nn::Module {
 public:
  explicit GPT(const GPTConfig& cfg);  // cfg.validate()d; weights drawn from cfg.seed
  std::string type_name() const override { return "GPT"; }
  const GPTConfig& config() const { return cfg_; }  // as given
  // The generator behind every dropout layer (its state goes into checkpoints).
  Generator& dropout_generator() { return *drop_gen_; }

  // ids (B,T), T <= max_len -> logits (B,T,V).
  Tensor forward(const Batch& ids);
  // Mean cross-entropy of forward(ids) against targets (B,T); targets equal to
  // ignore_index count for nothing.
  Tensor loss(const Batch& ids, const Batch& targets, int64_t ignore_index = -1);
  // The same with ids and targets as int64 tensors (B,T) (xg::from_ints).
  Tensor forward(const Tensor& ids) override;
  Tensor loss(const Tensor& ids, const Tensor& targets, int64_t ignore_index = -1);

  // Generation with a key/value cache: each layer keeps the keys and values
  // of every position fed so far (B, positions, C), so each new token costs
  // one position's work. `prefill` feeds a prompt (B,T) into an empty cache,
  // `step` one token per row; both return the logits (B,V) of the next token.
  // A cache belongs to one sequence of calls: do not feed it rows of another
  // batch, and do not keep tensors of it across steps (its buffers are
  // written in place). Positions past max_len throw.
  struct Cache {
    std::vector<nn::MultiHeadAttention::KVCache> kv;  // one per layer
    int64_t pos = 0;                                  // positions fed
  };
  Cache start_cache();                                             // empty, room for max_len positions
  Tensor prefill(Cache& cache, const Batch& prompt);               // prompt (B,T) -> logits (B,V)
  Tensor step(Cache& cache, const std::vector<int64_t>& tokens);  // B tokens -> logits (B,V)
  // The step with tensors: tokens (B,1) int64 at position (1,) int64,
  // appended to the cache -> logits (B,V); cache.pos is not read or
  // advanced. step(cache, tokens) runs it, and the ONNX step graph is traced
  // from it (onnx/gpt.h): one code path.
  Tensor step(Cache& cache, const Tensor& tokens, const Tensor& position);
  // prefill with the prompt (B,T) as an int64 tensor -> logits (B,V);
  // cache.pos is not advanced. prefill(cache, prompt) runs it, and the ONNX
  // prefill graph is traced from it.
  Tensor prefill(Cache& cache, const Tensor& prompt);
  // Appends `new_tokens` sampled tokens to each prompt (equal lengths, at
  // least 1 token each), under NoGradGuard and eval(); returns the new tokens.
  std::vector<std::vector<int64_t>> generate(const std::vector<std::vector<int64_t>>& prompts, int64_t new_tokens,
                                             Generator& gen, const nn::SamplingOptions& sampling = {});

  std::shared_ptr<nn::Embedding> tok_embed;                     // (V, C), also the output projection
  std::shared_ptr<nn::LearnedPositionalEmbedding> pos_learned;  // "pos" if learned_positions, else null
  std::shared_ptr<nn::PositionalEncoding> pos_sin;              // "pos" otherwise (sinusoids), else null
  std::shared_ptr<nn::Dropout> drop;                            // on the embedded input
  std::shared_ptr<nn::ModuleList> blocks;                       // `layers` GPTBlocks
  std::shared_ptr<nn::LayerNorm> ln_f;                          // before the output projection

 private:
  void check_positions(int64_t start, int64_t cols) const;  // start..start+cols-1 below max_len, else invalid_argument
  Tensor embed(const std::vector<int64_t>& ids, int64_t rows, int64_t cols, int64_t start);
  Tensor head(const Tensor& h);  // (.., C) -> (.., V), tied to tok_embed
  Tensor blocks_of(const Batch& ids);  // ids (B,T) -> the last block's output (B,T,C)
  GPTConfig cfg_;
  std::shared_ptr<Generator> drop_gen_;
};

}  // namespace xg::models
