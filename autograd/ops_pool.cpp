// Pooling over (N,C,H,W) images, as torch.nn.functional writes it. max_pool2d
// keeps each window's arg-max and sends the gradient there with put_add,
// whose backward (take) is exact, so every order follows. avg_pool2d and
// adaptive_avg_pool2d are one linear map (each output averages a rectangle
// of its plane); it and its adjoint record each other as backward, as
// unfold2d and fold2d do.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/detail/window.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/require.h"

namespace xg {

namespace {

using PoolAxis = detail::WindowAxis;

// The two axes of a pooling window over (N,C,H,W), checked (detail::window_axes).
std::array<PoolAxis, 2> pool_axes(const char* op, const Shape& x, const detail::WindowSpec& s) {
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected an (N,C,H,W) input, got " + shape_str(x));
  const auto a = detail::window_axes(op, {x[2], x[3]}, s);
  return {a[0], a[1]};
}

// The trace's view of a pooling window.
attr::Window traced_window(const std::array<PoolAxis, 2>& a, bool ceil_mode) {
  attr::Window w = detail::traced_window({a[0], a[1]});
  w.ceil_mode = ceil_mode;
  return w;
}

// ---- max_pool2d

// Each window's maximum and its first arg-max in its plane (indices).
struct MaxPooled {
  Tensor values, indices;
};

// Dilation can leave a window with no tap inside the input: refused by
// name, since its maximum would be the padding's -inf and have no source.
void check_taps(const PoolAxis& a, const char* axis) {
  for (int64_t o = 0; o < a.out; ++o) {
    bool inside = false;
    for (int64_t k = 0; k < a.kernel && !inside; ++k) {
      const int64_t t = a.start(o) + k * a.dilation;
      inside = t >= 0 && t < a.in;
    }
    if (!inside)
      throw ShapeError("max_pool2d: the window of output " + std::string(axis) + " " + std::to_string(o) +
                       " covers only padding (input " + std::to_string(a.in) + ", kernel " + std::to_string(a.kernel) +
                       ", dilation " + std::to_string(a.dilation) + ", padding " + std::to_string(a.pad_before) + ")");
  }
}

// The taps of one axis clipped to the input: output o reads kernel
// positions [first[o], last[o]) (computed once, not per window).
struct Taps {
  std::vector<int64_t> first, last;
};
Taps taps_of(const PoolAxis& a) {
  Taps t;
  for (int64_t o = 0; o < a.out; ++o) {
    int64_t k0 = 0, k1 = a.kernel;
    while (k0 < k1 && a.start(o) + k0 * a.dilation < 0) ++k0;
    while (k1 > k0 && a.start(o) + (k1 - 1) * a.dilation >= a.in) --k1;
    t.first.push_back(k0);
    t.last.push_back(k1);
  }
  return t;
}

// Whether every window lies whole inside the input (no padding reached).
bool whole_windows(const PoolAxis& a, const Taps& t) {
  for (int64_t o = 0; o < a.out; ++o)
    if (t.first[o] != 0 || t.last[o] != a.kernel) return false;
  return true;
}

// Whether tap value v replaces the window's best so far: the first maximum
// wins, and a NaN wins over numbers, as in PyTorch. Non-short-circuit
// operators, so that the compiler selects rather than branches (which tap
// wins depends on the data: branches would mispredict).
template <class T>
inline bool takes(T v, T best) {
  return (v > best) | ((v != v) & (best == best));
}

// One plane's maxima and arg-maxes, its windows whole inside it (no edge
// checks): tap by tap over a row of outputs, so that the innermost loop runs
// across outputs and the compiler vectorises it (restrict: the rows written
// do not overlap the plane read).
template <class T>
void max_pool_plane_whole(const T* __restrict src, T* __restrict best, int64_t* __restrict arg,
                          const std::array<PoolAxis, 2>& a) {
  const int64_t W = a[1].in, Wo = a[1].out, sw = a[1].stride;
  for (int64_t oh = 0; oh < a[0].out; ++oh, best += Wo, arg += Wo) {
    const int64_t r0 = a[0].start(oh) * W;
    for (int64_t ow = 0; ow < Wo; ++ow) arg[ow] = r0 + ow * sw, best[ow] = src[r0 + ow * sw];
    for (int64_t ki = 0; ki < a[0].kernel; ++ki)
      for (int64_t kj = ki == 0 ? 1 : 0; kj < a[1].kernel; ++kj) {
        const int64_t off = r0 + ki * a[0].dilation * W + kj * a[1].dilation;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t i = off + ow * sw;
          const T v = src[i], b = best[ow];
          const bool t = takes(v, b);
          arg[ow] = t ? i : arg[ow];
          best[ow] = t ? v : b;
        }
      }
  }
}

// The common 2x2 window of stride 2, whole inside the plane: the maximum by
// max operations, its first position by 0/1 arithmetic (no branches to
// mispredict); a window holding a NaN (rare) goes the general way.
template <class T>
void max_pool_plane_2x2(const T* src, T* po, int64_t* ind, const std::array<PoolAxis, 2>& a) {
  const int64_t W = a[1].in, Wo = a[1].out;
  for (int64_t oh = 0; oh < a[0].out; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t i0 = 2 * oh * W + 2 * ow;
      const T x0 = src[i0], x1 = src[i0 + 1], x2 = src[i0 + W], x3 = src[i0 + W + 1];
      const T m01 = x1 > x0 ? x1 : x0, m23 = x3 > x2 ? x3 : x2, m = m23 > m01 ? m23 : m01;
      int64_t arg;
      if ((x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3)) {
        arg = x0 != x0 ? i0 : x1 != x1 ? i0 + 1 : x2 != x2 ? i0 + W : i0 + W + 1;
      } else {
        const int64_t e0 = x0 == m, e1 = x1 == m, e2 = x2 == m;
        arg = i0 + (1 - e0) * (e1 + (1 - e1) * (W + 1 - e2));
      }
      po[oh * Wo + ow] = src[arg];
      ind[oh * Wo + ow] = arg;
    }
}

// The same for any windows: each tap checked against the input's edges.
template <class T>
void max_pool_plane(const T* src, T* po, int64_t* ind, const std::array<PoolAxis, 2>& a, const Taps& th,
                    const Taps& tw) {
  for (int64_t oh = 0; oh < a[0].out; ++oh)
    for (int64_t ow = 0; ow < a[1].out; ++ow) {
      // From the window's first tap (check_taps: every window has one).
      int64_t arg = (a[0].start(oh) + th.first[oh] * a[0].dilation) * a[1].in + a[1].start(ow) +
                    tw.first[ow] * a[1].dilation;
      T best = src[arg];
      for (int64_t ki = th.first[oh]; ki < th.last[oh]; ++ki) {
        const int64_t row = (a[0].start(oh) + ki * a[0].dilation) * a[1].in + a[1].start(ow);
        for (int64_t kj = tw.first[ow]; kj < tw.last[ow]; ++kj) {
          const int64_t i = row + kj * a[1].dilation;
          const T v = src[i];
          const bool t = takes(v, best);
          arg = t ? i : arg;
          best = t ? v : best;
        }
      }
      po[oh * a[1].out + ow] = best;
      ind[oh * a[1].out + ow] = arg;
    }
}

MaxPooled max_pool_forward(const Tensor& x, const std::array<PoolAxis, 2>& a) {
  const int64_t N = x.size(0), C = x.size(1), plane = a[0].in * a[1].in, outs = a[0].out * a[1].out;
  MaxPooled r{make_tensor({N, C, a[0].out, a[1].out}, x.dtype()), make_tensor({N, C, a[0].out, a[1].out}, i64)};
  int64_t* ind = r.indices.data<int64_t>();
  const Taps th = taps_of(a[0]), tw = taps_of(a[1]);
  const bool whole = whole_windows(a[0], th) && whole_windows(a[1], tw);
  const bool two_by_two = whole && a[0].kernel == 2 && a[1].kernel == 2 && a[0].stride == 2 && a[1].stride == 2 &&
                          a[0].dilation == 1 && a[1].dilation == 1;
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.data<T>();
    T* po = r.values.data<T>();
    parallel_for(N * C, a[0].kernel * a[1].kernel * outs, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        if (two_by_two)
          max_pool_plane_2x2(px + nc * plane, po + nc * outs, ind + nc * outs, a);
        else if (whole)
          max_pool_plane_whole(px + nc * plane, po + nc * outs, ind + nc * outs, a);
        else
          max_pool_plane(px + nc * plane, po + nc * outs, ind + nc * outs, a, th, tw);
      }
    });
  });
  return r;
}

