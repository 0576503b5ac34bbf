// Pooling layers on (N,C,H,W) images, as torch.nn's: MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d. None has parameters.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// xg::max_pool2d with a fixed window.
class MaxPool2d : public Module {
 public:
  // The window is checked by forward, as max_pool2d checks it.
  explicit MaxPool2d(const Pool2dOptions& window);
  // A square kernel, stride (0: the kernel) and padding.
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> (N,C,Ho,Wo)
  std::string type_name() const override;   // "MaxPool2d(kernel=2x2, stride=2x2, padding=0x0)"
  const Pool2dOptions& options() const { return options_; }  // the window

 private:
  Pool2dOptions options_;
};

// xg::avg_pool2d with a fixed window.
class AvgPool2d : public Module {
 public:
  // The window is checked by forward, as avg_pool2d checks it.
  explicit AvgPool2d(const AvgPool2dOptions& window);
  // A square kernel, stride (0: the kernel) and padding.
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> (N,C,Ho,Wo)
  std::string type_name() const override;   // "AvgPool2d(kernel=2x2, stride=2x2, padding=0x0)"
  const AvgPool2dOptions& options() const { return options_; }  // the window

 private:
  AvgPool2dOptions options_;
};

// xg::adaptive_avg_pool2d to a fixed output size: (1, 1) is global average pooling.
class AdaptiveAvgPool2d : public Module {
 public:
  // Throws std::invalid_argument when a size is below 1.
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size);
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> (N,C,Ho,Wo)
  std::string type_name() const override;   // "AdaptiveAvgPool2d(output=1x1)"

 private:
  std::array<int64_t, 2> output_size_;
};

}  // namespace xg::nn
