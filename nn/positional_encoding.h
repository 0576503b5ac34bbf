// Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5):
// pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(t / 10000^(2i/C)).
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/module.h"

namespace xg::nn {

// The paper's encoding: adds the sinusoid table pe to its input, then dropout.
class PositionalEncoding : public Module {
 public:
  // pe (max_len, C) is a non-persistent buffer: derived, so not in state_dict().
  PositionalEncoding(int64_t d_model, int64_t max_len, double dropout, std::shared_ptr<Generator> dropout_gen);
  // x (B,T,C) -> dropout(x + pe[:T]); T > max_len throws naming both.
  Tensor forward(const Tensor& x) override;
  // x (B,T,C) holding positions start to start+T-1 (incremental decoding).
  Tensor forward(const Tensor& x, int64_t start);
  // x (B,T,C) holding the positions `positions` (T,) int64, given as a
  // tensor: what a decoding step exported to ONNX takes as an input.
  Tensor forward_at(const Tensor& x, const Tensor& positions);
  std::string type_name() const override;  // "PositionalEncoding(d_model=.., max_len=..)"
  const Tensor& pe() const { return pe_; }  // the table (max_len, C)
  void on_dtype(Dtype d) override;  // recomputes pe in d: exact in float64, not float32 values widened

  std::shared_ptr<Dropout> dropout;  // applied after the addition

 private:
  Tensor table(Dtype d) const;
  int64_t d_model_, max_len_;
  Tensor pe_;  // (max_len, C)
};

// Learned positions (GPT-2, BERT): a parameter `weight` (max_len, C),
// initialised N(0, init_std^2) (GPT-2's 0.02 by default), added to the input.
class LearnedPositionalEmbedding : public Module {
 public:
  // Sizes must be positive and init_std finite and >= 0 (std::invalid_argument).
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, Generator& gen, double init_std = 0.02);
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, double init_std = 0.02)  // from default_generator()
      : LearnedPositionalEmbedding(max_len, d_model, default_generator(), init_std) {}
  // x (B,T,C) -> x + weight[:T]; T > max_len throws naming both.
  Tensor forward(const Tensor& x) override;
  // x (B,T,C) holding positions start to start+T-1 (incremental decoding).
  Tensor forward(const Tensor& x, int64_t start);
  // The same with the positions (T,) int64 as a tensor (PositionalEncoding::forward_at).
  Tensor forward_at(const Tensor& x, const Tensor& positions);
  std::string type_name() const override;  // "LearnedPositionalEmbedding(max_len=.., d_model=..)"
  Tensor& weight() { return weight_; }  // (max_len, C)

 private:
  int64_t max_len_, d_model_;
  Tensor weight_;
};

}  // namespace xg::nn
