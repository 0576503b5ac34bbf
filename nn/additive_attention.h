// Attention of a recurrent decoder over encoder states (the seed documents'
// chapters before the Transformer): Bahdanau's additive score here, Luong's
// in nn/luong_attention.h. Queries (B,T,Cq), keys (B,S,Ck), values (B,S,Cv).
//
//   nn::AdditiveAttention att(/*query_size=*/64, /*key_size=*/128, /*hidden=*/64, gen);
//   nn::AttentionOutput a = att.forward(decoder_states, encoder_states, encoder_states, padding);
//   // a.context (B,T,128), a.weights (B,T,S): each row sums to 1 over the unpadded keys
#pragma once

#include <memory>

#include "nn/linear.h"
#include "nn/module.h"

namespace xg::nn {

// What an attention module returns: the weighted values and the weights
// themselves (for pictures, or a loss on the alignment).
struct AttentionOutput {
  Tensor context;  // (B,T,Cv): weights x values
  Tensor weights;  // (B,T,S): softmax of the scores over the keys, 0 on padded keys
};

// softmax(scores) over the keys, then times values: scores (B,T,S), values
// (B,S,Cv); key_padding_mask (B,S), nonzero marks a padded key, which gets
// weight 0 (a query whose keys are all padded gets uniform weights, as in
// MultiHeadAttention, rather than NaN). Throws ShapeError naming the shapes.
AttentionOutput attend(const Tensor& scores, const Tensor& values, const Tensor& key_padding_mask = Tensor());

// Bahdanau et al. (2015): score(q, k) = v^T tanh(W_q q + b + W_k k), the
// softmax over the keys, and the weighted values. Parameters w_q (A,Cq) with
// its bias b (A), w_k (A,Ck) without bias, and v (A) as a Linear(A, 1)
// without bias; A is `hidden`.
class AdditiveAttention : public Module {
 public:
  // query_size Cq, key_size Ck, hidden A >= 1; PyTorch's Linear init.
  AdditiveAttention(int64_t query_size, int64_t key_size, int64_t hidden, Generator& gen);
  AdditiveAttention(int64_t query_size, int64_t key_size, int64_t hidden)  // from default_generator()
      : AdditiveAttention(query_size, key_size, hidden, default_generator()) {}
  // query (B,T,Cq), key (B,S,Ck), value (B,S,Cv); key_padding_mask (B,S) as attend().
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& key_padding_mask = Tensor());
  // The scores alone (B,T,S), before the softmax.
  Tensor scores(const Tensor& query, const Tensor& key);
  Tensor forward(const Tensor& x) override;  // self-attention of x (B,T,C), needs Cq == Ck: the context
  std::string type_name() const override;    // "AdditiveAttention(query_size=.., key_size=.., hidden=..)"

  // The parameters: W_q with its bias, W_k, and v.
  std::shared_ptr<Linear> w_q, w_k, v;

 private:
  int64_t query_size_, key_size_, hidden_;
};

}  // namespace xg::nn
