#include "nn/layer_norm.h"

#include "autograd/ops.h"

namespace xg::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, bool elementwise_affine) : dim_(dim), eps_(eps) {
  if (dim <= 0) throw std::invalid_argument("LayerNorm: dim must be positive, got " + std::to_string(dim));
  if (!(eps > 0.0)) throw std::invalid_argument("LayerNorm: eps must be positive, got " + std::to_string(eps));
  if (elementwise_affine) {
    weight_ = register_parameter("weight", ones({dim}));
    bias_ = register_parameter("bias", zeros({dim}));
  }
}

std::string LayerNorm::type_name() const { return "LayerNorm(dim=" + std::to_string(dim_) + ")"; }

Tensor LayerNorm::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  if (x.dim() < 1 || x.size(-1) != dim_)
    throw ShapeError(describe() + ": input of shape " + shape_str(x.shape()) + " must end in dim=" +
                     std::to_string(dim_));
  return layer_norm(x, weight_, bias_, eps_);
}

Tensor LayerNorm::forward(const Tensor& x, const Tensor& residual) {
  const auto named = scope();
  if (!x.defined() || !residual.defined()) throw ShapeError(describe() + ": input or residual is undefined");
  if (x.dim() < 1 || x.size(-1) != dim_)
    throw ShapeError(describe() + ": input of shape " + shape_str(x.shape()) + " must end in dim=" +
                     std::to_string(dim_));
  if (residual.shape() != x.shape())
    throw ShapeError(describe() + ": residual of shape " + shape_str(residual.shape()) + " must have the input's shape " +
                     shape_str(x.shape()));
  return add_layer_norm(x, residual, weight_, bias_, eps_);
}

}  // namespace xg::nn
