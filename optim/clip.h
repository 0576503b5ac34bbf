// Gradient norms: clipping them (clip_grad_norm) and measuring them (grad_norm).
#pragma once
#include <stdexcept>
#include <vector>

#include "autograd/tensor.h"

namespace xg::optim {

// A NaN or Inf where a finite number was needed (a gradient norm, a loss).
struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The L2 norm of all gradients together (computed in double), before
// clipping; when max_norm / (norm + 1e-6) < 1 (the norm exceeds max_norm, or
// falls within 1e-6 below it) every gradient is scaled in place by that
// factor, as PyTorch's clip_grad_norm_ (which also multiplies by 1 otherwise). A non-finite norm
// throws NonFiniteError naming the first parameter whose gradient holds a NaN
// or Inf, gradients untouched (PyTorch's error_if_nonfinite=True); with
// error_if_nonfinite = false it is returned and the gradients left as they are.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite = true);
// The L2 norm of all gradients together, in double (parameters without a
// gradient count as zero); NaN or Inf if any gradient holds one.
double grad_norm(const std::vector<Tensor>& params);

}  // namespace xg::optim
