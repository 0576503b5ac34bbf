// Position-wise feed-forward block: (..., C) -> linear1 (..., F) -> act ->
// dropout -> linear2 (..., C). F is d_ff.
#pragma once

#include <memory>

#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace xg::nn {

enum class Activation { relu, gelu };
const char* activation_name(Activation a);

class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(int64_t d_model, int64_t d_ff, double dropout, Generator& init_gen,
                          std::shared_ptr<Generator> dropout_gen, Activation act = Activation::relu);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;  // "PositionwiseFeedForward(d_model=.., d_ff=.., relu)"

  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;

 private:
  int64_t d_model_, d_ff_;
  Activation act_;
};

}  // namespace xg::nn
