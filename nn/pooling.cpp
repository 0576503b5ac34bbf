#include "nn/pooling.h"

#include <stdexcept>

namespace xg::nn {

namespace {

std::string pair(const std::array<int64_t, 2>& a) { return std::to_string(a[0]) + "x" + std::to_string(a[1]); }

// The window as PyTorch prints it, a stride of 0 shown as the kernel it means.
std::string window_text(const std::array<int64_t, 2>& kernel, std::array<int64_t, 2> stride,
                        const std::array<int64_t, 2>& padding) {
  for (int i = 0; i < 2; ++i)
    if (stride[i] == 0) stride[i] = kernel[i];
  return "kernel=" + pair(kernel) + ", stride=" + pair(stride) + ", padding=" + pair(padding);
}

void check_image(const Module& m, const Tensor& x) {
  if (!x.defined()) throw ShapeError(m.describe() + ": input is undefined");
  if (x.dim() != 4) throw ShapeError(m.describe() + ": expected an input (N,C,H,W), got " + shape_str(x.shape()));
}

}  // namespace

MaxPool2d::MaxPool2d(const Pool2dOptions& window) : options_(window) {}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding) {
  options_.kernel = {kernel, kernel};
  options_.stride = {stride, stride};
  options_.padding = {padding, padding};
}

std::string MaxPool2d::type_name() const {
  std::string s = "MaxPool2d(" + window_text(options_.kernel, options_.stride, options_.padding);
  if (options_.dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + pair(options_.dilation);
  return s + (options_.ceil_mode ? ", ceil_mode)" : ")");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  const auto named = scope();
  check_image(*this, x);
  return max_pool2d(x, options_);
}

AvgPool2d::AvgPool2d(const AvgPool2dOptions& window) : options_(window) {}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding) {
  options_.kernel = {kernel, kernel};
  options_.stride = {stride, stride};
  options_.padding = {padding, padding};
}

std::string AvgPool2d::type_name() const {
  std::string s = "AvgPool2d(" + window_text(options_.kernel, options_.stride, options_.padding);
  if (options_.ceil_mode) s += ", ceil_mode";
  return s + (options_.count_include_pad ? ")" : ", count_include_pad=false)");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  const auto named = scope();
  check_image(*this, x);
  return avg_pool2d(x, options_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : output_size_(output_size) {
  if (output_size[0] < 1 || output_size[1] < 1)
    throw std::invalid_argument("AdaptiveAvgPool2d: output size " + pair(output_size) + ": expected each at least 1");
}

std::string AdaptiveAvgPool2d::type_name() const { return "AdaptiveAvgPool2d(output=" + pair(output_size_) + ")"; }

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  const auto named = scope();
  check_image(*this, x);
  return adaptive_avg_pool2d(x, output_size_);
}

}  // namespace xg::nn
