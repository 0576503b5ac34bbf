#include "nn/pooling.h"

#include <stdexcept>

namespace xg::nn {

namespace {

// Either pooling window with the same kernel, stride and padding on both axes.
template <class Options>
Options square(int64_t kernel, int64_t stride, int64_t padding) {
  Options o;
  o.kernel = {kernel, kernel};
  o.stride = {stride, stride};
  o.padding = {padding, padding};
  return o;
}

// The window as PyTorch prints it, a stride of 0 shown as the kernel it means.
std::string window_text(const std::array<int64_t, 2>& kernel, std::array<int64_t, 2> stride,
                        const std::array<int64_t, 2>& padding) {
  for (int i = 0; i < 2; ++i)
    if (stride[i] == 0) stride[i] = kernel[i];
  return "kernel=" + pair_text(kernel) + ", stride=" + pair_text(stride) + ", padding=" + pair_text(padding);
}

}  // namespace

MaxPool2d::MaxPool2d(const Pool2dOptions& window) : options_(window) {}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : MaxPool2d(square<Pool2dOptions>(kernel, stride, padding)) {}

std::string MaxPool2d::type_name() const {
  std::string s = "MaxPool2d(" + window_text(options_.kernel, options_.stride, options_.padding);
  if (options_.dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + pair_text(options_.dilation);
  return s + (options_.ceil_mode ? ", ceil_mode)" : ")");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, -1, "(N,C,H,W)");
  return max_pool2d(x, options_);
}

AvgPool2d::AvgPool2d(const AvgPool2dOptions& window) : options_(window) {}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : AvgPool2d(square<AvgPool2dOptions>(kernel, stride, padding)) {}

std::string AvgPool2d::type_name() const {
  std::string s = "AvgPool2d(" + window_text(options_.kernel, options_.stride, options_.padding);
  if (options_.ceil_mode) s += ", ceil_mode";
  return s + (options_.count_include_pad ? ")" : ", count_include_pad=false)");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, -1, "(N,C,H,W)");
  return avg_pool2d(x, options_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : output_size_(output_size) {
  if (output_size[0] < 1 || output_size[1] < 1)
    throw std::invalid_argument("AdaptiveAvgPool2d: output size " + pair_text(output_size) + ": expected each at least 1");
}

std::string AdaptiveAvgPool2d::type_name() const { return "AdaptiveAvgPool2d(output=" + pair_text(output_size_) + ")"; }

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, -1, "(N,C,H,W)");
  return adaptive_avg_pool2d(x, output_size_);
}

}  // namespace xg::nn
