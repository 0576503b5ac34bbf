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

std::string Unflatten::type_name() const {
  return "Unflatten(dim=" + std::to_string(dim_) + ", unflattened_size=" + shape_str(sizes_) + ")";
}

Tensor Unflatten::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return unflatten(x, dim_, sizes_);
}

}  // namespace xg::nn
