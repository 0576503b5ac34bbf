// Luong et al. (2015), "Effective Approaches to Attention-based Neural
// Machine Translation": global attention with the dot, general or concat
// score, and local-p attention, which predicts an aligned source position for
// each query and looks only at a window around it. Queries (B,T,Cq), keys
// (B,S,Ck), values (B,S,Cv).
//
//   nn::LuongOptions o;  o.query_size = o.key_size = 64;  o.score = "general";  o.window = 4;
//   nn::LuongAttention att(o, gen);
//   nn::AttentionOutput a = att.forward(h_t, h_s, h_s, padding);  // a.weights (B,T,S)
#pragma once

#include <memory>
#include <string>

#include "nn/additive_attention.h"

namespace xg::nn {

// The options of LuongAttention.
struct LuongOptions {
  int64_t query_size = 0;  // Cq
  int64_t key_size = 0;    // Ck (dot: equal to Cq)
  // dot: q . k; general: q W_a k, W_a (Cq,Ck); concat: v^T tanh(W_a [q; k]),
  // W_a (hidden, Cq + Ck) (Bahdanau's score in Luong's form).
  std::string score = "general";
  int64_t hidden = 0;  // concat's width (0: Cq); also local-p's W_p width
  // 0: global attention. D > 0: local-p with half-width D: each query's
  // aligned position p = S_b sigmoid(v_p^T tanh(W_p q)) (S_b its row's
  // unpadded length), weights softmax over the keys in [p - D, p + D] times
  // exp(-(s - p)^2 / (2 (D/2)^2)), zero outside the window.
  int64_t window = 0;
};

// Global or local-p attention with Luong's scores. Parameters: w_a (general:
// (Ck,Cq) as a Linear(Cq, Ck) without bias; concat: an AdditiveAttention),
// and for local-p w_p (Linear(Cq, hidden) without bias) and v_p (Linear(hidden,
// 1) without bias).
class LuongAttention : public Module {
 public:
  // Throws std::invalid_argument naming the option and its accepted values:
  // sizes >= 1, score dot|general|concat, dot with Cq == Ck, window >= 0.
  LuongAttention(const LuongOptions& options, Generator& gen);
  explicit LuongAttention(const LuongOptions& options) : LuongAttention(options, default_generator()) {}  // from it
  // query (B,T,Cq), key (B,S,Ck), value (B,S,Cv); key_padding_mask (B,S),
  // nonzero marks a padded key (as attend()).
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& key_padding_mask = Tensor());
  Tensor forward(const Tensor& x) override;  // self-attention of x (B,T,C), needs Cq == Ck: the context
  // The scores (B,T,S) of the chosen kind, before masking and the softmax.
  Tensor scores(const Tensor& query, const Tensor& key);
  // Local-p's aligned positions p (B,T), in [0, S_b); throws std::logic_error
  // for global attention.
  Tensor aligned_positions(const Tensor& query, const Tensor& key_padding_mask, int64_t S);
  std::string type_name() const override;  // "LuongAttention(score=general, window=4)"
  const LuongOptions& options() const { return opts_; }  // as constructed, hidden filled in

 private:
  LuongOptions opts_;
  std::shared_ptr<Linear> w_a_, w_p_, v_p_;
  std::shared_ptr<AdditiveAttention> concat_;
};

}  // namespace xg::nn
