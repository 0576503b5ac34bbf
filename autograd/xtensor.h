// Zero-copy bridges between xg::Tensor and xtensor, both ways. A heavy header
// (it includes xtensor): include it only in the files that need it, and link
// xtensor (CMake: target xtensor).
//
//   xg::Tensor t = xg::randn({2, 3}, gen);
//   auto view = xg::as_xtensor<float>(t);        // xt adaptor over t's storage
//   view(1, 2) = 5.0f; t.bump_version();          // writes go to the tensor
//   xt::xarray<double> a = xt::linspace<double>(0, 1, 6);
//   a.reshape({2, 3});
//   xg::Tensor u = xg::from_xtensor(std::move(a));  // takes a's storage, no copy
#pragma once

#include <memory>
#include <type_traits>
#include <vector>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "autograd/tensor.h"

namespace xg {

namespace detail {
template <class T>
constexpr Dtype dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "xgrad tensors hold float or double");
  return std::is_same_v<T, float> ? Dtype::f32 : Dtype::f64;
}
}  // namespace detail

// An xtensor view of t's values (row-major, t's shape), sharing its storage:
// writes through it change the tensor. T must match t.dtype() (ShapeError
// otherwise). Writes bypass the version counter: call t.bump_version() after
// writing to a tensor that an op may have saved for backward. The view is
// valid while t's storage lives (any tensor sharing it keeps it alive).
template <class T>
auto as_xtensor(Tensor& t) {
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data<T>(), static_cast<size_t>(t.numel()), xt::no_ownership(), shape);
}
template <class T>
auto as_xtensor(const Tensor& t) {
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return xt::adapt(t.data<T>(), static_cast<size_t>(t.numel()), xt::no_ownership(), shape);
}

// A tensor over the storage of an xt::xarray or xt::xtensor of float or
// double. Passed as an rvalue (std::move), the array's buffer is taken over
// with no copy and freed with the last tensor that shares it; an lvalue is
// copied once. A column-major array is copied into row-major order.
template <class E>
Tensor from_xtensor(E&& a) {
  using A = std::decay_t<E>;
  using T = typename A::value_type;
  constexpr Dtype d = detail::dtype_of<T>();
  if (a.layout() != xt::layout_type::row_major) {
    auto owner = std::make_shared<xt::xarray<T, xt::layout_type::row_major>>(a);
    return from_blob(owner->data(), Shape(owner->shape().begin(), owner->shape().end()), d, owner);
  }
  auto owner = std::make_shared<A>(std::forward<E>(a));
  return from_blob(owner->data(), Shape(owner->shape().begin(), owner->shape().end()), d, owner);
}

}  // namespace xg
