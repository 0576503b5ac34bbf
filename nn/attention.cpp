#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/ops.h"
#include "autograd/trace.h"

namespace xg::nn {

void require_heads_divide(int64_t d_model, int64_t heads, const std::string& prefix, const std::string& d_name,
                          const std::string& h_name) {
  if (d_model <= 0 || heads <= 0 || d_model % heads != 0)
    throw std::invalid_argument(prefix + d_name + " " + std::to_string(d_model) + " must be a positive multiple of " +
                                h_name + " " + std::to_string(heads));
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, double dropout, Generator& init_gen,
                                       std::shared_ptr<Generator> dropout_gen, bool bias)
    : d_model_(d_model), heads_(heads), head_dim_(0), dropout_(dropout), dropout_gen_(std::move(dropout_gen)) {
  require_heads_divide(d_model, heads, "MultiHeadAttention: ");
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
  kv.len = kv.k.size(1);
  return kv;
}

namespace {
// dst[:, at:at+n, :] = src (B,n,C) for dst (B,cap,C); no tape, bumps dst's version.
template <class T>
void copy_rows(Tensor& dst, int64_t at, const Tensor& src) {
  const int64_t B = src.size(0), n = src.size(1), C = src.size(2), cap = dst.size(1);
  const T* s = src.data<T>();
  T* d = dst.data<T>();
  for (int64_t b = 0; b < B; ++b) std::copy(s + b * n * C, s + (b + 1) * n * C, d + (b * cap + at) * C);
}
void write_positions(Tensor& dst, int64_t at, const Tensor& src) {
  if (src.dtype() == f32) copy_rows<float>(dst, at, src);
  else copy_rows<double>(dst, at, src);
  dst.bump_version();
}
}  // namespace

void append_kv(KVCache& cache, const Tensor& k_new, const Tensor& v_new, const std::string& who) {
  if (cache.k.defined() && cache.k.size(0) != k_new.size(0))
    throw ShapeError(who + ": the key/value cache holds " + std::to_string(cache.k.size(0)) + " rows, new keys " +
                     shape_str(k_new.shape()));
  const int64_t add = k_new.size(1);
  // Differentiable, and what an export trace records (autograd/trace.h: a
  // write in place is no op of the graph): concatenate the positions in use
  // (O(T^2 C) over a decode).
  if (tracing() || (grad_enabled() && (!k_new.is_leaf() || k_new.requires_grad()))) {
    if (!cache.k.defined()) {
      cache.k = k_new, cache.v = v_new, cache.len = add;
      return;
    }
    Tensor k = cache.len == cache.k.size(1) ? cache.k : slice(cache.k, 1, 0, cache.len);
    Tensor v = cache.len == cache.v.size(1) ? cache.v : slice(cache.v, 1, 0, cache.len);
    cache.k = concat({k, k_new}, 1);  // (B,S+S',C)
    cache.v = concat({v, v_new}, 1);
    cache.len += add;
    return;
  }
  const int64_t have = cache.length(), need = have + add;
  if (!cache.k.defined() || need > cache.k.size(1)) {
    const int64_t cap = std::max({need, cache.reserve, cache.k.defined() ? 2 * cache.k.size(1) : int64_t(0)});
    const int64_t B = k_new.size(0), C = k_new.size(2);
    Tensor k = empty({B, cap, C}, k_new.dtype()), v = empty({B, cap, C}, v_new.dtype());
    if (have > 0) {
      write_positions(k, 0, slice(cache.k, 1, 0, have).detach());
      write_positions(v, 0, slice(cache.v, 1, 0, have).detach());
    }
    cache.k = k, cache.v = v;
  }
  write_positions(cache.k, have, k_new.detach());
  write_positions(cache.v, have, v_new.detach());
  cache.len = need;
}

void MultiHeadAttention::extend_kv(KVCache& cache, const Tensor& key, const Tensor& value) {
  KVCache step = project_kv(key, value);
  append_kv(cache, step.k, step.v, describe() + ".extend_kv");
}

Tensor MultiHeadAttention::attend(const Tensor& query, const KVCache& kv, const Tensor& key_padding_mask,
                                  bool causal) {
  const auto named = scope();
  const auto op = [this] { return describe() + ".attend"; };
  if (!query.defined() || query.dim() != 3 || query.size(2) != d_model_)
    throw ShapeError(op() + ": expected query (B,T,C) with C=" + std::to_string(d_model_) + ", got " +
                     (query.defined() ? shape_str(query.shape()) : std::string("undefined")));
  if (!kv.k.defined() || kv.k.size(0) != query.size(0) || kv.len < 1 || kv.len > kv.k.size(1))
    throw ShapeError(op() + ": key/value cache does not match query " + shape_str(query.shape()));
  const int64_t B = query.size(0), S = kv.length();
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{B, S})
    throw ShapeError(op() + ": key_padding_mask " + shape_str(key_padding_mask.shape()) + " must be (B,S) = " +
                     shape_str({B, S}) + " for query " + shape_str(query.shape()));
  // The fused core reads the heads in place from the (B,T,C) projections.
  AttentionOptions o;
  o.heads = heads_;
  // The mask itself, not a detached copy: no gradient flows through it
  // (attention() reads it as flags), and an export trace must see the tensor
  // the caller passed (a graph input, such as the source padding mask).
  o.key_padding_mask = key_padding_mask;
  o.causal = causal;
  o.kv_length = kv.len < kv.k.size(1) ? kv.len : 0;
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
