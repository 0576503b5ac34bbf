// The one window geometry (autograd/detail/window.h): checks, messages and
// the output size of every convolution, pooling, unfold and fold.
#include "autograd/detail/window.h"

#include <fmt/format.h>

#include "autograd/require.h"
#include "autograd/tensor.h"

namespace xg {

namespace window_impl {

void throw_expanding_count(size_t D, size_t count) {
  throw std::invalid_argument(
      fmt::format("a window size of {} values: expected {} (one per axis) or 1 (every axis)", count, D));
}

bool padding_is_same(const std::string& mode) {
  require(mode == "same" || mode == "valid",
          fmt::format("padding \"{}\": expected \"same\", \"valid\" or sizes", mode));
  return mode == "same";
}

std::string tuple_text(const std::vector<int64_t>& v) {
  return v.size() == 1 ? std::to_string(v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace window_impl

namespace detail {

using window_impl::tuple_text;

std::string sizes_text(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, "x")); }

void check_at_least(const std::string& op, const char* name, const std::vector<int64_t>& v, int64_t lo) {
  for (int64_t x : v)
    require(x >= lo, fmt::format("{}: {} {}: expected each at least {}", op, name, tuple_text(v), lo));
}

attr::Window traced_window(const std::vector<WindowAxis>& axes) {
  attr::Window w;
  for (const WindowAxis& a : axes) {
    w.kernel.push_back(a.kernel), w.stride.push_back(a.stride), w.dilation.push_back(a.dilation);
    w.pad_begin.push_back(a.pad_before), w.pad_end.push_back(a.pad_after);
  }
  return w;
}

namespace {

// Floor division (the numerator may be negative).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

WindowSpec conv_spec(const std::string& op, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& padding, bool same, const std::vector<int64_t>& dilation) {
  WindowSpec s{kernel, stride, padding, dilation, {}, false, false};
  if (!same) return s;
  for (int64_t st : stride)
    require(st == 1, fmt::format("{}: padding \"same\" needs stride 1, got stride {}", op, tuple_text(stride)));
  s.pad_after.resize(kernel.size());
  for (size_t i = 0; i < kernel.size(); ++i) {
    const int64_t total = dilation[i] * (kernel[i] - 1);
    s.padding[i] = total / 2;
    s.pad_after[i] = total - total / 2;
  }
  return s;
}

// As PyTorch: of a windowed op's input, only the batch and the channels may be empty.
void check_spatial(const std::string& op, const std::vector<int64_t>& spatial) {
  for (int64_t n : spatial)
    if (n < 1)
      throw ShapeError(fmt::format("{}: spatial size {} is empty: only the batch or the channels may be 0", op,
                                   sizes_text(spatial)));
}

void check_transposed(const std::string& op, const std::vector<int64_t>& s, const std::vector<int64_t>& p,
                      const std::vector<int64_t>& op_, const std::vector<int64_t>& d) {
  check_at_least(op, "stride", s, 1);
  check_at_least(op, "padding", p, 0);
  check_at_least(op, "dilation", d, 1);
  check_at_least(op, "output_padding", op_, 0);
  for (size_t i = 0; i < s.size(); ++i)
    require(op_[i] < s[i] || op_[i] < d[i],
            fmt::format("{}: output_padding {}: expected each below the stride {} or the dilation {}", op,
                        tuple_text(op_), tuple_text(s), tuple_text(d)));
}

std::vector<int64_t> transposed_sizes(const std::string& op, const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& kernel, const std::vector<int64_t>& s,
                                      const std::vector<int64_t>& p, const std::vector<int64_t>& op_,
                                      const std::vector<int64_t>& d) {
  check_transposed(op, s, p, op_, d);
  check_spatial(op, in);
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    out.push_back((in[i] - 1) * s[i] - 2 * p[i] + d[i] * (kernel[i] - 1) + op_[i] + 1);
  }
  for (int64_t n : out)
    if (n < 1)
      throw ShapeError(fmt::format("{}: the output size {} is below 1 (padding {} too large for the input {})", op,
                                   sizes_text(out), tuple_text(p), sizes_text(in)));
  return out;
}

std::vector<WindowAxis> window_axes(const std::string& op, const std::vector<int64_t>& spatial, const WindowSpec& s) {
  const size_t D = spatial.size();
  check_spatial(op, spatial);
  check_at_least(op, "kernel_size", s.kernel, 1);
  check_at_least(op, "stride", s.stride, 1);
  check_at_least(op, "padding", s.padding, 0);
  check_at_least(op, "dilation", s.dilation, 1);
  std::vector<int64_t> half;
  for (int64_t k : s.kernel) half.push_back(k / 2);
  for (size_t i = 0; s.pooling && i < D; ++i)
    require(s.padding[i] <= half[i], fmt::format("{}: padding {}: expected each from 0 to half the kernel {}", op,
                                                 tuple_text(s.padding), tuple_text(half)));
  std::vector<WindowAxis> axes(D);
  std::vector<int64_t> padded(D), spans(D);
  bool fits = true;
  for (size_t i = 0; i < D; ++i) {
    WindowAxis& a = axes[i];
    a = {spatial[i], 0, s.kernel[i], s.stride[i], s.padding[i], s.pad_after.empty() ? s.padding[i] : s.pad_after[i],
         s.dilation[i]};
    padded[i] = a.in + a.pad_before + a.pad_after, spans[i] = a.span();
    a.out = floor_div(padded[i] - a.span() + (s.ceil_mode ? a.stride - 1 : 0), a.stride) + 1;
    // With ceil_mode, a last window must start inside the input or its left padding.
    if (s.ceil_mode && (a.out - 1) * a.stride >= a.in + a.pad_before) --a.out;
    fits = fits && a.out >= 1;  // with ceil_mode a window may overhang a small input, as in PyTorch
  }
  if (!fits) {
    bool dilated = false;
    for (int64_t d : s.dilation) dilated = dilated || d > 1;
    throw ShapeError(fmt::format("{}: the padded input {} is smaller than the {}kernel {}", op, sizes_text(padded),
                                 dilated ? "dilated " : "", sizes_text(spans)));
  }
  return axes;
}

}  // namespace detail

}  // namespace xg
