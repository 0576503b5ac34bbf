#include "nn/conv.h"

#include <cmath>
#include <stdexcept>

#include "nn/init.h"

namespace xg::nn {

namespace {

// The checks every convolution layer makes of its sizes, before it
// allocates: channels and kernel positive, groups dividing both channels.
void check_sizes(const char* layer, int64_t in, int64_t out, int64_t kh, int64_t kw, int64_t groups) {
  if (in <= 0 || out <= 0 || kh <= 0 || kw <= 0)
    throw std::invalid_argument(std::string(layer) + ": in, out and the kernel must be positive, got in=" +
                                std::to_string(in) + ", out=" + std::to_string(out) + ", kernel=" +
                                std::to_string(kh) + "x" + std::to_string(kw));
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    throw std::invalid_argument(std::string(layer) + ": groups=" + std::to_string(groups) +
                                " must be at least 1 and divide in=" + std::to_string(in) + " and out=" +
                                std::to_string(out));
}

// PyTorch's default for every convolution: weight and bias U(-b, b), b =
// 1/sqrt(fan_in) (kaiming_uniform_ with a = sqrt(5) comes to the same bound).
void init_uniform(Tensor& weight, Tensor& bias, int64_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  uniform_(weight, gen, -bound, bound);
  if (bias.defined()) uniform_(bias, gen, -bound, bound);
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen, const Conv2dOptions& window,
               bool bias)
    : in_(in), out_(out), kernel_(kernel), options_(window) {
  check_sizes("Conv2d", in, out, kernel[0], kernel[1], window.groups);
  weight_ = register_parameter("weight", empty({out, in / window.groups, kernel[0], kernel[1]}));
  if (bias) bias_ = register_parameter("bias", empty({out}));
  init_uniform(weight_, bias_, in / window.groups * kernel[0] * kernel[1], gen);
}

std::string Conv2d::type_name() const {
  std::string s = "Conv2d(in=" + std::to_string(in_) + ", out=" + std::to_string(out_) +
                  ", kernel=" + pair_text(kernel_) + ", stride=" + pair_text(options_.stride) +
                  ", padding=" + (options_.same ? std::string("same") : pair_text(options_.padding));
  if (options_.dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + pair_text(options_.dilation);
  if (options_.groups != 1) s += ", groups=" + std::to_string(options_.groups);
  return s + ")";
}

Tensor Conv2d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, in_, "(N,C,H,W)");
  return conv2d(x, weight_, bias_, options_);
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t kernel, Generator& gen, const Conv1dOptions& window, bool bias)
    : in_(in), out_(out), kernel_(kernel), options_(window) {
  check_sizes("Conv1d", in, out, 1, kernel, window.groups);
  weight_ = register_parameter("weight", empty({out, in / window.groups, kernel}));
  if (bias) bias_ = register_parameter("bias", empty({out}));
  init_uniform(weight_, bias_, in / window.groups * kernel, gen);
}

std::string Conv1d::type_name() const {
  std::string s = "Conv1d(in=" + std::to_string(in_) + ", out=" + std::to_string(out_) +
                  ", kernel=" + std::to_string(kernel_) + ", stride=" + std::to_string(options_.stride) +
                  ", padding=" + (options_.same ? std::string("same") : std::to_string(options_.padding));
  if (options_.dilation != 1) s += ", dilation=" + std::to_string(options_.dilation);
  if (options_.groups != 1) s += ", groups=" + std::to_string(options_.groups);
  return s + ")";
}

Tensor Conv1d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {3}, in_, "(N,C,L)");
  return conv1d(x, weight_, bias_, options_);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen,
                                 const ConvTranspose2dOptions& window, bool bias)
    : in_(in), out_(out), kernel_(kernel), options_(window) {
  check_sizes("ConvTranspose2d", in, out, kernel[0], kernel[1], window.groups);
  weight_ = register_parameter("weight", empty({in, out / window.groups, kernel[0], kernel[1]}));
  if (bias) bias_ = register_parameter("bias", empty({out}));
  init_uniform(weight_, bias_, out / window.groups * kernel[0] * kernel[1], gen);
}

std::string ConvTranspose2d::type_name() const {
  std::string s = "ConvTranspose2d(in=" + std::to_string(in_) + ", out=" + std::to_string(out_) +
                  ", kernel=" + pair_text(kernel_) + ", stride=" + pair_text(options_.stride) +
                  ", padding=" + pair_text(options_.padding);
  if (options_.output_padding != std::array<int64_t, 2>{0, 0})
    s += ", output_padding=" + pair_text(options_.output_padding);
  if (options_.dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + pair_text(options_.dilation);
  if (options_.groups != 1) s += ", groups=" + std::to_string(options_.groups);
  return s + ")";
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, in_, "(N,C,H,W)");
  return conv_transpose2d(x, weight_, bias_, options_);
}

}  // namespace xg::nn
