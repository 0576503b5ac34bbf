// torch.nn's Transformer layers with PyTorch's names, arguments, defaults
// and state-dict keys (transformer.py, activation.py's MultiheadAttention),
// so that a PyTorch state dict loads as it is:
//   MultiheadAttention      in_proj_weight (3E,E), in_proj_bias (3E), out_proj.weight, out_proj.bias
//   TransformerEncoderLayer self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2
//   TransformerDecoderLayer self_attn, multihead_attn, linear1, dropout, linear2, norm1..3, dropout1..3
//   TransformerEncoder      layers.0 ... layers.N-1, norm
//   Transformer             encoder, decoder
// Sequences are (S, N, E) as PyTorch's default, or (N, S, E) with batch_first.
// Masks: a key padding mask (N, S) is nonzero where a key is padding (PyTorch's
// boolean mask, as 0/1: xgrad has no bool dtype); an attention mask (L, S) or
// (N*H, L, S) is added to the scores (PyTorch's float mask:
// generate_square_subsequent_mask gives the causal one). A query whose keys
// are all masked gives NaN, as PyTorch's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "autograd/options.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/containers.h"
#include "nn/module.h"

namespace xg::nn {

// (sz, sz): 0 on and below the diagonal, -inf above (PyTorch's
// Transformer.generate_square_subsequent_mask), in `dtype`.
Tensor generate_square_subsequent_mask(int64_t sz, Dtype dtype = f32);

// The options of MultiheadAttention, in PyTorch's order after its required
// embed_dim and num_heads. add_bias_kv, add_zero_attn, kdim and vdim are not
// built (a constructor given them throws naming them).
struct MultiheadAttentionOptions {
  // The required arguments, as PyTorch's constructor takes them first.
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  XG_ARG(int64_t, embed_dim);         // E
  XG_ARG(int64_t, num_heads);         // H, dividing E
  XG_ARG(double, dropout) = 0.0;      // on the attention weights, in training
  XG_ARG(bool, bias) = true;          // in_proj_bias and out_proj.bias
  XG_ARG(bool, batch_first) = false;  // (N, L, E) rather than (L, N, E)
};

// What MultiheadAttention::forward returns: the output and, when asked, the
// attention weights (N, L, S) averaged over heads, or (N, H, L, S).
struct MultiheadAttentionOutput {
  Tensor output;   // (L, N, E), or (N, L, E) with batch_first
  Tensor weights;  // undefined unless need_weights
};

// torch.nn.MultiheadAttention, with xgrad's incremental decoding beside it.
class MultiheadAttention : public Module {
 public:
  // in_proj_weight xavier-uniform, the biases 0, out_proj.weight as Linear's.
  MultiheadAttention(const MultiheadAttentionOptions& options, Generator& gen,
                     std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit MultiheadAttention(const MultiheadAttentionOptions& options)  // from default_generator()
      : MultiheadAttention(options, default_generator()) {}
  // Attention of query (L, N, E) over key and value (S, N, E) (batch first:
  // (N, L, E), (N, S, E)) with the masks above; average_weights averages the
  // returned weights over heads. is_causal (PyTorch 2's argument): query i
  // sees keys j <= i only, with no (L, S) mask tensor; given an attn_mask
  // too, the mask is applied (is_causal is then PyTorch's hint).
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                   const Tensor& attn_mask = Tensor(), bool average_weights = true,
                                   bool is_causal = false);
  std::string type_name() const override;  // "MultiheadAttention(embed_dim=8, num_heads=2)"
  const MultiheadAttentionOptions& options() const { return options_; }  // as given
  Tensor& in_proj_weight() { return *in_proj_weight_; }  // (3E, E): the q, k and v projections stacked
  Tensor& in_proj_bias() { return in_proj_bias_ ? *in_proj_bias_ : no_bias_; }  // (3E), undefined without bias
  std::shared_ptr<Linear> out_proj;                                              // E -> E

  // Incremental decoding (PyTorch's module has none): keys and values
  // projected once into a KVCache (nn/attention.h), batch first (N, S, E)
  // whatever the module's layout. Cross-attention projects the memory once;
  // self-attention appends one position per decoding step. key and value
  // come in the module's layout.
  KVCache project_kv(const Tensor& key, const Tensor& value);
  void extend_kv(KVCache& cache, const Tensor& key, const Tensor& value);  // appends their positions
  // query (L, N, E) (or batch first) over the cached keys and values -> the
  // output in the query's layout; forward() without attn_mask is project_kv
  // followed by this.
  Tensor attend(const Tensor& query, const KVCache& kv, const Tensor& key_padding_mask = Tensor(),
                bool is_causal = false);
  // When on, forward and attend keep the attention weights (N, H, L, S),
  // before dropout and detached: how to read a layer's attention inside a
  // Transformer, whose layers ask for none.
  void set_store_attention(bool on) { store_attention_ = on; }
  // (N, L, S) averaged over heads, or (N, H, L, S). Throws std::logic_error
  // if nothing was stored.
  Tensor attention_weights(bool average_heads = true) const;

