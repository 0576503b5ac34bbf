#include "nn/transformer.h"

#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/require.h"
#include "nn/attention.h"
#include "nn/init.h"

namespace xg::nn {

Tensor generate_square_subsequent_mask(int64_t sz, Dtype dtype) {
  require(sz >= 1, fmt::format("generate_square_subsequent_mask: sz {}: expected >= 1", sz));
  std::vector<double> m(static_cast<size_t>(shape_numel({sz, sz})), 0.0);  // shape_numel: no silent overflow
  for (int64_t i = 0; i < sz; ++i)
    for (int64_t j = i + 1; j < sz; ++j) m[i * sz + j] = -std::numeric_limits<double>::infinity();
  return from_vector(m, {sz, sz}, dtype);
}

namespace {

// A generator for the dropout masks: the one given, else one seeded from `gen`.
std::shared_ptr<Generator> dropout_source(std::shared_ptr<Generator> given, Generator& gen) {
  return given ? std::move(given) : std::make_shared<Generator>(gen.engine()());
}

// A padding mask (N, S) as flags in `dtype`, 1 where nonzero. A mask
// already in `dtype` is passed as it is (the fused op and masked_fill read
// nonzero as a flag), so that an export trace sees the caller's tensor.
Tensor padding_flags(const Tensor& mask, Dtype dtype) {
  if (mask.dtype() == dtype) return mask;
  Tensor m = ne(mask.detach(), 0.0);
  return m.dtype() == dtype ? m : m.to(dtype);
}

// drop(activation(x)); relu and dropout as one pass (Dropout::forward_relu): the same
// mask, one write of the hidden layer instead of three, and a bit per element saved.
Tensor activate_then_drop(const std::string& activation, Dropout& drop, const Tensor& x) {
  return activation == "gelu" ? drop.forward(gelu(x)) : drop.forward_relu(x);
}

void check_layer_options(const char* who, const TransformerLayerOptions& o) {
  require_heads_divide(o.d_model(), o.nhead(), std::string(who) + ": ", "d_model", "nhead");
  require(o.dim_feedforward() >= 1, fmt::format("{}: dim_feedforward {}: expected >= 1", who, o.dim_feedforward()));
  require(o.activation() == "relu" || o.activation() == "gelu",
          fmt::format("{}: activation '{}': expected 'relu' or 'gelu'", who, o.activation()));
  require(o.dropout() >= 0 && o.dropout() < 1, fmt::format("{}: dropout {}: expected in [0, 1)", who, o.dropout()));
}

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  return MultiheadAttentionOptions(o.d_model(), o.nhead()).dropout(o.dropout()).batch_first(o.batch_first());
}

// Attention of Q (N,L,E) over K, V (N,S,E) with H heads and an additive
// mask (L,S) or (N*H,L,S), composed of ops: PyTorch's computation. Padding
// is masked as the fused op masks it (-1e9), so a query whose keys are all
// padding gets uniform weights. `weights`, if given, receives (N,H,L,S)
// before dropout.
Tensor masked_attention(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t H, const Tensor& attn_mask,
                        const Tensor& key_padding_mask, double p, Generator& gen, Tensor* weights,
                        const std::string& who) {
  const int64_t N = Q.size(0), L = Q.size(1), S = K.size(1), E = Q.size(2), D = E / H;
  auto heads = [&](const Tensor& x, int64_t len) { return permute(reshape(x, {N, len, H, D}), {0, 2, 1, 3}); };
  Tensor scores = matmul(heads(Q, L), transpose(heads(K, S), -1, -2)) * (1.0 / std::sqrt(static_cast<double>(D)));
  if (attn_mask.shape() == Shape{L, S}) {
    scores = scores + attn_mask;
  } else if (attn_mask.shape() == Shape{N * H, L, S}) {
    scores = scores + reshape(attn_mask, {N, H, L, S});
  } else {
    throw ShapeError(fmt::format("{}: attn_mask {} must be (L, S) = ({}, {}) or (N*H, L, S) = ({}, {}, {})", who,
                                 shape_str(attn_mask.shape()), L, S, N * H, L, S));
  }
  if (key_padding_mask.defined())
    scores = masked_fill(scores, reshape(padding_flags(key_padding_mask, scores.dtype()), {N, 1, 1, S}), -1e9);
  Tensor probs = softmax(scores, -1);  // (N,H,L,S)
  if (weights) *weights = probs.detach();
  if (p > 0) probs = dropout(probs, p, true, gen);
  return reshape(permute(matmul(probs, heads(V, S)), {0, 2, 1, 3}), {N, L, E});
}

}  // namespace

