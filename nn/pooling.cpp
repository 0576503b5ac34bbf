#include "nn/pooling.h"

#include <fmt/format.h>

#include "autograd/detail/window.h"
#include "autograd/require.h"

namespace xg::nn {

namespace {

// A size as PyTorch's repr prints one given as an int or a tuple: one
// value when every axis has it, else the tuple.
template <size_t D>
std::string repr(const ExpandingArray<D>& a) {
  return a == ExpandingArray<D>(a[0]) ? std::to_string(a[0]) : window_text(a);
}

const char* python_bool(bool b) { return b ? "True" : "False"; }

}  // namespace

template <size_t D>
MaxPoolNd<D>::MaxPoolNd(const MaxPoolOptions<D>& options) : options_(options) {}

template <size_t D>
std::string MaxPoolNd<D>::type_name() const {
  const MaxPoolOptions<D>& o = options_;
  return fmt::format("MaxPool{}d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})", D,
                     repr(o.kernel_size()), repr(o.stride()), repr(o.padding()), repr(o.dilation()),
                     python_bool(o.ceil_mode()));
}

template <size_t D>
Tensor MaxPoolNd<D>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, -1, batch_layout(D));
  if constexpr (D == 1) return max_pool1d(x, options_);
  if constexpr (D == 2) return max_pool2d(x, options_);
  if constexpr (D == 3) return max_pool3d(x, options_);
}

template <size_t D>
AvgPoolNd<D>::AvgPoolNd(const AvgPoolOptions<D>& options) : options_(options) {}

template <size_t D>
std::string AvgPoolNd<D>::type_name() const {
  const AvgPoolOptions<D>& o = options_;
  std::string s = fmt::format("AvgPool{}d(kernel_size={}, stride={}, padding={}", D, repr(o.kernel_size()),
                              repr(o.stride()), repr(o.padding()));
  if (o.ceil_mode()) s += ", ceil_mode=True";
  if (!o.count_include_pad()) s += ", count_include_pad=False";
  if (o.divisor_override()) s += fmt::format(", divisor_override={}", *o.divisor_override());
  return s + ")";
}

template <size_t D>
Tensor AvgPoolNd<D>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, -1, batch_layout(D));
  if constexpr (D == 1) return avg_pool1d(x, options_);
  if constexpr (D == 2) return avg_pool2d(x, options_);
  if constexpr (D == 3) return avg_pool3d(x, options_);
}

template <size_t D>
LPPoolNd<D>::LPPoolNd(const LPPoolOptions<D>& options) : options_(options) {
  require(options.norm_type() > 0, fmt::format("LPPool{}d: norm_type {}: expected > 0", D, options.norm_type()));
}

template <size_t D>
std::string LPPoolNd<D>::type_name() const {
  const LPPoolOptions<D>& o = options_;
  return fmt::format("LPPool{}d(norm_type={:g}, kernel_size={}, stride={}, ceil_mode={})", D, o.norm_type(),
                     repr(o.kernel_size()), repr(o.stride()), python_bool(o.ceil_mode()));
}

template <size_t D>
Tensor LPPoolNd<D>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, -1, batch_layout(D));
  if constexpr (D == 1) return lp_pool1d(x, options_);
  if constexpr (D == 2) return lp_pool2d(x, options_);
}

template <size_t D, bool Max>
AdaptivePoolNd<D, Max>::AdaptivePoolNd(ExpandingArray<D> output_size) : output_size_(output_size) {
  detail::check_at_least(fmt::format("Adaptive{}Pool{}d", Max ? "Max" : "Avg", D), "output_size",
                         detail::values(output_size), 1);
}

template <size_t D, bool Max>
std::string AdaptivePoolNd<D, Max>::type_name() const {
  return fmt::format("Adaptive{}Pool{}d(output_size={})", Max ? "Max" : "Avg", D,
                     D == 1 ? std::to_string(output_size_[0]) : window_text(output_size_));
}

template <size_t D, bool Max>
Tensor AdaptivePoolNd<D, Max>::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, -1, batch_layout(D));
  if constexpr (D == 1) return Max ? adaptive_max_pool1d(x, output_size_[0]) : adaptive_avg_pool1d(x, output_size_[0]);
  if constexpr (D == 2) return Max ? adaptive_max_pool2d(x, output_size_) : adaptive_avg_pool2d(x, output_size_);
  if constexpr (D == 3) return Max ? adaptive_max_pool3d(x, output_size_) : adaptive_avg_pool3d(x, output_size_);
}

template <size_t D>
MaxUnpoolNd<D>::MaxUnpoolNd(const MaxUnpoolOptions<D>& o) : options_(o) {
  const std::string name = fmt::format("MaxUnpool{}d", D);
  detail::check_at_least(name, "kernel_size", detail::values(o.kernel_size()), 1);
  detail::check_at_least(name, "stride", detail::values(o.stride()), 1);
  detail::check_at_least(name, "padding", detail::values(o.padding()), 0);
}

template <size_t D>
Tensor MaxUnpoolNd<D>::forward(const Tensor& x, const Tensor& indices, const Shape& output_size) {
  const auto named = scope();
  require_input(x, {static_cast<int64_t>(D) + 2}, -1, batch_layout(D));
  Shape out = output_size;
  const MaxUnpoolOptions<D>& o = options_;
  if (out.empty())
    for (size_t i = 0; i < D; ++i)
      out.push_back((x.size(2 + i) - 1) * o.stride()[i] - 2 * o.padding()[i] + o.kernel_size()[i]);
  return max_unpool(x, indices, out);
}

template <size_t D>
std::string MaxUnpoolNd<D>::type_name() const {
  const MaxUnpoolOptions<D>& o = options_;
  return fmt::format("MaxUnpool{}d(kernel_size={}, stride={}, padding={})", D, tuple_repr(o.kernel_size()),
                     tuple_repr(o.stride()), tuple_repr(o.padding()));
}

template <size_t D>
MaxPool2dResult FractionalMaxPoolNd<D>::forward_with_indices(const Tensor& x) {
  const auto named = scope();
  if constexpr (D == 2)
    return fractional_max_pool2d_with_indices(x, options_, gen_.get());
  else
    return fractional_max_pool3d_with_indices(x, options_, gen_.get());
}
template <size_t D>
std::string FractionalMaxPoolNd<D>::type_name() const {
  return "FractionalMaxPool" + std::to_string(D) + "d()";
}

template class FractionalMaxPoolNd<2>;
template class FractionalMaxPoolNd<3>;
template class MaxPoolNd<1>;
template class MaxPoolNd<2>;
template class MaxPoolNd<3>;
template class AvgPoolNd<1>;
template class AvgPoolNd<2>;
template class AvgPoolNd<3>;
template class LPPoolNd<1>;
template class LPPoolNd<2>;
template class AdaptivePoolNd<1, false>;
template class AdaptivePoolNd<2, false>;
template class AdaptivePoolNd<3, false>;
template class AdaptivePoolNd<1, true>;
template class AdaptivePoolNd<2, true>;
template class AdaptivePoolNd<3, true>;
template class MaxUnpoolNd<1>;
template class MaxUnpoolNd<2>;
template class MaxUnpoolNd<3>;

}  // namespace xg::nn
