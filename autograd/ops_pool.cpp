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

#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/require.h"

namespace xg {

namespace {

std::string pair_str(int64_t a, int64_t b) { return "(" + std::to_string(a) + "," + std::to_string(b) + ")"; }

// One axis of a pooling window: output o's taps are at o * stride - pad +
// k * dilation for k < kernel, those inside [0, in) taken.
struct PoolAxis {
  int64_t in, out, kernel, stride, pad, dilation;
  int64_t start(int64_t o) const { return o * stride - pad; }
};

// The options the two pooling ops share.
struct PoolSpec {
  std::array<int64_t, 2> kernel, stride, padding, dilation;
  bool ceil_mode;
};

// Refuses what PyTorch refuses (pool2d_shape_check), naming the accepted range.
void check_pool_options(const char* op, const PoolSpec& s) {
  const std::string who = std::string(op) + ": ";
  auto at_least = [&](const char* what, const std::array<int64_t, 2>& v, int64_t lo, const char* expected) {
    require(v[0] >= lo && v[1] >= lo, what + (" " + pair_str(v[0], v[1])) + ": expected " + expected, who.c_str());
  };
  at_least("kernel", s.kernel, 1, "each at least 1");
  at_least("stride", s.stride, 0, "each at least 1, or 0 for the kernel");
  at_least("dilation", s.dilation, 1, "each at least 1");
  require(s.padding[0] >= 0 && s.padding[1] >= 0 && s.padding[0] <= s.kernel[0] / 2 && s.padding[1] <= s.kernel[1] / 2,
          "padding " + pair_str(s.padding[0], s.padding[1]) + ": expected each from 0 to half the kernel " +
              pair_str(s.kernel[0] / 2, s.kernel[1] / 2),
          who.c_str());
}

// Floor division (the numerator may be negative).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Each axis's output size by PyTorch's rule (pooling_output_shape); an
// input smaller than the window is refused.
std::array<PoolAxis, 2> pool_axes(const char* op, const Shape& x, const PoolSpec& s) {
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected an (N,C,H,W) input, got " + shape_str(x));
  check_pool_options(op, s);
  std::array<PoolAxis, 2> a;
  for (int i = 0; i < 2; ++i) {
    const int64_t k = s.kernel[i], st = s.stride[i] ? s.stride[i] : k, p = s.padding[i], d = s.dilation[i];
    const int64_t in = x[2 + i];
    int64_t out = floor_div(in + 2 * p - d * (k - 1) - 1 + (s.ceil_mode ? st - 1 : 0), st) + 1;
    // A last window must start inside the input or its left padding.
    if (s.ceil_mode && (out - 1) * st >= in + p) --out;
    a[i] = PoolAxis{in, out, k, st, p, d};
  }
  if (a[0].out < 1 || a[1].out < 1)
    throw ShapeError(std::string(op) + ": the padded input " + std::to_string(x[2] + 2 * a[0].pad) + "x" +
                     std::to_string(x[3] + 2 * a[1].pad) + " is smaller than the " +
                     (a[0].dilation * a[1].dilation > 1 ? "dilated kernel " : "kernel ") +
                     std::to_string(a[0].dilation * (a[0].kernel - 1) + 1) + "x" +
                     std::to_string(a[1].dilation * (a[1].kernel - 1) + 1));
  return a;
}

// ---- max_pool2d

// Each window's maximum, its first arg-max in its plane (indices), and the
// same as a flat index into the whole input (for put_add).
struct MaxPooled {
  Tensor values, indices;
  detail::Index flat;
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
                       ", dilation " + std::to_string(a.dilation) + ", padding " + std::to_string(a.pad) + ")");
  }
}

