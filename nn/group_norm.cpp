#include "nn/group_norm.h"

#include <stdexcept>

#include <fmt/format.h>

#include "autograd/ops.h"

namespace xg::nn {

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps, bool affine)
    : groups_(groups), channels_(channels), eps_(eps) {
  if (groups < 1 || channels < 1 || channels % groups != 0 || !(eps > 0))
    throw std::invalid_argument(fmt::format("GroupNorm: groups {}, channels {}, eps {}: expected groups >= 1 "
                                            "dividing channels >= 1, and eps > 0",
                                            groups, channels, eps));
  if (affine) {
    weight_ = register_parameter("weight", ones({channels}));
    bias_ = register_parameter("bias", zeros({channels}));
  }
}

std::string GroupNorm::type_name() const { return fmt::format("GroupNorm({}, {}, eps={})", groups_, channels_, eps_); }

Tensor GroupNorm::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {}, channels_, "(N,C,...)");
  return group_norm(x, groups_, weight_, bias_, eps_);
}

}  // namespace xg::nn
