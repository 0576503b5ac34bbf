// Convolution layers: Conv1d, Conv2d and ConvTranspose2d, as torch.nn's,
// on (N,C,L) sequences and (N,C,H,W) images.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// xg::conv2d with its weight (out, in/groups, kh, kw) and bias (out), both
// U(-b, b) with b = 1/sqrt(in/groups kh kw), as torch.nn.Conv2d. `window`
// gives stride, padding (or same), dilation and groups, in PyTorch's order.
class Conv2d : public Module {
 public:
  // A (kh, kw) kernel; throws std::invalid_argument on sizes below 1 or
  // groups that do not divide in and out.
  Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen, const Conv2dOptions& window = {},
         bool bias = true);
  Conv2d(int64_t in, int64_t out, int64_t kernel, Generator& gen, const Conv2dOptions& window = {}, bool bias = true)
      : Conv2d(in, out, {kernel, kernel}, gen, window, bias) {}  // a square kernel
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, Ho, Wo)
  std::string type_name() const override;   // "Conv2d(in=1, out=8, kernel=3x3, stride=1x1, padding=1x1)"

  const Conv2dOptions& options() const { return options_; }  // stride, padding, dilation, groups
  std::array<int64_t, 2> kernel_size() const { return kernel_; }  // (kh, kw)
  Tensor& weight() { return weight_; }                        // (out, in/groups, kh, kw)
  Tensor& bias() { return bias_; }                            // (out), undefined without bias

 private:
  int64_t in_, out_;
  std::array<int64_t, 2> kernel_;
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

// xg::conv1d with its weight (out, in/groups, k) and bias (out),
// initialised as torch.nn.Conv1d (b = 1/sqrt(in/groups k)).
class Conv1d : public Module {
 public:
  // Throws std::invalid_argument as Conv2d's constructor.
  Conv1d(int64_t in, int64_t out, int64_t kernel, Generator& gen, const Conv1dOptions& window = {},
         bool bias = true);
  Tensor forward(const Tensor& x) override;  // (N, in, L) -> (N, out, Lo)
  std::string type_name() const override;   // "Conv1d(in=4, out=8, kernel=3, stride=1, padding=0)"

  const Conv1dOptions& options() const { return options_; }  // stride, padding, dilation, groups
  Tensor& weight() { return weight_; }  // (out, in/groups, k)
  Tensor& bias() { return bias_; }      // (out), undefined without bias

 private:
  int64_t in_, out_, kernel_;
  Conv1dOptions options_;
  Tensor weight_, bias_;
};

// xg::conv_transpose2d with its weight (in, out/groups, kh, kw) and bias
// (out), initialised as torch.nn.ConvTranspose2d, which takes the fan-in
// from the weight's second dimension: b = 1/sqrt(out/groups kh kw).
class ConvTranspose2d : public Module {
 public:
  // A (kh, kw) kernel; throws std::invalid_argument as Conv2d's constructor.
  ConvTranspose2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen,
                  const ConvTranspose2dOptions& window = {}, bool bias = true);
  ConvTranspose2d(int64_t in, int64_t out, int64_t kernel, Generator& gen, const ConvTranspose2dOptions& window = {},
                  bool bias = true)
      : ConvTranspose2d(in, out, {kernel, kernel}, gen, window, bias) {}  // a square kernel
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, out, Ho, Wo)
  std::string type_name() const override;

  const ConvTranspose2dOptions& options() const { return options_; }  // the window
  Tensor& weight() { return weight_; }  // (in, out/groups, kh, kw)
  Tensor& bias() { return bias_; }      // (out), undefined without bias

 private:
  int64_t in_, out_;
  std::array<int64_t, 2> kernel_;
  ConvTranspose2dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace xg::nn
