#include "nn/conv.h"

#include <cmath>

#include <fmt/format.h>

#include "autograd/detail/window.h"
#include "autograd/require.h"
#include "nn/init.h"

namespace xg::nn {

namespace {

// The checks every convolution layer makes of its sizes, before it
// allocates: channels and kernel at least 1, groups dividing both channels.
template <size_t D>
void check_sizes(const std::string& layer, int64_t in, int64_t out, const ExpandingArray<D>& kernel, int64_t groups) {
  detail::check_at_least(layer, "in_channels", {in}, 1);
  detail::check_at_least(layer, "out_channels", {out}, 1);
  detail::check_at_least(layer, "kernel_size", detail::values(kernel), 1);
  require(groups >= 1 && in % groups == 0 && out % groups == 0,
          fmt::format("{}: groups {}: expected at least 1 and dividing in_channels {} and out_channels {}", layer,
                      groups, in, out));
}

// PyTorch's default for every convolution: weight and bias U(-b, b), b =
// 1/sqrt(fan_in) (kaiming_uniform_ with a = sqrt(5) comes to the same bound).
void init_uniform(Tensor& weight, Tensor& bias, int64_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  uniform_(weight, gen, -bound, bound);
  if (bias.defined()) uniform_(bias, gen, -bound, bound);
}

// The layer's weight (a, b, *kernel), its parameter, and the fan-in b prod(kernel).
template <size_t D>
Tensor& make_weight(Module& m, Tensor& weight, int64_t a, int64_t b, const ExpandingArray<D>& kernel,
                    int64_t& fan_in) {
  Shape shape{a, b};
  fan_in = b;
  for (size_t i = 0; i < D; ++i) shape.push_back(kernel[i]), fan_in *= kernel[i];
  return weight = m.register_parameter("weight", empty(shape));
}

template <size_t D>
Tensor convolve(const Tensor& x, const Tensor& w, const Tensor& b, const ConvFuncOptions<D>& o) {
  if constexpr (D == 1) return conv1d(x, w, b, o);
  if constexpr (D == 2) return conv2d(x, w, b, o);
  if constexpr (D == 3) return conv3d(x, w, b, o);
}

}  // namespace

template <size_t D>
ConvNd<D>::ConvNd(const ConvOptions<D>& o, Generator& gen) : options_(o) {
  const std::string name = fmt::format("Conv{}d", D);
  check_sizes(name, o.in_channels(), o.out_channels(), o.kernel_size(), o.groups());
  const std::string& mode = o.padding_mode();
  require(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular",
          fmt::format("{}: padding_mode '{}': expected zeros, reflect, replicate or circular", name, mode));
  // The window's options, checked now rather than at the first forward.
  detail::check_at_least(name, "stride", detail::values(o.stride()), 1);
  detail::check_at_least(name, "padding", detail::values(o.padding().size()), 0);
  detail::check_at_least(name, "dilation", detail::values(o.dilation()), 1);
  detail::conv_spec(name, detail::values(o.kernel_size()), detail::values(o.stride()),
                    detail::values(o.padding().size()), o.padding().same(), detail::values(o.dilation()));
  int64_t fan_in = 0;
  make_weight(*this, weight_, o.out_channels(), o.in_channels() / o.groups(), o.kernel_size(), fan_in);
  if (o.bias()) bias_ = register_parameter("bias", empty({o.out_channels()}));
  init_uniform(weight_, bias_, fan_in, gen);
}

template <size_t D>
std::string ConvNd<D>::type_name() const {
  const ConvOptions<D>& o = options_;
  std::string s = fmt::format("Conv{}d({}, {}, kernel_size={}, stride={}", D, o.in_channels(), o.out_channels(),
                              tuple_repr(o.kernel_size()), tuple_repr(o.stride()));
  if (o.padding().same()) s += ", padding=same";
  else if (o.padding().size() != ExpandingArray<D>(0)) s += ", padding=" + tuple_repr(o.padding().size());
  if (o.dilation() != ExpandingArray<D>(1)) s += ", dilation=" + tuple_repr(o.dilation());
  if (o.groups() != 1) s += fmt::format(", groups={}", o.groups());
  if (!o.bias()) s += ", bias=False";
  if (o.padding_mode() != "zeros") s += ", padding_mode=" + o.padding_mode();
  return s + ")";
}

template <size_t D>
Tensor ConvNd<D>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, options_.in_channels(), batch_layout(D));
  const ConvOptions<D>& o = options_;
  auto f = ConvFuncOptions<D>().stride(o.stride()).padding(o.padding()).dilation(o.dilation()).groups(o.groups());
  if (o.padding_mode() == "zeros") return convolve(x, weight_, bias_, f);
  // PyTorch's other modes: the input padded in that mode (the last axis's
  // pair first), then a convolution with none.
  const std::vector<int64_t> spatial(x.shape().end() - D, x.shape().end());
  const std::vector<int64_t> kernel(weight_.shape().end() - D, weight_.shape().end());
  const auto axes = detail::window_axes(describe(), spatial, detail::spec_of(describe(), f, kernel));
  std::vector<int64_t> pads;
  for (size_t i = D; i-- > 0;) pads.push_back(axes[i].pad_before), pads.push_back(axes[i].pad_after);
  return convolve(pad(x, pads, o.padding_mode()), weight_, bias_, f.padding(0));
}

