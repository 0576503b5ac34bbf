#include "nn/attention.h"

#include <cmath>
#include <vector>

#include "autograd/ops.h"

namespace xg::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, double dropout, Generator& init_gen,
                                       std::shared_ptr<Generator> dropout_gen, bool bias)
    : d_model_(d_model), heads_(heads), head_dim_(0), dropout_(dropout), dropout_gen_(std::move(dropout_gen)) {
  if (d_model <= 0 || heads <= 0 || d_model % heads != 0)
    throw std::invalid_argument("MultiHeadAttention: d_model " + std::to_string(d_model) +
                                " must be a positive multiple of heads " + std::to_string(heads));
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw std::invalid_argument("MultiHeadAttention: dropout " + std::to_string(dropout) + " is outside [0, 1)");
  if (dropout > 0.0 && !dropout_gen_)
    throw std::invalid_argument("MultiHeadAttention: dropout " + std::to_string(dropout) + " needs a Generator");
  head_dim_ = d_model / heads;
  w_q = register_module("w_q", std::make_shared<Linear>(d_model, d_model, init_gen, bias));
  w_k = register_module("w_k", std::make_shared<Linear>(d_model, d_model, init_gen, bias));
  w_v = register_module("w_v", std::make_shared<Linear>(d_model, d_model, init_gen, bias));
  w_o = register_module("w_o", std::make_shared<Linear>(d_model, d_model, init_gen, bias));
}

std::string MultiHeadAttention::type_name() const {
  return "MultiHeadAttention(d_model=" + std::to_string(d_model_) + ", heads=" + std::to_string(heads_) + ")";
}

Tensor MultiHeadAttention::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask, bool causal) {
  const auto op = [this] { return describe() + ".forward"; };  // built only for an error
  if (!query.defined() || !key.defined() || !value.defined())
    throw ShapeError(op() + ": query, key and value must be defined");
  auto shapes = [&] {
    return "query " + shape_str(query.shape()) + ", key " + shape_str(key.shape()) + ", value " +
           shape_str(value.shape());
  };
  if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3)
    throw ShapeError(op() + ": expected query (B,T,C), key and value (B,S,C), got " + shapes());
  const int64_t B = query.size(0), S = key.size(1), C = d_model_;
  if (query.size(2) != C || key.size(2) != C || value.size(2) != C)
    throw ShapeError(op() + ": last dimension must be C=" + std::to_string(C) + ", got " + shapes());
  if (key.size(0) != B || value.size(0) != B || value.size(1) != S)
    throw ShapeError(op() + ": batch and key/value lengths disagree: " + shapes());
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{B, S})
    throw ShapeError(op() + ": key_padding_mask " + shape_str(key_padding_mask.shape()) + " must be (B,S) = " +
                     shape_str({B, S}) + " for " + shapes());

  return attend(query, project_kv(key, value), key_padding_mask, causal);
}

MultiHeadAttention::KVCache MultiHeadAttention::project_kv(const Tensor& key, const Tensor& value) {
  const auto named = scope();
  if (!key.defined() || !value.defined() || key.dim() != 3 || key.size(2) != d_model_ ||
      key.shape() != value.shape())
    throw ShapeError(describe() + ".project_kv: expected key and value (B,S,C) with C=" + std::to_string(d_model_) +
                     ", got " + (key.defined() ? shape_str(key.shape()) : "undefined") + " and " +
                     (value.defined() ? shape_str(value.shape()) : "undefined"));
  KVCache kv;
  kv.k = w_k->forward(key);    // (B,S,C)
  kv.v = w_v->forward(value);  // (B,S,C)
  return kv;
}

void MultiHeadAttention::extend_kv(KVCache& cache, const Tensor& key, const Tensor& value) {
  KVCache step = project_kv(key, value);
  if (!cache.k.defined()) {
    cache = step;
    return;
  }
  if (cache.k.size(0) != step.k.size(0))
    throw ShapeError(describe() + ".extend_kv: cache holds " + std::to_string(cache.k.size(0)) +
                     " rows, new keys " + shape_str(key.shape()));
  cache.k = concat({cache.k, step.k}, 1);  // (B,S+S',C)
  cache.v = concat({cache.v, step.v}, 1);
}

Tensor MultiHeadAttention::attend(const Tensor& query, const KVCache& kv, const Tensor& key_padding_mask,
                                  bool causal) {
  const auto named = scope();
  const auto op = [this] { return describe() + ".attend"; };
  if (!query.defined() || query.dim() != 3 || query.size(2) != d_model_)
    throw ShapeError(op() + ": expected query (B,T,C) with C=" + std::to_string(d_model_) + ", got " +
                     (query.defined() ? shape_str(query.shape()) : std::string("undefined")));
  if (!kv.k.defined() || kv.k.size(0) != query.size(0))
    throw ShapeError(op() + ": key/value cache does not match query " + shape_str(query.shape()));
  const int64_t B = query.size(0), S = kv.length();
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{B, S})
    throw ShapeError(op() + ": key_padding_mask " + shape_str(key_padding_mask.shape()) + " must be (B,S) = " +
                     shape_str({B, S}) + " for query " + shape_str(query.shape()));
  // The fused core reads the heads in place from the (B,T,C) projections.
  AttentionOptions o;
  o.heads = heads_;
  o.key_padding_mask = key_padding_mask.defined() ? key_padding_mask.detach() : Tensor();
  o.causal = causal;
  o.dropout = is_training() ? dropout_ : 0.0;
  o.gen = dropout_gen_.get();
  o.weights = store_attention_ ? &attention_ : nullptr;
  Tensor ctx = attention(w_q->forward(query), kv.k, kv.v, o);  // (B,T,C)
  return w_o->forward(ctx);                                    // (B,T,C)
}

Tensor MultiHeadAttention::attention_weights(bool average_heads) const {
  if (!attention_.defined())
    throw std::logic_error(describe() + ": no attention weights stored (call set_store_attention(true) "
                           "before forward)");
  return average_heads ? attention_.mean({1}) : attention_;
}

}  // namespace xg::nn
