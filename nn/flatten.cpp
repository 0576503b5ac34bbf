#include "nn/flatten.h"

#include "autograd/ops.h"

namespace xg::nn {

std::string Flatten::type_name() const {
  return "Flatten(start=" + std::to_string(start_) + ", end=" + std::to_string(end_) + ")";
}

Tensor Flatten::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return flatten(x, start_, end_);
}

}  // namespace xg::nn