MaxPooled max_pool_forward(const Tensor& x, const std::array<PoolAxis, 2>& a) {
  const int64_t N = x.size(0), C = x.size(1), plane = a[0].in * a[1].in, outs = a[0].out * a[1].out;
  MaxPooled r{make_tensor({N, C, a[0].out, a[1].out}, x.dtype()), make_tensor({N, C, a[0].out, a[1].out}, i64), {}};
  auto flat = std::make_shared<std::vector<int64_t>>(N * C * outs);
  int64_t* ind = r.indices.data<int64_t>();
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.data<T>();
    T* po = r.values.data<T>();
    parallel_for(N * C, a[0].kernel * a[1].kernel * outs, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc)
        for (int64_t oh = 0; oh < a[0].out; ++oh)
          for (int64_t ow = 0; ow < a[1].out; ++ow) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t arg = -1;
            for (int64_t ki = 0; ki < a[0].kernel; ++ki) {
              const int64_t h = a[0].start(oh) + ki * a[0].dilation;
              if (h < 0 || h >= a[0].in) continue;
              for (int64_t kj = 0; kj < a[1].kernel; ++kj) {
                const int64_t w = a[1].start(ow) + kj * a[1].dilation;
                if (w < 0 || w >= a[1].in) continue;
                const T v = px[nc * plane + h * a[1].in + w];
                if (arg < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, arg = h * a[1].in + w;
              }
            }
            const int64_t j = nc * outs + oh * a[1].out + ow;
            po[j] = best;
            ind[j] = arg;
            (*flat)[j] = nc * plane + arg;
          }
    });
  });
  r.flat = flat;
  return r;
}

MaxPool2dResult max_pool(const Tensor& x, const Pool2dOptions& o) {
  check_defined(x, "max_pool2d");
  const auto a = pool_axes("max_pool2d", x.shape(), {o.kernel, o.stride, o.padding, o.dilation, o.ceil_mode});
  check_taps(a[0], "row");
  check_taps(a[1], "column");
  MaxPooled m = max_pool_forward(x, a);
  // Backward scatters g to each arg-max: put_add, whose own backward (the
  // gather, take) serves the second order.
  Tensor y = record("max_pool2d", m.values, {x}, [flat = m.flat, in = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{detail::put_add(g, flat, in)};
  });
  // Exported as ONNX MaxPool: ints = kernel, stride (resolved), padding, dilation (each h, w), ceil_mode.
  y = detail::traced(y, [&](TracedOp& t) {
    t.ints = {a[0].kernel, a[1].kernel, a[0].stride, a[1].stride, a[0].pad, a[1].pad,
              a[0].dilation, a[1].dilation, o.ceil_mode ? 1 : 0};
  });
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
          f((nc * Ho + i) * Wo + j, a.h.count[i] * a.w.count[j], taps);
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
    const int64_t start = a.start(o), stop = std::min(start + a.kernel, a.in + a.pad);
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

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& o) { return max_pool(x, o).values; }

MaxPool2dResult max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& o) { return max_pool(x, o); }

Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& o) {
  check_defined(x, "avg_pool2d");
  const auto a = pool_axes("avg_pool2d", x.shape(), {o.kernel, o.stride, o.padding, {1, 1}, o.ceil_mode});
  auto w = std::make_shared<AvgWindows>(AvgWindows{"avg_pool2d", "avg_pool2d_backward", x.size(0), x.size(1),
                                                   x.size(2), x.size(3), pool_spans(a[0], o.count_include_pad),
                                                   pool_spans(a[1], o.count_include_pad)});
  // Exported as ONNX AveragePool: ints = kernel, stride (resolved), padding
  // (each h, w), ceil_mode, count_include_pad.
  return detail::traced(average_windows(x, w), [&](TracedOp& t) {
    t.ints = {a[0].kernel, a[1].kernel, a[0].stride, a[1].stride, a[0].pad, a[1].pad,
              o.ceil_mode ? 1 : 0, o.count_include_pad ? 1 : 0};
  });
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  check_defined(x, "adaptive_avg_pool2d");
  if (x.dim() != 4)
    throw ShapeError("adaptive_avg_pool2d: expected an (N,C,H,W) input, got " + shape_str(x.shape()));
  require(output_size[0] >= 1 && output_size[1] >= 1,
          "output_size " + pair_str(output_size[0], output_size[1]) + ": expected each at least 1",
            "adaptive_avg_pool2d: ");
  if (x.size(2) < 1 || x.size(3) < 1)
    throw ShapeError("adaptive_avg_pool2d: expected an input of at least 1x1 pixels, got " + shape_str(x.shape()));
  auto w = std::make_shared<AvgWindows>(AvgWindows{"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", x.size(0),
                                                   x.size(1), x.size(2), x.size(3),
                                                   adaptive_spans(x.size(2), output_size[0]),
                                                   adaptive_spans(x.size(3), output_size[1])});
  return detail::traced(average_windows(x, w), [&](TracedOp& t) { t.ints = {output_size[0], output_size[1]}; });
}

}  // namespace xg
