#include "nn/feed_forward.h"

#include "autograd/ops.h"

namespace xg::nn {

const char* activation_name(Activation a) { return a == Activation::relu ? "relu" : "gelu"; }

PositionwiseFeedForward::PositionwiseFeedForward(int64_t d_model, int64_t d_ff, double p, Generator& init_gen,
                                                 std::shared_ptr<Generator> dropout_gen, Activation act)
    : d_model_(d_model), d_ff_(d_ff), act_(act) {
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, d_ff, init_gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
  linear2 = register_module("linear2", std::make_shared<Linear>(d_ff, d_model, init_gen));
}

std::string PositionwiseFeedForward::type_name() const {
  return "PositionwiseFeedForward(d_model=" + std::to_string(d_model_) + ", d_ff=" + std::to_string(d_ff_) +
         ", " + activation_name(act_) + ")";
}

Tensor PositionwiseFeedForward::forward(const Tensor& x) {
  const auto named = scope();
  Tensor h = linear1->forward(x);  // (..., F)
  h = act_ == Activation::relu ? dropout->forward_relu(h) : dropout->forward(gelu(h));
  return linear2->forward(h);  // (..., C)
}

}  // namespace xg::nn