// ---- MultiheadAttention ----------------------------------------------------------------

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& o, Generator& gen,
                                       std::shared_ptr<Generator> dropout_gen)
    : options_(o) {
  const int64_t E = o.embed_dim(), H = o.num_heads();
  require_heads_divide(E, H, "MultiheadAttention: ", "embed_dim", "num_heads");
  require(o.dropout() >= 0 && o.dropout() < 1,
          fmt::format("MultiheadAttention: dropout {}: expected in [0, 1)", o.dropout()));
  in_proj_weight_ = &register_parameter("in_proj_weight", empty({3 * E, E}));
  xavier_uniform_(*in_proj_weight_, gen);
  if (o.bias()) in_proj_bias_ = &register_parameter("in_proj_bias", zeros({3 * E}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(E, E, gen, o.bias()));
  if (o.bias()) init::constant_(out_proj->bias(), 0.0);
  dropout_gen_ = dropout_source(std::move(dropout_gen), gen);
}

std::string MultiheadAttention::type_name() const {
  return fmt::format("MultiheadAttention(embed_dim={}, num_heads={})", options_.embed_dim(), options_.num_heads());
}

Tensor MultiheadAttention::project(const Tensor& x, int64_t part) const {
  const int64_t E = options_.embed_dim();
  const Tensor& W = *in_proj_weight_;
  const Tensor& b = in_proj_bias_ ? *in_proj_bias_ : no_bias_;
  return linear(x, slice(W, 0, part * E, (part + 1) * E), b.defined() ? slice(b, 0, part * E, (part + 1) * E) : Tensor());
}

namespace {
// x in the module's layout -> batch first.
Tensor batch_first_of(const Tensor& x, bool batch_first) { return batch_first ? x : transpose(x, 0, 1); }
}  // namespace

MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                     const Tensor& key_padding_mask, bool need_weights,
                                                     const Tensor& attn_mask, bool average_weights, bool is_causal) {
  const auto named = scope();
  const int64_t E = options_.embed_dim(), H = options_.num_heads();
  for (const Tensor* t : {&query, &key, &value})
    if (!t->defined() || t->dim() != 3 || t->size(2) != E)
      throw ShapeError(fmt::format("{}: query, key and value must be ({}, {}, E={}), got {}, {}, {}", describe(),
                                   options_.batch_first() ? "N" : "L", options_.batch_first() ? "L" : "N", E,
                                   query.defined() ? shape_str(query.shape()) : "undefined",
                                   key.defined() ? shape_str(key.shape()) : "undefined",
                                   value.defined() ? shape_str(value.shape()) : "undefined"));
  const bool bf = options_.batch_first();
  const Tensor q = batch_first_of(query, bf);  // (N,L,E)
  const Tensor k = batch_first_of(key, bf);    // (N,S,E)
  const Tensor v = batch_first_of(value, bf);  // (N,S,E)
  const int64_t N = q.size(0), S = k.size(1);
  if (k.size(0) != N || v.shape() != k.shape())
    throw ShapeError(fmt::format("{}: key {} and value {} must match each other and the query's batch {}", describe(),
                                 shape_str(key.shape()), shape_str(value.shape()), N));
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{N, S})
    throw ShapeError(fmt::format("{}: key_padding_mask {} must be (N, S) = ({}, {})", describe(),
                                 shape_str(key_padding_mask.shape()), N, S));
  if (is_causal && !attn_mask.defined() && q.size(1) != S)
    throw ShapeError(fmt::format("{}: is_causal needs as many queries as keys, got L={} and S={}", describe(),
                                 q.size(1), S));
  const Tensor Q = project(q, 0);
  Tensor out, weights;
  Tensor* keep = need_weights || store_attention_ ? &weights : nullptr;
  if (!attn_mask.defined()) {  // the fused op: heads, masks and dropout in one
    out = attend_projected(Q, KVCache{project(k, 1), project(v, 2), S}, key_padding_mask, is_causal, keep);
  } else {  // an additive mask: composed, as PyTorch computes it
    const double p = is_training() ? options_.dropout() : 0.0;
    out = masked_attention(Q, project(k, 1), project(v, 2), H, attn_mask, key_padding_mask, p, *dropout_gen_, keep,
                           describe());
    if (store_attention_) attention_ = weights;
  }
  out = batch_first_of(out_proj->forward(out), bf);
  if (!need_weights) weights = Tensor();
  else if (average_weights) weights = mean(weights, {1});
  return {out, weights};
}