// The first-order backward: each output's gradient added at its arg-max,
// plane by plane in parallel (windows of one plane may share an arg-max).
Tensor max_pool_scatter(const Tensor& g, const Tensor& indices, const Shape& in) {
  Tensor out = zeros(in, g.dtype());
  const int64_t planes = in[0] * in[1], plane = in[2] * in[3], outs = g.numel() / std::max<int64_t>(planes, 1);
  const int64_t* ind = indices.data<int64_t>();
  dispatch(g.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    parallel_for(planes, 2 * outs, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc)
        for (int64_t j = nc * outs; j < (nc + 1) * outs; ++j) po[nc * plane + ind[j]] += pg[j];
    });
  });
  return out;
}

// The arg-maxes as flat indices into the whole input, for put_add.
detail::Index flat_indices(const Tensor& indices, const Shape& in) {
  const int64_t plane = in[2] * in[3], n = indices.numel(), outs = n / std::max<int64_t>(in[0] * in[1], 1);
  auto flat = std::make_shared<std::vector<int64_t>>(n);
  const int64_t* ind = indices.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) (*flat)[j] = j / outs * plane + ind[j];
  return flat;
}

MaxPool2dResult max_pool(const Tensor& x, const MaxPool2dOptions& o) {
  check_defined(x, "max_pool2d");
  const auto a = pool_axes("max_pool2d", x.shape(), detail::spec_of(o));
  check_taps(a[0], "row");
  check_taps(a[1], "column");
  MaxPooled m = max_pool_forward(x, a);
  // Backward scatters g to each arg-max; with a graph to record, through
  // put_add, whose own backward (the gather, take) serves the second order.
  Tensor y = record(
      "max_pool2d", m.values, {x},
      [indices = m.indices, in = x.shape()](const Tensor& g) {
        if (grad_enabled()) return std::vector<Tensor>{detail::put_add(g, flat_indices(indices, in), in)};
        return std::vector<Tensor>{max_pool_scatter(g, indices, in)};
      },
      {m.indices});
  y = detail::traced(y, [&](TracedOp& t) { t.attrs = traced_window(a, o.ceil_mode()); });
  return {y, m.indices};
}

