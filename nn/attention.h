// Multi-head scaled dot-product attention (Vaswani et al., 2017, section 3.2).
// Shapes: B batch, T query length, S key length, C model width, H heads,
// D = C / H head width.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module.h"

namespace xg::nn {

// The attention layers' shape rule, written once: d_model a positive
// multiple of heads. Throws std::invalid_argument "PREFIX D_NAME V must be
// a positive multiple of H_NAME W" (the names as the caller's reader knows
// them: "d_model", PyTorch's "embed_dim", or a program's "--d-model").
void require_heads_divide(int64_t d_model, int64_t heads, const std::string& prefix = "",
                          const std::string& d_name = "d_model", const std::string& h_name = "heads");

// Projected keys and values kept for incremental decoding, by both attention
// layers (MultiHeadAttention, MultiheadAttention). Self-attention's cache is
// preallocated: k and v are (B,capacity,C) buffers of which the first `len`
// positions hold keys and values; append_kv writes the new positions in
// place (capacity `reserve` at the first call, doubled when full), so a
// decode of T steps copies O(T C), not O(T^2 C). Under grad mode with keys
// that require grad, or under an export trace, it concatenates instead, so
// gradients reach the projections and the graph records the growth. A caller
// must not keep a tensor of an earlier step's cache and expect it unchanged:
// the buffer is shared and written in place (its version is bumped, so
// backward through it throws rather than use the new values).
struct KVCache {
  Tensor k;  // (B,capacity,C), head h in columns [h*D, (h+1)*D)
  Tensor v;  // (B,capacity,C)
  int64_t len = 0;      // positions in use
  int64_t reserve = 0;  // capacity to allocate at the first append (0: what it needs)
  int64_t length() const { return k.defined() ? len : 0; }  // len, or 0 before any keys
};
// Appends projected keys and values k, v (B,S',C) to `cache`; `who` names
// the layer in the error when the batch sizes differ (ShapeError).
void append_kv(KVCache& cache, const Tensor& k, const Tensor& v, const std::string& who);

// Attention with learned projections: the query, key and value projected
// (w_q, w_k, w_v), split into H heads of width D, attended (xg::attention),
// and the heads projected back (w_o).
class MultiHeadAttention : public Module {
 public:
  // w_q, w_k, w_v, w_o: Linear(C, C) each. d_model % heads != 0 throws.
  // dropout applies to the attention weights in training; dropout_gen may be
  // null if dropout == 0.
  MultiHeadAttention(int64_t d_model, int64_t heads, double dropout, Generator& init_gen,
                     std::shared_ptr<Generator> dropout_gen, bool bias = true);

  // query (B,T,C), key (B,S,C), value (B,S,C) -> (B,T,C).
  // key_padding_mask (B,S): nonzero marks a padded key, which no query sees.
  // causal: query i sees only keys j <= i. A query whose keys are all masked
  // gets uniform weights over them (no NaN).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& key_padding_mask = Tensor(), bool causal = false);
  Tensor forward(const Tensor& x) override;  // self-attention, no masks

  // Incremental decoding (see KVCache): keys and values projected once and
  // kept. Cross-attention projects the encoder memory once per input;
  // self-attention appends one position per decoding step.
  using KVCache = nn::KVCache;
  KVCache project_kv(const Tensor& key, const Tensor& value);  // (B,S,C) each
  void extend_kv(KVCache& cache, const Tensor& key, const Tensor& value);  // appends (B,S',C) positions
  // query (B,T,C) against cached keys and values -> (B,T,C). forward() is
  // project_kv followed by this.
  Tensor attend(const Tensor& query, const KVCache& kv, const Tensor& key_padding_mask = Tensor(),
                bool causal = false);

  // When on, forward keeps its attention weights (before dropout, detached).
  void set_store_attention(bool on) { store_attention_ = on; }
  // (B,T,S) averaged over heads, or (B,H,T,S). Throws std::logic_error if
  // nothing was stored.
  Tensor attention_weights(bool average_heads = true) const;

  std::string type_name() const override;  // "MultiHeadAttention(d_model=.., heads=..)"
  int64_t d_model() const { return d_model_; }  // C
  int64_t heads() const { return heads_; }      // H

  // The projections, Linear(C, C) each: of the query, the key, the value, and
  // of the concatenated heads (output).
  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;

 private:
  int64_t d_model_, heads_, head_dim_;
  double dropout_;
  std::shared_ptr<Generator> dropout_gen_;
  bool store_attention_ = false;
  Tensor attention_;  // (B,H,T,S)
};

}  // namespace xg::nn