Tensor MultiheadAttention::attend_projected(const Tensor& Q, const KVCache& kv, const Tensor& key_padding_mask,
                                            bool is_causal, Tensor* weights) {
  AttentionOptions o;
  o.heads = options_.num_heads();
  if (key_padding_mask.defined()) o.key_padding_mask = padding_flags(key_padding_mask, Q.dtype());
  o.causal = is_causal;
  o.kv_length = kv.len < kv.k.size(1) ? kv.len : 0;
  o.dropout = is_training() ? options_.dropout() : 0.0;
  o.gen = dropout_gen_.get();
  o.weights = weights;
  Tensor out = attention(Q, kv.k, kv.v, o);  // (N,L,E)
  if (store_attention_ && weights) attention_ = *weights;
  return out;
}

KVCache MultiheadAttention::project_kv(const Tensor& key, const Tensor& value) {
  const auto named = scope();
  const int64_t E = options_.embed_dim();
  if (!key.defined() || !value.defined() || key.dim() != 3 || key.size(2) != E || key.shape() != value.shape())
    throw ShapeError(fmt::format("{}.project_kv: expected key and value ({}, {}, E={}) alike, got {} and {}",
                                 describe(), options_.batch_first() ? "N" : "S", options_.batch_first() ? "S" : "N",
                                 E, key.defined() ? shape_str(key.shape()) : "undefined",
                                 value.defined() ? shape_str(value.shape()) : "undefined"));
  const bool bf = options_.batch_first();
  KVCache kv{project(batch_first_of(key, bf), 1), project(batch_first_of(value, bf), 2)};
  kv.len = kv.k.size(1);
  return kv;
}

void MultiheadAttention::extend_kv(KVCache& cache, const Tensor& key, const Tensor& value) {
  KVCache step = project_kv(key, value);
  append_kv(cache, step.k, step.v, describe() + ".extend_kv");
}

Tensor MultiheadAttention::attend(const Tensor& query, const KVCache& kv, const Tensor& key_padding_mask,
                                  bool is_causal) {
  const auto named = scope();
  const int64_t E = options_.embed_dim();
  const bool bf = options_.batch_first();
  if (!query.defined() || query.dim() != 3 || query.size(2) != E)
    throw ShapeError(fmt::format("{}.attend: expected query ({}, {}, E={}), got {}", describe(), bf ? "N" : "L",
                                 bf ? "L" : "N", E, query.defined() ? shape_str(query.shape()) : "undefined"));
  const Tensor q = batch_first_of(query, bf);  // (N,L,E)
  const int64_t N = q.size(0), S = kv.length();
  if (!kv.k.defined() || kv.k.size(0) != N || kv.len < 1 || kv.len > kv.k.size(1))
    throw ShapeError(fmt::format("{}.attend: the key/value cache does not match query {}", describe(),
                                 shape_str(query.shape())));
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{N, S})
    throw ShapeError(fmt::format("{}.attend: key_padding_mask {} must be (N, S) = ({}, {})", describe(),
                                 shape_str(key_padding_mask.shape()), N, S));
  Tensor weights;
  Tensor out = attend_projected(project(q, 0), kv, key_padding_mask, is_causal, store_attention_ ? &weights : nullptr);
  return batch_first_of(out_proj->forward(out), bf);
}