 private:
  Tensor project(const Tensor& x, int64_t part) const;  // x (N, *, E) by rows [part*E, (part+1)*E) of in_proj
  // The heads' context (N, L, E) of a projected query Q (N, L, E) over kv,
  // before out_proj; `weights`, if given, receives (N, H, L, S).
  Tensor attend_projected(const Tensor& Q, const KVCache& kv, const Tensor& key_padding_mask, bool is_causal,
                          Tensor* weights);
  MultiheadAttentionOptions options_;
  Tensor no_bias_;
  Tensor* in_proj_weight_;
  Tensor* in_proj_bias_ = nullptr;  // null without a bias (a pointer to no_bias_ would not survive a move)
  std::shared_ptr<Generator> dropout_gen_;
  bool store_attention_ = false;
  Tensor attention_;  // (N, H, L, S)
};

// The options of TransformerEncoderLayer and TransformerDecoderLayer, in
// PyTorch's order after d_model and nhead.
struct TransformerLayerOptions {
  // The required arguments, as PyTorch's constructors take them first.
  TransformerLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  XG_ARG(int64_t, d_model);                  // E
  XG_ARG(int64_t, nhead);                    // H, dividing E
  XG_ARG(int64_t, dim_feedforward) = 2048;   // the feed-forward's width
  XG_ARG(double, dropout) = 0.1;             // after attention, inside and after the feed-forward
  XG_ARG(std::string, activation) = "relu";  // "relu" or "gelu"
  XG_ARG(double, layer_norm_eps) = 1e-5;     // the norms' eps
  XG_ARG(bool, batch_first) = false;         // (N, S, E) rather than (S, N, E)
  XG_ARG(bool, norm_first) = false;          // pre-norm: x + f(norm(x)); else norm(x + f(x))
};

// torch.nn.TransformerEncoderLayer.
class TransformerEncoderLayer : public Module {
 public:
  // Generators: `gen` initialises, `dropout_gen` draws the dropout masks (may
  // be null when dropout is 0 or the layer never trains).
  TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen,
                          std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit TransformerEncoderLayer(const TransformerLayerOptions& options)  // from default_generator()
      : TransformerEncoderLayer(options, default_generator()) {}
  // src (S, N, E) or (N, S, E); src_mask (S, S) added to the scores;
  // src_key_padding_mask (N, S) nonzero at padding; is_causal as
  // MultiheadAttention's (PyTorch 2's argument).
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }  // no masks
  std::string type_name() const override;  // "TransformerEncoderLayer(d_model=8, nhead=2)"
  const TransformerLayerOptions& options() const { return options_; }  // as given

  // The layer's submodules, under PyTorch's names.
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor feed_forward(const Tensor& x);
  TransformerLayerOptions options_;
};

// torch.nn.TransformerDecoderLayer.
class TransformerDecoderLayer : public Module {
 public:
  // As TransformerEncoderLayer's.
  TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen,
                          std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit TransformerDecoderLayer(const TransformerLayerOptions& options)  // from default_generator()
      : TransformerDecoderLayer(options, default_generator()) {}
  // tgt (T, N, E) over memory (S, N, E) (or batch first); tgt_mask (T, T)
  // and memory_mask (T, S) added to the scores; the padding masks (N, T),
  // (N, S); tgt_is_causal and memory_is_causal as MultiheadAttention's
  // is_causal (PyTorch 2's arguments).
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false,
                 bool memory_is_causal = false);
  // Incremental decoding (PyTorch has none): the next positions tgt (1, N, E)
  // (or batch first) appended to self_kv, the causal self-attention's cache,
  // attending to cross_kv, multihead_attn's projection of the memory
  // (project_kv) -> (1, N, E). The same values as forward() with
  // tgt_is_causal on the whole prefix, at its last positions.
  Tensor forward_step(const Tensor& tgt, KVCache& self_kv, const KVCache& cross_kv,
                      const Tensor& memory_key_padding_mask = Tensor());
  std::string type_name() const override;  // "TransformerDecoderLayer(d_model=8, nhead=2)"
  const TransformerLayerOptions& options() const { return options_; }  // as given

  // The layer's submodules, under PyTorch's names.
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;

 private:
  Tensor feed_forward(const Tensor& x);
  // The three sublayers with their residuals and norms (post-norm or
  // norm_first) around the self-attention `sa` and the attention to the
  // memory `mha`: forward's and forward_step's one arrangement.
  Tensor sublayers(const Tensor& tgt, const std::function<Tensor(const Tensor&)>& sa,
                   const std::function<Tensor(const Tensor&)>& mha);
  TransformerLayerOptions options_;
};