// ---- avg_pool2d and adaptive_avg_pool2d

// Along one axis, output o averages inputs [begin[o], end[o]) and divides by
// count[o]; a window's divisor is its row count times its column count.
struct Spans {
  std::vector<int64_t> begin, end, count;
};
struct AvgWindows {
  const char *op, *adjoint;  // the names on the tape of the op and of its adjoint
  int64_t N, C, H, W;
  Spans h, w;
  int64_t divisor = 0;  // every window's divisor when set (avg_pool2d's divisor_override), else its count
};
using Windows = std::shared_ptr<const AvgWindows>;

// Calls f(output index, divisor, taps) for every window, where taps(g)
// calls g(input index) for each input of the window; plane by plane, in
// parallel over planes (no two windows of different planes share an input).
template <class F>
void for_each_window(const AvgWindows& a, F&& f) {
  const int64_t Ho = static_cast<int64_t>(a.h.begin.size()), Wo = static_cast<int64_t>(a.w.begin.size());
  parallel_for(a.N * a.C, a.H * a.W + Ho * Wo, [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          auto taps = [&](auto&& g) {
            for (int64_t h = a.h.begin[i]; h < a.h.end[i]; ++h)
              for (int64_t w = a.w.begin[j]; w < a.w.end[j]; ++w) g((nc * a.H + h) * a.W + w);
          };
          f((nc * Ho + i) * Wo + j, a.divisor ? a.divisor : a.h.count[i] * a.w.count[j], taps);
        }
  });
}

Tensor spread_windows(const Tensor& g, const Windows& a);

// The windows' means, each a sum divided once (as PyTorch): (N,C,H,W) -> (N,C,Ho,Wo).
Tensor average_windows(const Tensor& x, const Windows& a) {
  Tensor out = make_tensor({a->N, a->C, static_cast<int64_t>(a->h.begin.size()),
                            static_cast<int64_t>(a->w.begin.size())}, x.dtype());
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = x.data<T>();
    T* d = out.data<T>();
    for_each_window(*a, [&](int64_t o, int64_t divisor, auto&& taps) {
      T acc = 0;
      taps([&](int64_t in) { acc += s[in]; });
      d[o] = acc / static_cast<T>(divisor);
    });
  });
  return record(a->op, out, {x}, [a](const Tensor& g) { return std::vector<Tensor>{spread_windows(g, a)}; });
}