Tensor MultiheadAttention::attention_weights(bool average_heads) const {
  if (!attention_.defined())
    throw std::logic_error(describe() + ": no attention weights stored (call set_store_attention(true) "
                           "before forward)");
  return average_heads ? mean(attention_, {1}) : attention_;
}

// ---- the layers -------------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& o, Generator& gen,
                                                 std::shared_ptr<Generator> dropout_gen)
    : options_(o) {
  check_layer_options("TransformerEncoderLayer", o);
  dropout_gen = dropout_source(std::move(dropout_gen), gen);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o), gen, dropout_gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model(), o.dim_feedforward(), gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout(), dropout_gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward(), o.d_model(), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout(), dropout_gen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout(), dropout_gen));
}

std::string TransformerEncoderLayer::type_name() const {
  return fmt::format("TransformerEncoderLayer(d_model={}, nhead={})", options_.d_model(), options_.nhead());
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  return dropout2->forward(linear2->forward(activate_then_drop(options_.activation(), *dropout, linear1->forward(x))));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  const auto named = scope();
  auto sa = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward(x, x, x, src_key_padding_mask, false, src_mask, true, is_causal).output);
  };
  Tensor x = src;
  if (options_.norm_first()) {
    x = x + sa(norm1->forward(x));
    return x + feed_forward(norm2->forward(x));
  }
  x = norm1->forward(x + sa(x));
  return norm2->forward(x + feed_forward(x));
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& o, Generator& gen,
                                                 std::shared_ptr<Generator> dropout_gen)
    : options_(o) {
  check_layer_options("TransformerDecoderLayer", o);
  dropout_gen = dropout_source(std::move(dropout_gen), gen);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(o), gen, dropout_gen));
  multihead_attn =
      register_module("multihead_attn", std::make_shared<MultiheadAttention>(attention_options(o), gen, dropout_gen));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model(), o.dim_feedforward(), gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout(), dropout_gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward(), o.d_model(), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout(), dropout_gen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout(), dropout_gen));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout(), dropout_gen));
}

std::string TransformerDecoderLayer::type_name() const {
  return fmt::format("TransformerDecoderLayer(d_model={}, nhead={})", options_.d_model(), options_.nhead());
}

Tensor TransformerDecoderLayer::feed_forward(const Tensor& x) {
  return dropout3->forward(linear2->forward(activate_then_drop(options_.activation(), *dropout, linear1->forward(x))));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                        const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                        bool memory_is_causal) {
  const auto named = scope();
  auto sa = [&](const Tensor& x) {
    return dropout1->forward(
        self_attn->forward(x, x, x, tgt_key_padding_mask, false, tgt_mask, true, tgt_is_causal).output);
  };
  auto mha = [&](const Tensor& x) {
    return dropout2->forward(
        multihead_attn->forward(x, memory, memory, memory_key_padding_mask, false, memory_mask, true, memory_is_causal)
            .output);
  };
  return sublayers(tgt, sa, mha);
}

Tensor TransformerDecoderLayer::sublayers(const Tensor& tgt, const std::function<Tensor(const Tensor&)>& sa,
                                          const std::function<Tensor(const Tensor&)>& mha) {
  Tensor x = tgt;
  if (options_.norm_first()) {
    x = x + sa(norm1->forward(x));
    x = x + mha(norm2->forward(x));
    return x + feed_forward(norm3->forward(x));
  }
  x = norm1->forward(x + sa(x));
  x = norm2->forward(x + mha(x));
  return norm3->forward(x + feed_forward(x));
}

Tensor TransformerDecoderLayer::forward_step(const Tensor& tgt, KVCache& self_kv, const KVCache& cross_kv,
                                             const Tensor& memory_key_padding_mask) {
  const auto named = scope();
  // As forward(), with the causal self-attention reading the cache: the new
  // positions see every earlier one, which is exactly what the mask allowed.
  auto sa = [&](const Tensor& x) {
    self_attn->extend_kv(self_kv, x, x);
    return dropout1->forward(self_attn->attend(x, self_kv));
  };
  auto mha = [&](const Tensor& x) {
    return dropout2->forward(multihead_attn->attend(x, cross_kv, memory_key_padding_mask));
  };
  return sublayers(tgt, sa, mha);
}

