// The windows of convolution and pooling in LibTorch's form. A size is one
// value for every spatial axis or one per axis (ExpandingArray: 3 is (3, 3)
// in 2-D); each function has one options struct, its required arguments in
// the constructor and PyTorch's keyword arguments as chaining setters:
//   conv2d(x, w, b, Conv2dFuncOptions().stride(2).padding(1))
//   max_pool2d(x, MaxPool2dOptions(3).stride(2).padding(1))
// Axes are in PyTorch's order: (length), (height, width), (depth, height,
// width). Every op turns its options into one geometry (autograd/detail/
// window.h), where the output size, the checks and their messages are
// written once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/options.h"

namespace xg {

namespace window_impl {  // what the inline code below calls
// Throws std::invalid_argument: `count` values given where D (or 1) were expected.
[[noreturn]] void throw_expanding_count(size_t D, size_t count);
// An option's values as PyTorch prints them: "(2, 3)", or "2" for one axis.
std::string tuple_text(const std::vector<int64_t>& v);
// "same" -> true, "valid" -> false; anything else throws std::invalid_argument.
bool padding_is_same(const std::string& mode);
}  // namespace window_impl

// D sizes, one per spatial axis, written as one value for all of them or as
// D values (LibTorch's ExpandingArray).
template <size_t D>
class ExpandingArray {
 public:
  ExpandingArray(int64_t v) { values_.fill(v); }  // NOLINT(runtime/explicit): 3 means (3, 3), as in PyTorch
  // D values, or one value for every axis; another count throws std::invalid_argument.
  ExpandingArray(std::initializer_list<int64_t> v) {  // NOLINT(runtime/explicit)
    if (v.size() == 1) {
      values_.fill(*v.begin());
      return;
    }
    if (v.size() != D) window_impl::throw_expanding_count(D, v.size());
    size_t i = 0;
    for (int64_t x : v) values_[i++] = x;
  }
  ExpandingArray(const std::array<int64_t, D>& v) : values_(v) {}  // NOLINT(runtime/explicit): one per axis
  int64_t operator[](size_t i) const { return values_[i]; }         // axis i's value
  const std::array<int64_t, D>& values() const { return values_; }  // all D values
  bool operator==(const ExpandingArray& o) const { return values_ == o.values_; }  // the same values
  bool operator!=(const ExpandingArray& o) const { return values_ != o.values_; }  // not the same values

 private:
  std::array<int64_t, D> values_{};
};

// A convolution's padding: zeros on each side of each axis (ExpandingArray),
// or PyTorch's "same" (stride 1; the output as long as the input, an odd
// total's extra zero at the end) or "valid" (none).
template <size_t D>
class ConvPadding {
 public:
  // On every side of every axis (any integer type: a literal 0 is not taken for a mode).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ConvPadding(I v) : size_(static_cast<int64_t>(v)) {}  // NOLINT(runtime/explicit)
  ConvPadding(std::initializer_list<int64_t> v) : size_(v) {}         // NOLINT(runtime/explicit): per axis
  ConvPadding(const std::array<int64_t, D>& v) : size_(v) {}          // NOLINT(runtime/explicit): per axis
  ConvPadding(const char* mode) : size_(0), same_(window_impl::padding_is_same(mode)) {}  // NOLINT: "same" or "valid"
  bool same() const { return same_; }                                 // padding="same"
  const ExpandingArray<D>& size() const { return size_; }             // per axis, when not same
  bool operator==(const ConvPadding& o) const { return same_ == o.same_ && size_ == o.size_; }  // the same padding

