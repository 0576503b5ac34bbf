// Private to train/*.cpp: the checks every Job's trainer makes between its
// forward pass and its optimiser step, so that a diverging run stops at the
// same point and with the same words in each program.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace xg::train::detail {

// Throws optim::NonFiniteError "step AT: the loss is VALUE; stopped before
// updating the parameters" followed by `hint`, when `value` is NaN or infinite.
void check_loss(double value, int64_t at, const std::string& hint = "");

// Clips the gradients of `params` to a total norm of `clip_norm` (0: no clip)
// and returns their norm. A non-finite norm throws NonFiniteError "step AT:
// the gradient norm is NORM (first non-finite gradient: NAME); stopped before
// updating the parameters" + `hint`, gradients left as they are.
double clip_or_stop(const std::vector<std::pair<std::string, Tensor>>& params, double clip_norm, int64_t at,
                    const std::string& hint = "");

}  // namespace xg::train::detail
