// PyTorch's keyword arguments of a window (convolution, pooling,
// unpooling) as xgrad's options structs: what both tables (table_ops.cpp,
// table_modules.cpp) read, written once.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/window.h"

namespace xg::optable {

using json = nlohmann::json;

// Whether `key` is given and not None.
inline bool given(const json& k, const char* key) { return k.contains(key) && !k.at(key).is_null(); }
// A window size of D axes given as one int or D of them; absent: `fallback` on every axis.
template <size_t D>
ExpandingArray<D> size(const json& k, const char* key, int64_t fallback) {
  if (!given(k, key)) return fallback;
  const json& j = k.at(key);
  const auto v = j.is_array() ? j.get<std::vector<int64_t>>() : std::vector<int64_t>{j.get<int64_t>()};
  if (v.size() == 1) return v[0];
  std::array<int64_t, D> a{};
  for (size_t i = 0; i < D; ++i) a[i] = v.at(i);
  return a;
}

// PyTorch's keyword arguments as each options struct (stride=None: the kernel, the default).
template <size_t D>
MaxPoolOptions<D> max_pool_options(const json& k) {
  MaxPoolOptions<D> o(size<D>(k, "kernel_size", 1));
  if (given(k, "stride")) o.stride(size<D>(k, "stride", 1));
  return o.padding(size<D>(k, "padding", 0)).dilation(size<D>(k, "dilation", 1)).ceil_mode(k.value("ceil_mode", false));
}
template <size_t D>
AvgPoolOptions<D> avg_pool_options(const json& k) {
  AvgPoolOptions<D> o(size<D>(k, "kernel_size", 1));
  if (given(k, "stride")) o.stride(size<D>(k, "stride", 1));
  if (given(k, "divisor_override")) o.divisor_override(k.at("divisor_override").get<int64_t>());
  return o.padding(size<D>(k, "padding", 0))
      .ceil_mode(k.value("ceil_mode", false))
      .count_include_pad(k.value("count_include_pad", true));
}
template <size_t D>
LPPoolOptions<D> lp_pool_options(const json& k) {
  LPPoolOptions<D> o(k.value("norm_type", 2.0), size<D>(k, "kernel_size", 1));
  if (given(k, "stride")) o.stride(size<D>(k, "stride", 1));
  return o.ceil_mode(k.value("ceil_mode", false));
}
template <size_t D>
MaxUnpoolOptions<D> unpool_options(const json& k) {
  MaxUnpoolOptions<D> o(size<D>(k, "kernel_size", 1));
  if (given(k, "stride")) o.stride(size<D>(k, "stride", 1));
  return o.padding(size<D>(k, "padding", 0));
}
// conv1d/2d/3d's (padding as sizes, "same" or "valid").
template <size_t D>
ConvFuncOptions<D> conv_func_options(const json& k) {
  auto o = ConvFuncOptions<D>().stride(size<D>(k, "stride", 1)).dilation(size<D>(k, "dilation", 1));
  o.groups(k.value("groups", int64_t{1}));
  if (given(k, "padding") && k.at("padding").is_string()) return o.padding(k.at("padding").get<std::string>().c_str());
  return o.padding(size<D>(k, "padding", 0).values());
}
// conv_transpose1d/2d/3d's.
template <size_t D>
ConvTransposeFuncOptions<D> conv_transpose_func_options(const json& k) {
  return ConvTransposeFuncOptions<D>()
      .stride(size<D>(k, "stride", 1))
      .padding(size<D>(k, "padding", 0))
      .output_padding(size<D>(k, "output_padding", 0))
      .groups(k.value("groups", int64_t{1}))
      .dilation(size<D>(k, "dilation", 1));
}
// unfold's and fold's window (their kernel_size and fold's output_size given to the constructor).
// fractional_max_poolNd's options from PyTorch's keywords, the samples given.
template <size_t D>
FractionalMaxPoolOptions<D> fractional_options(const json& k, const Tensor& samples) {
  auto o = FractionalMaxPoolOptions<D>(size<D>(k, "kernel_size", 1))._random_samples(samples);
  if (given(k, "output_size")) return o.output_size(size<D>(k, "output_size", 1));
  std::array<double, D> ratio{};
  for (size_t a = 0; a < D; ++a) ratio[a] = k.at("output_ratio").at(a).get<double>();
  return o.output_ratio(ratio);
}
template <class Options>
Options window(Options o, const json& k) {
  return o.dilation(size<2>(k, "dilation", 1)).padding(size<2>(k, "padding", 0)).stride(size<2>(k, "stride", 1));
}

}  // namespace xg::optable