// The adjoint: each output's gradient shared out over its window's inputs.
Tensor spread_windows(const Tensor& g, const Windows& a) {
  Tensor out = zeros({a->N, a->C, a->H, a->W}, g.dtype());
  dispatch(g.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = g.data<T>();
    T* d = out.data<T>();
    for_each_window(*a, [&](int64_t o, int64_t divisor, auto&& taps) {
      const T share = s[o] / static_cast<T>(divisor);
      taps([&](int64_t in) { d[in] += share; });
    });
  });
  return record(a->adjoint, out, {g}, [a](const Tensor& gg) { return std::vector<Tensor>{average_windows(gg, a)}; });
}

// avg_pool2d's windows along one axis: the padded window [start, start + k)
// clipped to the input, divided by its size with the padding (clipped to
// in + pad, as PyTorch's ceil_mode windows are) or without it.
Spans pool_spans(const PoolAxis& a, bool count_include_pad) {
  Spans s;
  for (int64_t o = 0; o < a.out; ++o) {
    const int64_t start = a.start(o), stop = std::min(start + a.kernel, a.in + a.pad_after);
    const int64_t b = std::max<int64_t>(start, 0), e = std::min(stop, a.in);
    s.begin.push_back(b);
    s.end.push_back(e);
    s.count.push_back(count_include_pad ? stop - start : e - b);
  }
  return s;
}

// adaptive_avg_pool2d's windows along one axis: [floor(o in / out), ceil((o+1) in / out)).
Spans adaptive_spans(int64_t in, int64_t out) {
  Spans s;
  for (int64_t o = 0; o < out; ++o) {
    s.begin.push_back(o * in / out);
    s.end.push_back(((o + 1) * in + out - 1) / out);
    s.count.push_back(s.end.back() - s.begin.back());
  }
  return s;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& o) { return max_pool(x, o).values; }

MaxPool2dResult max_pool2d_with_indices(const Tensor& x, const MaxPool2dOptions& o) { return max_pool(x, o); }

Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& o) {
  check_defined(x, "avg_pool2d");
  const auto a = pool_axes("avg_pool2d", x.shape(), detail::spec_of(o));
  const auto divisor = o.divisor_override();
  require(!divisor || *divisor >= 1,
          "avg_pool2d: divisor_override " + std::to_string(divisor.value_or(0)) + ": expected at least 1");
  auto w = std::make_shared<AvgWindows>(AvgWindows{"avg_pool2d", "avg_pool2d_backward", x.size(0), x.size(1),
                                                   x.size(2), x.size(3), pool_spans(a[0], o.count_include_pad()),
                                                   pool_spans(a[1], o.count_include_pad()), divisor.value_or(0)});
  return detail::traced(average_windows(x, w), [&](TracedOp& t) {
    attr::Window traced = traced_window(a, o.ceil_mode());
    traced.count_include_pad = o.count_include_pad();
    traced.divisor_override = divisor.value_or(0);
    t.attrs = traced;
  });
}

Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size) {
  check_defined(x, "adaptive_avg_pool2d");
  if (x.dim() != 4)
    throw ShapeError("adaptive_avg_pool2d: expected an (N,C,H,W) input, got " + shape_str(x.shape()));
  detail::check_at_least("adaptive_avg_pool2d", "output_size", detail::values(output_size), 1);
  if (x.size(2) < 1 || x.size(3) < 1)
    throw ShapeError("adaptive_avg_pool2d: expected an input of at least 1x1 pixels, got " + shape_str(x.shape()));
  auto w = std::make_shared<AvgWindows>(AvgWindows{"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", x.size(0),
                                                   x.size(1), x.size(2), x.size(3),
                                                   adaptive_spans(x.size(2), output_size[0]),
                                                   adaptive_spans(x.size(3), output_size[1]), 0});
  return detail::traced(average_windows(x, w), [&](TracedOp& t) {
    t.attrs = attr::OutputSize{detail::values(output_size)};
  });
}

}  // namespace xg
