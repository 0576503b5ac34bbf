#include "nn/batch_norm.h"

#include <stdexcept>

#include <fmt/format.h>

#include "autograd/ops.h"

namespace xg::nn {

BatchNorm::BatchNorm(const char* name, std::vector<int64_t> ranks, int64_t features, double eps, double momentum,
                     bool affine, bool track_running_stats)
    : name_(name), ranks_(std::move(ranks)), features_(features), eps_(eps), momentum_(momentum) {
  if (features < 1 || !(eps > 0) || !(momentum >= 0 && momentum <= 1))
    throw std::invalid_argument(fmt::format("{}: features {}, eps {}, momentum {}: expected features >= 1, eps > 0 "
                                            "and momentum in [0, 1]",
                                            name, features, eps, momentum));
  if (affine) {
    weight_ = register_parameter("weight", ones({features}));
    bias_ = register_parameter("bias", zeros({features}));
  }
  if (track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({features}));
    running_var_ = register_buffer("running_var", ones({features}));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, i64));
  }
}

std::string BatchNorm::type_name() const {
  return fmt::format("{}({}, eps={}, momentum={})", name_, features_, eps_, momentum_);
}

Tensor BatchNorm::forward(const Tensor& x) { return run(x, false); }

Tensor BatchNorm::forward_relu(const Tensor& x) { return run(x, true); }

Tensor BatchNorm::run(const Tensor& x, bool relu) {
  const auto named = scope();
  require_input(x, ranks_, features_,
                ranks_.back() == 5   ? "(N,C,D,H,W)"
                : ranks_.back() == 4 ? "(N,C,H,W)"
                                     : "(N,C) or (N,C,L)");
  // Without running statistics, evaluation normalises with the batch's own (as PyTorch).
  const bool batch_stats = is_training() || !running_mean_.defined();
  if (is_training() && num_batches_tracked_.defined()) num_batches_tracked_.set({}, num_batches_tracked_.item() + 1);
  // (N,C,D,H,W): the same statistics per channel over (N,C,D*H*W)
  const Tensor in = x.dim() == 5 ? reshape(x, {x.size(0), x.size(1), -1}) : x;
  const Tensor y = (relu ? batch_norm_relu : batch_norm)(in, running_mean_, running_var_, weight_, bias_, batch_stats,
                                                        momentum_, eps_, across_);
  return x.dim() == 5 ? reshape(y, x.shape()) : y;
}

}  // namespace xg::nn
