#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace xg::optim {

// The L2 norm of all gradients together (computed in double), before
// clipping; when it exceeds max_norm, every gradient is scaled in place by
// max_norm / (norm + 1e-6), as PyTorch's clip_grad_norm_.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace xg::optim
