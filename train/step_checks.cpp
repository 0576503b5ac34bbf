#include "train/detail/step_checks.h"

#include <fmt/format.h>

#include <cmath>

#include "optim/optim.h"

namespace xg::train::detail {

void check_loss(double value, int64_t at, const std::string& hint) {
  if (!std::isfinite(value))
    throw optim::NonFiniteError(
        fmt::format("step {}: the loss is {}; stopped before updating the parameters{}", at, value, hint));
}

double clip_or_stop(const std::vector<std::pair<std::string, Tensor>>& params, double clip_norm, int64_t at,
                    const std::string& hint) {
  std::vector<Tensor> tensors;
  tensors.reserve(params.size());
  for (const auto& [name, p] : params) tensors.push_back(p);
  // Clipping leaves non-finite gradients as they are and returns the norm.
  const double norm = clip_norm > 0 ? optim::clip_grad_norm(tensors, clip_norm, false) : optim::grad_norm(tensors);
  if (std::isfinite(norm)) return norm;
  std::string who = "?";
  for (const auto& [name, p] : params)
    if (p.grad().defined() && first_nonfinite(p.grad()) >= 0) {
      who = name;
      break;
    }
  throw optim::NonFiniteError(fmt::format(
      "step {}: the gradient norm is {} (first non-finite gradient: {}); stopped before updating the parameters{}", at,
      norm, who, hint));
}

}  // namespace xg::train::detail