template <size_t D>
ConvTransposeNd<D>::ConvTransposeNd(const ConvTransposeOptions<D>& o, Generator& gen) : options_(o) {
  const std::string name = fmt::format("ConvTranspose{}d", D);
  check_sizes(name, o.in_channels(), o.out_channels(), o.kernel_size(), o.groups());
  // The window's options, checked now (as ConvNd's) rather than at the first forward.
  detail::check_transposed(name, detail::values(o.stride()), detail::values(o.padding()),
                           detail::values(o.output_padding()), detail::values(o.dilation()));
  int64_t fan_in = 0;
  make_weight(*this, weight_, o.in_channels(), o.out_channels() / o.groups(), o.kernel_size(), fan_in);
  if (o.bias()) bias_ = register_parameter("bias", empty({o.out_channels()}));
  init_uniform(weight_, bias_, fan_in, gen);
}

template <size_t D>
std::string ConvTransposeNd<D>::type_name() const {
  const ConvTransposeOptions<D>& o = options_;
  std::string s = fmt::format("ConvTranspose{}d({}, {}, kernel_size={}, stride={}", D, o.in_channels(),
                              o.out_channels(), tuple_repr(o.kernel_size()), tuple_repr(o.stride()));
  if (o.padding() != ExpandingArray<D>(0)) s += ", padding=" + tuple_repr(o.padding());
  if (o.output_padding() != ExpandingArray<D>(0)) s += ", output_padding=" + tuple_repr(o.output_padding());
  if (o.dilation() != ExpandingArray<D>(1)) s += ", dilation=" + tuple_repr(o.dilation());
  if (o.groups() != 1) s += fmt::format(", groups={}", o.groups());
  return s + (o.bias() ? ")" : ", bias=False)");
}

template <size_t D>
Tensor ConvTransposeNd<D>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, options_.in_channels(), batch_layout(D));
  const ConvTransposeOptions<D>& o = options_;
  const auto f = ConvTransposeFuncOptions<D>()
                     .stride(o.stride())
                     .padding(o.padding())
                     .output_padding(o.output_padding())
                     .groups(o.groups())
                     .dilation(o.dilation());
  if constexpr (D == 1) return conv_transpose1d(x, weight_, bias_, f);
  if constexpr (D == 2) return conv_transpose2d(x, weight_, bias_, f);
  if constexpr (D == 3) return conv_transpose3d(x, weight_, bias_, f);
}

template class ConvNd<1>;
template class ConvNd<2>;
template class ConvNd<3>;
template class ConvTransposeNd<1>;
template class ConvTransposeNd<2>;
template class ConvTransposeNd<3>;

}  // namespace xg::nn
