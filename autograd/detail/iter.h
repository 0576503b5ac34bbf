// Private to autograd/*.cpp: broadcasting and strided iteration over
// contiguous buffers, without recursion or per-element index arithmetic.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "autograd/parallel.h"
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

// Calls f(out_offset, offsets...) for the elements [begin, end) of `shape` in
// row-major order, with one offset per stride vector. The innermost loop is a
// plain loop.
template <size_t N, class F>
void for_each_strided(const Shape& shape, const std::array<const std::vector<int64_t>*, N>& strides, int64_t begin,
                      int64_t end, F&& f) {
  const size_t nd = shape.size();
  if (begin >= end) return;
  if (nd == 0) {
    std::array<int64_t, N> z{};
    f(int64_t{0}, z);
    return;
  }
  const int64_t last = shape[nd - 1];
  if (last == 0) return;
  std::array<int64_t, N> inner{};
  for (size_t s = 0; s < N; ++s) inner[s] = (*strides[s])[nd - 1];
  // Unravel the row of `begin` into the odometer.
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> base{};
  int64_t row = begin / last, j0 = begin % last;
  for (size_t k = nd - 1; k-- > 0;) {
    idx[k] = row % shape[k];
    row /= shape[k];
    for (size_t s = 0; s < N; ++s) base[s] += idx[k] * (*strides[s])[k];
  }
  for (int64_t o = begin - j0; o < end; o += last, j0 = 0) {
    std::array<int64_t, N> off = base;
    for (size_t s = 0; s < N; ++s) off[s] += j0 * inner[s];
    const int64_t jend = std::min(last, end - o);
    for (int64_t j = j0; j < jend; ++j) {
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

// The same over every element.
template <size_t N, class F>
void for_each_strided(const Shape& shape, const std::array<const std::vector<int64_t>*, N>& strides, F&& f) {
  for_each_strided<N>(shape, strides, 0, shape_numel(shape), std::forward<F>(f));
}

// The same split across the thread pool; f must only write at out_offset.
// `cost` is the scalar work per element, as in parallel_for.
template <size_t N, class F>
void parallel_for_each_strided(const Shape& shape, const std::array<const std::vector<int64_t>*, N>& strides,
                               int64_t cost, F&& f) {
  parallel_for(shape_numel(shape), cost,
               [&](int64_t begin, int64_t end) { for_each_strided<N>(shape, strides, begin, end, f); });
}

// out[j] += sum over rows r of row r's j-th term, j < cols: add_row(r, acc)
// adds row r's terms into acc[0..cols). Each thread sums a block of rows
// (the same blocks the row-wise kernels use, so it reads what it wrote) into
// its own partial row; the partials are then added in order. Splitting by
// columns instead is slower (docs/performance.md, section Threads).
// add_row runs once per row, rows of different blocks at the same time, and
// may also write that row's own outputs (layer norm's input gradient);
// row_cost is its scalar work (default cols), which decides the split.
template <class T, class F>
void row_sums(int64_t rows, int64_t cols, T* out, F add_row, int64_t row_cost = 0) {
  const int64_t work = rows * std::max(cols, row_cost);
  const int64_t parts = work < 32768 ? 1 : std::min<int64_t>(num_threads(), rows);
  std::vector<T> partial(static_cast<size_t>(parts * cols), T(0));
  T* pp = partial.data();
  parallel_for(parts, work / std::max<int64_t>(parts, 1) * 2, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t r = rows * i / parts, r1 = rows * (i + 1) / parts; r < r1; ++r) add_row(r, pp + i * cols);
  });
  for (int64_t i = 0; i < parts; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j] += pp[i * cols + j];
}

// out[j] += sum over rows r of term(r, j), j < cols (row_sums' blocks and order).
template <class T, class F>
void column_sums(int64_t rows, int64_t cols, T* out, F term) {
  row_sums<T>(rows, cols, out, [&](int64_t r, T* acc) {
    for (int64_t j = 0; j < cols; ++j) acc[j] += term(r, j);
  });
}

}  // namespace xg::detail
