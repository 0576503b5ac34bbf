#include "nn/additive_attention.h"

#include "autograd/ops.h"

namespace xg::nn {

AttentionOutput attend(const Tensor& scores, const Tensor& values, const Tensor& key_padding_mask) {
  if (scores.dim() != 3 || values.dim() != 3 || scores.size(0) != values.size(0) || scores.size(2) != values.size(1))
    throw ShapeError("attend: scores " + shape_str(scores.shape()) + " (B,T,S) and values " +
                     shape_str(values.shape()) + " (B,S,Cv) do not match");
  Tensor s = scores;
  if (key_padding_mask.defined()) {
    if (key_padding_mask.shape() != Shape{scores.size(0), scores.size(2)})
      throw ShapeError("attend: key_padding_mask " + shape_str(key_padding_mask.shape()) + ": expected " +
                       shape_str({scores.size(0), scores.size(2)}) + " (B,S)");
    // A large finite value, not -inf: a row with every key padded stays uniform.
    s = masked_fill(s, unsqueeze(key_padding_mask, 1), -1e30);
  }
  AttentionOutput out;
  out.weights = softmax(s, -1);
  out.context = matmul(out.weights, values);
  return out;
}

AdditiveAttention::AdditiveAttention(int64_t query_size, int64_t key_size, int64_t hidden, Generator& gen)
    : query_size_(query_size), key_size_(key_size), hidden_(hidden) {
  w_q = register_module("w_q", std::make_shared<Linear>(query_size, hidden, gen));
  w_k = register_module("w_k", std::make_shared<Linear>(key_size, hidden, gen, /*bias=*/false));
  v = register_module("v", std::make_shared<Linear>(hidden, 1, gen, /*bias=*/false));
}

std::string AdditiveAttention::type_name() const {
  return "AdditiveAttention(query_size=" + std::to_string(query_size_) + ", key_size=" + std::to_string(key_size_) +
         ", hidden=" + std::to_string(hidden_) + ")";
}

Tensor AdditiveAttention::scores(const Tensor& query, const Tensor& key) {
  const auto named = scope();
  if (query.dim() != 3 || key.dim() != 3 || query.size(0) != key.size(0) || query.size(2) != query_size_ ||
      key.size(2) != key_size_)
    throw ShapeError(describe() + ": query " + shape_str(query.shape()) + " and key " + shape_str(key.shape()) +
                     ": expected (B,T," + std::to_string(query_size_) + ") and (B,S," + std::to_string(key_size_) +
                     ")");
  const Tensor q = unsqueeze(w_q->forward(query), 2);  // (B,T,1,A)
  const Tensor k = unsqueeze(w_k->forward(key), 1);    // (B,1,S,A)
  const Tensor e = v->forward(tanh(add(q, k)));        // (B,T,S,1)
  return squeeze(e, 3);
}

AttentionOutput AdditiveAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const Tensor& key_padding_mask) {
  const auto named = scope();
  return attend(scores(query, key), value, key_padding_mask);
}

Tensor AdditiveAttention::forward(const Tensor& x) { return forward(x, x, x).context; }

}  // namespace xg::nn