// ---- stacks --------------------------------------------------------------------------------

namespace {
// num_layers copies of layer 0's values (PyTorch deep-copies one layer).
template <class Layer>
std::shared_ptr<ModuleList> stack_of(const char* who, const TransformerLayerOptions& o, int64_t n, Generator& gen,
                                     const std::shared_ptr<Generator>& dropout_gen) {
  require(n >= 1, fmt::format("{}: num_layers {}: expected >= 1", who, n));
  auto list = std::make_shared<ModuleList>();
  std::shared_ptr<Layer> first;
  for (int64_t i = 0; i < n; ++i) {
    auto layer = std::make_shared<Layer>(o, gen, dropout_gen);
    if (first) layer->load_state_dict(first->state_dict());
    else first = layer;
    list->push_back(layer);
  }
  return list;
}
}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers, Generator& gen,
                                       std::shared_ptr<LayerNorm> norm_, std::shared_ptr<Generator> dropout_gen) {
  dropout_gen = dropout_source(std::move(dropout_gen), gen);
  layers = register_module("layers", stack_of<TransformerEncoderLayer>("TransformerEncoder", layer, num_layers, gen,
                                                                       dropout_gen));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

std::string TransformerEncoder::type_name() const {
  return "TransformerEncoder(num_layers=" + std::to_string(layers->size()) + ")";
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                   bool is_causal) {
  const auto named = scope();
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerEncoderLayer>(i)->forward(x, mask, src_key_padding_mask, is_causal);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers, Generator& gen,
                                       std::shared_ptr<LayerNorm> norm_, std::shared_ptr<Generator> dropout_gen) {
  dropout_gen = dropout_source(std::move(dropout_gen), gen);
  layers = register_module("layers", stack_of<TransformerDecoderLayer>("TransformerDecoder", layer, num_layers, gen,
                                                                       dropout_gen));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

std::string TransformerDecoder::type_name() const {
  return "TransformerDecoder(num_layers=" + std::to_string(layers->size()) + ")";
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                   bool memory_is_causal) {
  const auto named = scope();
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerDecoderLayer>(i)->forward(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                                                        memory_key_padding_mask, tgt_is_causal, memory_is_causal);
  return norm ? norm->forward(x) : x;
}

Transformer::Transformer(const TransformerOptions& o, Generator& gen, std::shared_ptr<Generator> dropout_gen)
    : options_(o) {
  dropout_gen = dropout_source(std::move(dropout_gen), gen);
  const TransformerLayerOptions layer = TransformerLayerOptions(o.d_model(), o.nhead())
                                            .dim_feedforward(o.dim_feedforward())
                                            .dropout(o.dropout())
                                            .activation(o.activation())
                                            .layer_norm_eps(o.layer_norm_eps())
                                            .batch_first(o.batch_first())
                                            .norm_first(o.norm_first());
  encoder = register_module(
      "encoder", std::make_shared<TransformerEncoder>(layer, o.num_encoder_layers(), gen,
                                                      std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()),
                                                      dropout_gen));
  decoder = register_module(
      "decoder", std::make_shared<TransformerDecoder>(layer, o.num_decoder_layers(), gen,
                                                      std::make_shared<LayerNorm>(o.d_model(), o.layer_norm_eps()),
                                                      dropout_gen));
  for (auto& [name, p] : named_parameters())  // PyTorch's _reset_parameters
    if (p.dim() > 1) {
      Tensor t = p;
      xavier_uniform_(t, gen);
    }
}

std::string Transformer::type_name() const {
  return fmt::format("Transformer(d_model={}, nhead={})", options_.d_model(), options_.nhead());
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask, const Tensor& tgt_mask,
                            const Tensor& memory_mask, const Tensor& src_key_padding_mask,
                            const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask,
                            bool src_is_causal, bool tgt_is_causal, bool memory_is_causal) {
  const auto named = scope();
  const Tensor memory = encoder->forward(src, src_mask, src_key_padding_mask, src_is_causal);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                          tgt_is_causal, memory_is_causal);
}

}  // namespace xg::nn
