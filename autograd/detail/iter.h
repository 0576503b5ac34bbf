// Private to autograd/*.cpp: broadcasting and strided iteration over
// contiguous buffers, without recursion or per-element index arithmetic.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg::detail {

// NumPy broadcasting of two shapes; throws "op: cannot broadcast (2,3) with (4,)".
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": cannot broadcast " + shape_str(a) + " with " + shape_str(b) +
                       ": dimension " + std::to_string(i) + " is " + std::to_string(da) + " vs " + std::to_string(db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `in` (contiguous) seen through the broadcast shape `out`: 0 on
// broadcast dimensions and on dimensions `in` lacks.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t acc = 1;
  for (size_t k = in.size(); k-- > 0;) {
    size_t o = k + (out.size() - in.size());
    st[o] = in[k] == 1 ? 0 : acc;
    acc *= in[k];
  }
  return st;
}

// Calls f(out_offset, offsets...) for every element of `shape` in row-major
// order, with one offset per stride vector. The innermost loop is a plain loop.
template <size_t N, class F>
void for_each_strided(const Shape& shape, const std::array<const std::vector<int64_t>*, N>& strides, F&& f) {
  const size_t nd = shape.size();
  int64_t total = shape_numel(shape);
  if (total == 0) return;
  if (nd == 0) {
    std::array<int64_t, N> z{};
    f(int64_t{0}, z);
    return;
  }
  const int64_t last = shape[nd - 1];
  std::array<int64_t, N> inner{};
  for (size_t s = 0; s < N; ++s) inner[s] = (*strides[s])[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> base{};
  for (int64_t o = 0; o < total; o += last) {
    std::array<int64_t, N> off = base;
    for (int64_t j = 0; j < last; ++j) {
      f(o + j, off);
      for (size_t s = 0; s < N; ++s) off[s] += inner[s];
    }
    for (size_t k = nd - 1; k-- > 0;) {  // odometer over the outer dimensions
      ++idx[k];
      for (size_t s = 0; s < N; ++s) base[s] += (*strides[s])[k];
      if (idx[k] < shape[k]) break;
      for (size_t s = 0; s < N; ++s) base[s] -= (*strides[s])[k] * shape[k];
      idx[k] = 0;
    }
  }
}

}  // namespace xg::detail
