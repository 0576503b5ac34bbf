#include "nn/linear.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace xg::nn {

Linear::Linear(int64_t in, int64_t out, Generator& gen, bool bias) : in_(in), out_(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("Linear: in and out must be positive, got in=" + std::to_string(in) +
                                ", out=" + std::to_string(out));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight_ = &register_parameter("weight", empty({out, in}));
  uniform_(*weight_, gen, -bound, bound);
  if (bias) {
    bias_ = &register_parameter("bias", empty({out}));
    uniform_(*bias_, gen, -bound, bound);
  }
}

std::string Linear::type_name() const {
  return "Linear(in=" + std::to_string(in_) + ", out=" + std::to_string(out_) + ")";
}

Tensor Linear::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  if (x.dim() < 1 || x.size(-1) != in_)
    throw ShapeError(describe() + ": input of shape " + shape_str(x.shape()) +
                     " must end in in=" + std::to_string(in_));
  return linear(x, *weight_, bias());
}

}  // namespace xg::nn
