#include "nn/dropout.h"

#include <sstream>

#include "autograd/ops.h"

namespace xg::nn {

Dropout::Dropout(double p, std::shared_ptr<Generator> gen) : p_(p), gen_(std::move(gen)) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("Dropout: p = " + std::to_string(p) + " is outside [0, 1)");
}

std::string Dropout::type_name() const {
  std::ostringstream os;
  os << "Dropout(p=" << p_ << ")";
  return os.str();
}

Tensor Dropout::forward(const Tensor& x) {
  const auto named = scope();
  if (p_ == 0.0 || !is_training()) return x;
  return dropout(x, p_, true, generator_or_default(gen_.get()));
}

Tensor Dropout::forward_relu(const Tensor& x) {
  const auto named = scope();
  if (p_ == 0.0 || !is_training()) return relu(x);
  return relu_dropout(x, p_, true, generator_or_default(gen_.get()));
}

}  // namespace xg::nn