 private:
  ExpandingArray<D> size_;
  bool same_ = false;
};

// torch.nn.functional.conv1d/2d/3d's keyword arguments (the kernel is the weight's).
template <size_t D>
struct ConvFuncOptions {
  ConvFuncOptions() = default;
  XG_ARG(ExpandingArray<D>, stride) = 1;    // at least 1
  XG_ARG(ConvPadding<D>, padding) = 0;      // zeros on each side (at least 0), "same" or "valid"
  XG_ARG(ExpandingArray<D>, dilation) = 1;  // spacing of the kernel's taps, at least 1
  XG_ARG(int64_t, groups) = 1;              // channels in this many independent groups (C and O divisible)
};
using Conv1dFuncOptions = ConvFuncOptions<1>;  // conv1d's
using Conv2dFuncOptions = ConvFuncOptions<2>;  // conv2d's
using Conv3dFuncOptions = ConvFuncOptions<3>;  // conv3d's

// torch.nn.functional.conv_transpose1d/2d/3d's keyword arguments, in its order.
template <size_t D>
struct ConvTransposeFuncOptions {
  ConvTransposeFuncOptions() = default;
  XG_ARG(ExpandingArray<D>, stride) = 1;          // at least 1
  XG_ARG(ExpandingArray<D>, padding) = 0;         // taken off each side of the output, at least 0
  XG_ARG(ExpandingArray<D>, output_padding) = 0;  // added at the end, below the stride or the dilation
  XG_ARG(int64_t, groups) = 1;                    // dividing both channel counts
  XG_ARG(ExpandingArray<D>, dilation) = 1;        // at least 1
};
using ConvTranspose1dFuncOptions = ConvTransposeFuncOptions<1>;  // conv_transpose1d's
using ConvTranspose2dFuncOptions = ConvTransposeFuncOptions<2>;  // conv_transpose2d's
using ConvTranspose3dFuncOptions = ConvTransposeFuncOptions<3>;  // conv_transpose3d's

// Max pooling's window (the function's and the module's): output size
// floor((L + 2 padding - dilation (kernel - 1) - 1) / stride) + 1, rounded
// up with ceil_mode (a last window must still start inside the input or its
// left padding).
template <size_t D>
struct MaxPoolOptions {
  MaxPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  XG_ARG(ExpandingArray<D>, kernel_size);   // at least 1
  XG_ARG(ExpandingArray<D>, stride);        // at least 1; the kernel unless set (PyTorch's stride=None)
  XG_ARG(ExpandingArray<D>, padding) = 0;   // implicit -inf on each side, from 0 to half the kernel
  XG_ARG(ExpandingArray<D>, dilation) = 1;  // spacing of the window's taps, at least 1
  XG_ARG(bool, ceil_mode) = false;          // round the output size up instead of down
};
using MaxPool1dOptions = MaxPoolOptions<1>;  // max_pool1d's and MaxPool1d's
using MaxPool2dOptions = MaxPoolOptions<2>;  // max_pool2d's and MaxPool2d's
using MaxPool3dOptions = MaxPoolOptions<3>;  // max_pool3d's and MaxPool3d's

// Average pooling's window; its output size is max pooling's without dilation.
template <size_t D>
struct AvgPoolOptions {
  AvgPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  XG_ARG(ExpandingArray<D>, kernel_size);  // at least 1
  XG_ARG(ExpandingArray<D>, stride);       // at least 1; the kernel unless set
  XG_ARG(ExpandingArray<D>, padding) = 0;  // zeros on each side, from 0 to half the kernel
  XG_ARG(bool, ceil_mode) = false;         // round the output size up instead of down
  XG_ARG(bool, count_include_pad) = true;  // divide by the window's size with its padding, not only its inputs
  // divide every window's sum by this instead (at least 1), as PyTorch's divisor_override
  XG_ARG(std::optional<int64_t>, divisor_override);
};
using AvgPool1dOptions = AvgPoolOptions<1>;  // avg_pool1d's and AvgPool1d's
using AvgPool2dOptions = AvgPoolOptions<2>;  // avg_pool2d's and AvgPool2d's
using AvgPool3dOptions = AvgPoolOptions<3>;  // avg_pool3d's and AvgPool3d's

// Power-average pooling: (the sum of x^p over each window)^(1/p).
template <size_t D>
struct LPPoolOptions {
  // p and the window; the stride is the kernel unless set
  LPPoolOptions(double norm_type, ExpandingArray<D> kernel_size)
      : norm_type_(norm_type), kernel_size_(kernel_size), stride_(kernel_size) {}
  XG_ARG(double, norm_type);               // p > 0
  XG_ARG(ExpandingArray<D>, kernel_size);  // at least 1
  XG_ARG(ExpandingArray<D>, stride);       // at least 1; the kernel unless set
  XG_ARG(bool, ceil_mode) = false;         // round the output size up instead of down
};
using LPPool1dOptions = LPPoolOptions<1>;  // lp_pool1d's and LPPool1d's
using LPPool2dOptions = LPPoolOptions<2>;  // lp_pool2d's and LPPool2d's

// torch.nn.MaxUnpool1d/2d/3d's window (max_unpool takes the output size itself).
template <size_t D>
struct MaxUnpoolOptions {
  MaxUnpoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  XG_ARG(ExpandingArray<D>, kernel_size);  // at least 1
  XG_ARG(ExpandingArray<D>, stride);       // at least 1; the kernel unless set
  XG_ARG(ExpandingArray<D>, padding) = 0;  // at least 0
};
using MaxUnpool1dOptions = MaxUnpoolOptions<1>;  // MaxUnpool1d's
using MaxUnpool2dOptions = MaxUnpoolOptions<2>;  // MaxUnpool2d's
using MaxUnpool3dOptions = MaxUnpoolOptions<3>;  // MaxUnpool3d's

// torch.nn.functional.unfold's window (and nn::Unfold's), (height, width).
struct UnfoldOptions {
  UnfoldOptions(ExpandingArray<2> kernel_size) : kernel_size_(kernel_size) {}  // NOLINT(runtime/explicit)
  XG_ARG(ExpandingArray<2>, kernel_size);   // at least 1
  XG_ARG(ExpandingArray<2>, dilation) = 1;  // at least 1
  XG_ARG(ExpandingArray<2>, padding) = 0;   // zeros on each side, at least 0
  XG_ARG(ExpandingArray<2>, stride) = 1;    // at least 1
};

// torch.nn.functional.fold's (and nn::Fold's): the image's size and the window.
struct FoldOptions {
  // the image's (H, W) and the window's
  FoldOptions(ExpandingArray<2> output_size, ExpandingArray<2> kernel_size)
      : output_size_(output_size), kernel_size_(kernel_size) {}
  XG_ARG(ExpandingArray<2>, output_size);   // the image's (H, W)
  XG_ARG(ExpandingArray<2>, kernel_size);   // at least 1
  XG_ARG(ExpandingArray<2>, dilation) = 1;  // at least 1
  XG_ARG(ExpandingArray<2>, padding) = 0;   // zeros on each side, at least 0
  XG_ARG(ExpandingArray<2>, stride) = 1;    // at least 1
};

// "(2, 3)" for {2, 3}, "2" for a 1-D size: as PyTorch prints a window.
template <size_t D>
std::string window_text(const ExpandingArray<D>& a) {
  return window_impl::tuple_text({a.values().begin(), a.values().end()});
}
// A size as Python prints a tuple: "(2, 3)", and "(4,)" for one axis
// (PyTorch's module reprs after _single, _pair, _triple).
template <size_t D>
std::string tuple_repr(const ExpandingArray<D>& a) {
  return D == 1 ? "(" + std::to_string(a[0]) + ",)" : window_text(a);
}

}  // namespace xg
