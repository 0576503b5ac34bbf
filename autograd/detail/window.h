// The one geometry of every sliding window: convolutions (1-D to 3-D,
// transposed ones through fold), pooling, unfold and fold. Each op turns its
// options (autograd/window.h) into a WindowSpec; window_axes checks it and
// gives each axis's output size by PyTorch's rule, with one set of messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/trace.h"
#include "autograd/window.h"

namespace xg::detail {

// One spatial axis of a window: output o reads the input positions
// o stride - pad_before + k dilation, k < kernel, those inside [0, in).
struct WindowAxis {
  int64_t in = 0;          // input length
  int64_t out = 0;         // output length
  int64_t kernel = 1;      // taps
  int64_t stride = 1;      // between consecutive outputs' first taps
  int64_t pad_before = 0;  // implicit positions before the input
  int64_t pad_after = 0;   // and after it
  int64_t dilation = 1;    // between consecutive taps
  int64_t start(int64_t o) const { return o * stride - pad_before; }  // output o's first tap
  int64_t span() const { return dilation * (kernel - 1) + 1; }       // first to last tap
};

// What an op asks of its window, one value per spatial axis in each field.
struct WindowSpec {
  std::vector<int64_t> kernel, stride, padding, dilation;
  std::vector<int64_t> pad_after;  // the padding after the input when it differs (padding="same"); empty: `padding`
  bool ceil_mode = false;          // round the output size up
  bool pooling = false;            // padding at most half the kernel, as PyTorch's pooling requires
};

// Checks every field (each message names the op, the option, its values and
// the accepted range) and returns the axes, `spatial` being the input's
// last sizes (one per axis); an input smaller than the window is refused.
std::vector<WindowAxis> window_axes(const std::string& op, const std::vector<int64_t>& spatial, const WindowSpec& s);

// The fields of each options struct as a WindowSpec; a convolution's kernel
// is its weight's last D sizes. padding="same" needs stride 1 (refused
// otherwise, naming op) and puts an odd total's extra zero after the input.
template <size_t D>
std::vector<int64_t> values(const ExpandingArray<D>& a) {
  return {a.values().begin(), a.values().end()};
}
WindowSpec conv_spec(const std::string& op, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& padding, bool same, const std::vector<int64_t>& dilation);
template <size_t D>
WindowSpec spec_of(const std::string& op, const ConvFuncOptions<D>& o, const std::vector<int64_t>& kernel) {
  return conv_spec(op, kernel, values(o.stride()), values(o.padding().size()), o.padding().same(),
                   values(o.dilation()));
}
template <size_t D>
WindowSpec spec_of(const MaxPoolOptions<D>& o) {
  return {values(o.kernel_size()), values(o.stride()), values(o.padding()), values(o.dilation()), {}, o.ceil_mode(),
          true};
}
template <size_t D>
WindowSpec spec_of(const AvgPoolOptions<D>& o) {
  return {values(o.kernel_size()), values(o.stride()), values(o.padding()), std::vector<int64_t>(D, 1), {},
          o.ceil_mode(), true};
}
// unfold's and fold's (UnfoldOptions, FoldOptions: the same four sizes).
template <class Options>
WindowSpec spec_of_columns(const Options& o) {
  return {values(o.kernel_size()), values(o.stride()), values(o.padding()), values(o.dilation()), {}, false, false};
}

// A trace's view of the axes: kernel, stride, padding before and after,
// dilation (the caller adds groups, ceil_mode and the rest).
attr::Window traced_window(const std::vector<WindowAxis>& axes);

// A transposed convolution's options checked, each message naming op:
// stride and dilation at least 1, padding and output_padding at least 0,
// output_padding below the stride or the dilation.
void check_transposed(const std::string& op, const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                      const std::vector<int64_t>& output_padding, const std::vector<int64_t>& dilation);
// A transposed convolution's output length along each axis, its options
// (check_transposed) and input (check_spatial) checked: (in - 1) stride - 2 padding + dilation
// (kernel - 1) + output_padding + 1, output_padding below the stride or the
// dilation (the rows past the last input's reach are never written).
std::vector<int64_t> transposed_sizes(const std::string& op, const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                                      const std::vector<int64_t>& padding, const std::vector<int64_t>& output_padding,
                                      const std::vector<int64_t>& dilation);
template <size_t D>
std::vector<int64_t> transposed_sizes(const std::string& op, const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& kernel, const ConvTransposeFuncOptions<D>& o) {
  return transposed_sizes(op, in, kernel, values(o.stride()), values(o.padding()), values(o.output_padding()),
                          values(o.dilation()));
}

// Refuses an input whose spatial sizes hold a 0, naming op (as PyTorch, only
// the batch and the channels of a windowed op's input may be empty).
void check_spatial(const std::string& op, const std::vector<int64_t>& spatial);
// The axes' lengths and windows as text: "3x4".
std::string sizes_text(const std::vector<int64_t>& v);
// Refuses an option with a value below `lo`, naming the op, the option, its
// values and the range ("conv2d: stride (0, 1): expected each at least 1").
void check_at_least(const std::string& op, const char* name, const std::vector<int64_t>& v, int64_t lo);

}  // namespace xg::detail
