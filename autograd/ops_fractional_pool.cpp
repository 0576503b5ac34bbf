// Fractional max pooling (fractional_max_pool2d/3d): the windows are placed
// on the host from the samples, each window's arg-max found there, and the
// values taken with one index_select, whose gradient (a scatter to the
// arg-max) is itself differentiable.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/detail/window.h"
#include "autograd/ops.h"

namespace xg {

namespace {

// PyTorch's generate_intervals: the start of each of `out` windows of
// `pool` over `in`, computed in the input's precision S as PyTorch does.
template <class S>
std::vector<int64_t> intervals(S sample, int64_t in, int64_t out, int64_t pool) {
  std::vector<int64_t> start(static_cast<size_t>(out));
  if (out > 1) {
    const S alpha = static_cast<S>(in - pool) / static_cast<S>(out - 1);
    for (int64_t i = 0; i < out - 1; ++i)
      start[i] = static_cast<int64_t>((static_cast<S>(i) + sample) * alpha) - static_cast<int64_t>(sample * alpha);
  }
  if (out > 0) start[out - 1] = in - pool;
  return start;
}

// The output's size per spatial axis, checked, from output_size or output_ratio.
template <size_t D>
std::array<int64_t, D> output_sizes(const char* op, const Shape& in, const FractionalMaxPoolOptions<D>& o) {
  if (o.has_output_size() == o.has_output_ratio())
    throw std::invalid_argument(fmt::format("{}: give exactly one of output_size and output_ratio", op));
  std::array<int64_t, D> out{};
  for (size_t a = 0; a < D; ++a) {
    const int64_t size = in[in.size() - D + a], k = o.kernel_size()[a];
    if (o.has_output_ratio()) {
      const double r = o.output_ratio()[a];
      if (!(r > 0 && r < 1)) throw std::invalid_argument(fmt::format("{}: output_ratio {}: expected in (0, 1)", op, r));
      out[a] = static_cast<int64_t>(static_cast<double>(size) * r);
    } else {
      out[a] = o.output_size()[a];
    }
    if (k < 1) throw std::invalid_argument(fmt::format("{}: kernel_size {}: expected at least 1", op, k));
    if (out[a] < 1 || out[a] + k - 1 > size)
      throw ShapeError(fmt::format("{}: output size {} with kernel {} on axis {} of input {}: expected 1 to {}", op,
                                   out[a], k, a, shape_str(in), size - k + 1));
  }
  return out;
}

// The samples that place the windows: the options' (checked), or drawn.
template <size_t D, class S>
std::vector<double> samples(const char* op, const FractionalMaxPoolOptions<D>& o, int64_t N, int64_t C,
                            Generator* gen) {
  const Shape shape{N, C, static_cast<int64_t>(D)};
  const Tensor& given = o._random_samples();
  if (given.defined()) {
    if (given.shape() != shape || given.dtype() == Dtype::i64)
      throw ShapeError(fmt::format("{}: _random_samples {} {}: expected {} floats", op, dtype_name(given.dtype()),
                                   shape_str(given.shape()), shape_str(shape)));
    return given.to_vector();
  }
  Generator& g = generator_or_default(gen);
  std::vector<double> u(static_cast<size_t>(N * C * static_cast<int64_t>(D)));
  for (double& x : u) x = static_cast<S>(g.uniform());
  return u;
}

// One plane's windows, in the output's row-major order: the position of
// each one's maximum in the plane (the first on ties, a NaN wins as in PyTorch).
template <size_t D, class S>
void plane_argmax(const double* v, const double* u, const std::array<int64_t, D>& size,
                  const std::array<int64_t, D>& out, const ExpandingArray<D>& k, std::vector<int64_t>& best_of) {
  std::array<std::vector<int64_t>, D> starts;
  std::array<int64_t, D> stride{};
  int64_t cells = 1, window = 1;
  for (size_t a = D, step = 1; a-- > 0;) stride[a] = static_cast<int64_t>(step), step *= size[a];
  for (size_t a = 0; a < D; ++a) {
    const size_t which = D == 2 ? 1 - a : a;  // PyTorch's sample order: 2-D (w, h), 3-D (t, h, w)
    starts[a] = intervals<S>(static_cast<S>(u[which]), size[a], out[a], k[a]);
    cells *= out[a], window *= k[a];
  }
  for (int64_t cell = 0; cell < cells; ++cell) {
    int64_t corner = 0, best = -1;
    for (int64_t rest = cell, a = D - 1; a >= 0; --a) corner += starts[a][rest % out[a]] * stride[a], rest /= out[a];
    for (int64_t tap = 0; tap < window; ++tap) {
      int64_t at = corner;
      for (int64_t rest = tap, a = D - 1; a >= 0; --a) at += rest % k[a] * stride[a], rest /= k[a];
      if (best < 0 || v[at] > v[best] || std::isnan(v[at])) best = at;
    }
    best_of.push_back(best);
  }
}

template <size_t D, class S>
MaxPool2dResult fractional_pool(const char* op, const Tensor& x, const FractionalMaxPoolOptions<D>& o, Generator* gen) {
  check_defined(x, op);
  if (x.dim() != static_cast<int64_t>(D) + 1 && x.dim() != static_cast<int64_t>(D) + 2)
    throw ShapeError(fmt::format("{}: expected an input of {} or {} dimensions, got {}", op, D + 1, D + 2,
                                 shape_str(x.shape())));
  const Shape& in = x.shape();
  detail::check_spatial(op, std::vector<int64_t>(in.end() - D, in.end()));
  const int64_t N = x.dim() == static_cast<int64_t>(D) + 2 ? in[0] : 1, C = in[in.size() - D - 1];
  if (C < 1) throw ShapeError(fmt::format("{}: input {} has no channels: only the batch may be empty", op, shape_str(in)));
  const std::array<int64_t, D> out = output_sizes<D>(op, in, o);
  const std::vector<double> u = samples<D, S>(op, o, N, C, gen);
  std::array<int64_t, D> size{};
  int64_t plane = 1;
  for (size_t a = 0; a < D; ++a) size[a] = in[in.size() - D + a], plane *= size[a];
  const std::vector<double> v = x.to_vector();
  std::vector<int64_t> local, global;
  for (int64_t p = 0; p < N * C; ++p) plane_argmax<D, S>(&v[p * plane], &u[p * D], size, out, o.kernel_size(), local);
  const int64_t cells = N == 0 ? 0 : static_cast<int64_t>(local.size()) / (N * C);
  for (size_t i = 0; i < local.size(); ++i) global.push_back(static_cast<int64_t>(i) / cells * plane + local[i]);
  Shape shape(in.begin(), in.end() - D);
  shape.insert(shape.end(), out.begin(), out.end());
  Tensor values = reshape(index_select(reshape(x, {-1}), 0, from_ints(global, {N * C * cells})), shape);
  // traced under its own name, which has no ONNX mapping: export refuses it by name
  values = detail::traced(values, [&](TracedOp& t) { t = TracedOp{op, t.scope, {x}, values, attr::None{}, {}}; });
  return {values, from_ints(local, shape)};
}

template <size_t D>
MaxPool2dResult fractional(const char* op, const Tensor& x, const FractionalMaxPoolOptions<D>& o, Generator* gen) {
  if (x.defined() && x.dtype() == Dtype::f32) return fractional_pool<D, float>(op, x, o, gen);
  return fractional_pool<D, double>(op, x, o, gen);
}

}  // namespace

Tensor fractional_max_pool2d(const Tensor& x, const FractionalMaxPool2dOptions& o, Generator* gen) {
  return fractional<2>("fractional_max_pool2d", x, o, gen).values;
}
MaxPool2dResult fractional_max_pool2d_with_indices(const Tensor& x, const FractionalMaxPool2dOptions& o,
                                                   Generator* gen) {
  return fractional<2>("fractional_max_pool2d", x, o, gen);
}
Tensor fractional_max_pool3d(const Tensor& x, const FractionalMaxPool3dOptions& o, Generator* gen) {
  return fractional<3>("fractional_max_pool3d", x, o, gen).values;
}
MaxPool2dResult fractional_max_pool3d_with_indices(const Tensor& x, const FractionalMaxPool3dOptions& o,
                                                   Generator* gen) {
  return fractional<3>("fractional_max_pool3d", x, o, gen);
}

}  // namespace xg
