// Position-wise feed-forward block: (..., C) -> linear1 (..., F) -> act ->
// dropout -> linear2 (..., C). F is d_ff.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace xg::nn {

// The activation between the two linear layers: the paper's ReLU, or GPT's GELU.
enum class Activation { relu, gelu };
const char* activation_name(Activation a);  // "relu", "gelu"

// The feed-forward block of a Transformer layer: linear1, the activation,
// dropout, linear2, applied to each position alike.
class PositionwiseFeedForward : public Module {
 public:
  // linear1 Linear(C, F) and linear2 Linear(F, C) initialised from init_gen;
  // dropout p `dropout` (dropout_gen may be null if 0). Sizes and p are
  // checked as Linear and Dropout do (std::invalid_argument).
  PositionwiseFeedForward(int64_t d_model, int64_t d_ff, double dropout, Generator& init_gen,
                          std::shared_ptr<Generator> dropout_gen, Activation act = Activation::relu);
  Tensor forward(const Tensor& x) override;  // (..., C) -> (..., C)
  std::string type_name() const override;  // "PositionwiseFeedForward(d_model=.., d_ff=.., relu)"

  std::shared_ptr<Linear> linear1;  // C -> F
  std::shared_ptr<Dropout> dropout;  // after the activation
  std::shared_ptr<Linear> linear2;  // F -> C

 private:
  int64_t d_model_, d_ff_;
  Activation act_;
};

}  // namespace xg::nn