// torch.nn.TransformerEncoder: num_layers layers built from `layer`, each
// starting from the first one's values (PyTorch deep-copies one layer), and
// a final LayerNorm when `norm` is given.
class TransformerEncoder : public Module {
 public:
  // `layer` as TransformerEncoderLayer takes it; num_layers >= 1.
  TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers, Generator& gen,
                     std::shared_ptr<LayerNorm> norm = nullptr, std::shared_ptr<Generator> dropout_gen = nullptr);
  // The same drawing from default_generator().
  TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr)
      : TransformerEncoder(layer, num_layers, default_generator(), std::move(norm)) {}
  // As TransformerEncoderLayer::forward, through every layer, then the norm.
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }  // no masks
  std::string type_name() const override;  // "TransformerEncoder(num_layers=2)"

  std::shared_ptr<ModuleList> layers;  // "layers.0", ...: TransformerEncoderLayer each
  std::shared_ptr<LayerNorm> norm;     // "norm", or null
};

// torch.nn.TransformerDecoder, as TransformerEncoder.
class TransformerDecoder : public Module {
 public:
  // `layer` as TransformerDecoderLayer takes it; num_layers >= 1.
  TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers, Generator& gen,
                     std::shared_ptr<LayerNorm> norm = nullptr, std::shared_ptr<Generator> dropout_gen = nullptr);
  // The same drawing from default_generator().
  TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr)
      : TransformerDecoder(layer, num_layers, default_generator(), std::move(norm)) {}
  // As TransformerDecoderLayer::forward, through every layer, then the norm.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false,
                 bool memory_is_causal = false);
  std::string type_name() const override;  // "TransformerDecoder(num_layers=2)"

  std::shared_ptr<ModuleList> layers;  // "layers.0", ...: TransformerDecoderLayer each
  std::shared_ptr<LayerNorm> norm;     // "norm", or null
};

// The options of Transformer, PyTorch's defaults (the paper's base model).
struct TransformerOptions {
  TransformerOptions() = default;
  XG_ARG(int64_t, d_model) = 512;             // E
  XG_ARG(int64_t, nhead) = 8;                 // H
  XG_ARG(int64_t, num_encoder_layers) = 6;    // encoder layers
  XG_ARG(int64_t, num_decoder_layers) = 6;    // decoder layers
  XG_ARG(int64_t, dim_feedforward) = 2048;    // the feed-forward's width
  XG_ARG(double, dropout) = 0.1;              // as TransformerLayerOptions
  XG_ARG(std::string, activation) = "relu";   // "relu" or "gelu"
  XG_ARG(double, layer_norm_eps) = 1e-5;      // the norms' eps
  XG_ARG(bool, batch_first) = false;          // (N, S, E) rather than (S, N, E)
  XG_ARG(bool, norm_first) = false;           // pre-norm layers
};

// torch.nn.Transformer: encoder and decoder with final LayerNorms, every
// parameter of 2 or more dimensions xavier-uniform (PyTorch's _reset_parameters).
class Transformer : public Module {
 public:
  // `gen` initialises; `dropout_gen` (or one seeded from gen) draws the dropout masks.
  Transformer(const TransformerOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit Transformer(const TransformerOptions& options) : Transformer(options, default_generator()) {}  // from it
  // src (S, N, E) and tgt (T, N, E) (or batch first) -> (T, N, E); masks
  // and the is_causal flags as the layers'.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = Tensor(),
                 const Tensor& tgt_mask = Tensor(), const Tensor& memory_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(), const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool src_is_causal = false,
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  std::string type_name() const override;  // "Transformer(d_model=512, nhead=8)"

  std::shared_ptr<TransformerEncoder> encoder;  // "encoder"
  std::shared_ptr<TransformerDecoder> decoder;  // "decoder"

 private:
  TransformerOptions options_;
};

}  // namespace xg::nn
