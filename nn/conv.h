// Convolution layers as torch.nn's: Conv1d, Conv2d, Conv3d on (N,C,L),
// (N,C,H,W) and (N,C,D,H,W); ConvTranspose1d/2d/3d. Options in
// LibTorch's form, PyTorch's arguments in its order:
//   nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
//   nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false), gen)
#pragma once

#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// torch.nn.Conv1d/2d/3d's arguments: channels and kernel in the
// constructor, the rest as setters (PyTorch's defaults).
template <size_t D>
struct ConvOptions {
  // PyTorch's three required arguments
  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  XG_ARG(int64_t, in_channels);             // at least 1, divisible by groups
  XG_ARG(int64_t, out_channels);            // at least 1, divisible by groups
  XG_ARG(ExpandingArray<D>, kernel_size);   // at least 1
  XG_ARG(ExpandingArray<D>, stride) = 1;    // at least 1
  XG_ARG(ConvPadding<D>, padding) = 0;      // per side (at least 0), "same" (stride 1) or "valid"
  XG_ARG(ExpandingArray<D>, dilation) = 1;  // at least 1
  XG_ARG(int64_t, groups) = 1;              // channel groups, dividing in and out
  XG_ARG(bool, bias) = true;                // a learnable bias (out)
  XG_ARG(std::string, padding_mode) = "zeros";  // the padding's values: zeros, reflect, replicate or circular
};
using Conv1dOptions = ConvOptions<1>;  // Conv1d's
using Conv2dOptions = ConvOptions<2>;  // Conv2d's
using Conv3dOptions = ConvOptions<3>;  // Conv3d's

// A convolution with weight (out, in/groups, *kernel) and bias (out), both
// U(-b, b) with b = 1/sqrt(in/groups prod(kernel)), as torch.nn.ConvNd. A
// padding_mode other than zeros pads the input with pad() in that mode,
// then convolves with no padding, as PyTorch does.
template <size_t D>
class ConvNd : public Module {
 public:
  // Throws std::invalid_argument on sizes below 1, groups not dividing both
  // channel counts, an unknown padding_mode or "same" with a stride.
  ConvNd(const ConvOptions<D>& options, Generator& gen);
  // PyTorch's three required arguments, the rest default.
  ConvNd(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size, Generator& gen)
      : ConvNd(ConvOptions<D>(in_channels, out_channels, kernel_size), gen) {}
  // The options, drawing from default_generator().
  explicit ConvNd(const ConvOptions<D>& options) : ConvNd(options, default_generator()) {}
  // PyTorch's three required arguments, drawing from default_generator().
  ConvNd(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : ConvNd(ConvOptions<D>(in_channels, out_channels, kernel_size), default_generator()) {}
  Tensor forward(const Tensor& x) override;  // (N, in, *spatial) -> (N, out, *spatial')
  // As PyTorch prints it: "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"
  std::string type_name() const override;
  const ConvOptions<D>& options() const { return options_; }  // as constructed
  Tensor& weight() { return weight_; }                         // (out, in/groups, *kernel)
  Tensor& bias() { return bias_; }                             // (out), undefined without bias

 private:
  ConvOptions<D> options_;
  Tensor weight_, bias_;
};
// torch.nn.Conv1d: (N, in, L) -> (N, out, Lo).
class Conv1d : public ConvNd<1> {
 public:
  using ConvNd<1>::ConvNd;
};
// torch.nn.Conv2d: (N, in, H, W) -> (N, out, Ho, Wo).
class Conv2d : public ConvNd<2> {
 public:
  using ConvNd<2>::ConvNd;
};
// torch.nn.Conv3d: (N, in, D, H, W) -> (N, out, Do, Ho, Wo).
class Conv3d : public ConvNd<3> {
 public:
  using ConvNd<3>::ConvNd;
};

// torch.nn.ConvTranspose1d/2d/3d's arguments, in PyTorch's order.
template <size_t D>
struct ConvTransposeOptions {
  // PyTorch's three required arguments
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  XG_ARG(int64_t, in_channels);                   // at least 1, divisible by groups
  XG_ARG(int64_t, out_channels);                  // at least 1, divisible by groups
  XG_ARG(ExpandingArray<D>, kernel_size);         // at least 1
  XG_ARG(ExpandingArray<D>, stride) = 1;          // at least 1
  XG_ARG(ExpandingArray<D>, padding) = 0;         // taken off each side of the output
  XG_ARG(ExpandingArray<D>, output_padding) = 0;  // added at the end, below the stride or the dilation
  XG_ARG(int64_t, groups) = 1;                    // channel groups, dividing in and out
  XG_ARG(bool, bias) = true;                      // a learnable bias (out)
  XG_ARG(ExpandingArray<D>, dilation) = 1;        // at least 1
};
using ConvTranspose1dOptions = ConvTransposeOptions<1>;  // ConvTranspose1d's
using ConvTranspose2dOptions = ConvTransposeOptions<2>;  // ConvTranspose2d's
using ConvTranspose3dOptions = ConvTransposeOptions<3>;  // ConvTranspose3d's

// A transposed convolution with weight (in, out/groups, *kernel) and bias
// (out), initialised as torch.nn.ConvTransposeNd, which takes the fan-in
// from the weight's second dimension: b = 1/sqrt(out/groups prod(kernel)).
template <size_t D>
class ConvTransposeNd : public Module {
 public:
  // Throws std::invalid_argument as ConvNd's constructor.
  ConvTransposeNd(const ConvTransposeOptions<D>& options, Generator& gen);
  // PyTorch's three required arguments, the rest default.
  ConvTransposeNd(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size, Generator& gen)
      : ConvTransposeNd(ConvTransposeOptions<D>(in_channels, out_channels, kernel_size), gen) {}
  // The options, drawing from default_generator().
  explicit ConvTransposeNd(const ConvTransposeOptions<D>& options) : ConvTransposeNd(options, default_generator()) {}
  // PyTorch's three required arguments, drawing from default_generator().
  ConvTransposeNd(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : ConvTransposeNd(ConvTransposeOptions<D>(in_channels, out_channels, kernel_size), default_generator()) {}
  Tensor forward(const Tensor& x) override;  // (N, in, *spatial) -> (N, out, *spatial')
  std::string type_name() const override;   // as PyTorch prints it
  const ConvTransposeOptions<D>& options() const { return options_; }  // as constructed
  Tensor& weight() { return weight_; }  // (in, out/groups, *kernel)
  Tensor& bias() { return bias_; }      // (out), undefined without bias

 private:
  ConvTransposeOptions<D> options_;
  Tensor weight_, bias_;
};
// torch.nn.ConvTranspose1d: (N, in, L) -> (N, out, Lo).
class ConvTranspose1d : public ConvTransposeNd<1> {
 public:
  using ConvTransposeNd<1>::ConvTransposeNd;
};
// torch.nn.ConvTranspose2d: (N, in, H, W) -> (N, out, Ho, Wo).
class ConvTranspose2d : public ConvTransposeNd<2> {
 public:
  using ConvTransposeNd<2>::ConvTransposeNd;
};
// torch.nn.ConvTranspose3d: (N, in, D, H, W) -> (N, out, Do, Ho, Wo).
class ConvTranspose3d : public ConvTransposeNd<3> {
 public:
  using ConvTransposeNd<3>::ConvTransposeNd;
};

}  // namespace xg::nn
