// Convolutions as a product with im2col columns: unfold2d gathers each
// output position's receptive field into a column, conv2d multiplies the
// flattened weights with them (matmul: oneDNN for float32, OpenBLAS for
// float64). unfold2d and fold2d are each other's adjoint, and each records
// the other as its backward, so gradients of every order follow.
#include <string>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace xg {

namespace {

// Where a window's element lands: the geometry both ops share.
struct Window {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
  int64_t rows() const { return C * kh * kw; }  // a column's length
  int64_t cols() const { return Ho * Wo; }      // output positions
};

Window window_of(const char* op, const Shape& x, const Conv2dOptions& o) {
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected an (N,C,H,W) input, got " + shape_str(x));
  auto positive = [&](const char* what, int64_t a, int64_t b, int64_t lo) {
    if (a < lo || b < lo)
      throw std::invalid_argument(std::string(op) + ": " + what + " (" + std::to_string(a) + "," + std::to_string(b) +
                                  "): expected each at least " + std::to_string(lo));
  };
  positive("kernel_size", o.kernel[0], o.kernel[1], 1);
  positive("stride", o.stride[0], o.stride[1], 1);
  positive("padding", o.padding[0], o.padding[1], 0);
  positive("dilation", o.dilation[0], o.dilation[1], 1);
  Window w{x[0], x[1], x[2], x[3], o.kernel[0], o.kernel[1], o.stride[0], o.stride[1],
           o.padding[0], o.padding[1], o.dilation[0], o.dilation[1], 0, 0};
  const int64_t span_h = w.dh * (w.kh - 1) + 1, span_w = w.dw * (w.kw - 1) + 1;
  if (w.H + 2 * w.ph < span_h || w.W + 2 * w.pw < span_w)
    throw ShapeError(std::string(op) + ": the padded input " + std::to_string(w.H + 2 * w.ph) + "x" +
                     std::to_string(w.W + 2 * w.pw) + " is smaller than the dilated kernel " + std::to_string(span_h) +
                     "x" + std::to_string(span_w));
  w.Ho = (w.H + 2 * w.ph - span_h) / w.sh + 1;
  w.Wo = (w.W + 2 * w.pw - span_w) / w.sw + 1;
  return w;
}

// Calls f(column element index, input element index) for every element of
// a window that falls inside the input, image n by image n (in parallel
// over images and channels: no two calls of one (n, c) share an input).
template <class F>
void for_each_tap(const Window& w, F&& f) {
  parallel_for(w.N * w.C, w.kh * w.kw * w.cols(), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t n = nc / w.C, c = nc % w.C;
      for (int64_t ki = 0; ki < w.kh; ++ki)
        for (int64_t kj = 0; kj < w.kw; ++kj) {
          const int64_t row = (c * w.kh + ki) * w.kw + kj;
          const int64_t col0 = (n * w.rows() + row) * w.cols();
          for (int64_t oh = 0; oh < w.Ho; ++oh) {
            const int64_t h = oh * w.sh - w.ph + ki * w.dh;
            if (h < 0 || h >= w.H) continue;
            for (int64_t ow = 0; ow < w.Wo; ++ow) {
              const int64_t x = ow * w.sw - w.pw + kj * w.dw;
              if (x < 0 || x >= w.W) continue;
              f(col0 + oh * w.Wo + ow, ((n * w.C + c) * w.H + h) * w.W + x);
            }
          }
        }
    }
  });
}

Tensor fold_window(const Tensor& cols, const Window& w);

Tensor unfold_window(const Tensor& x, const Window& w) {
  Tensor out = zeros({w.N, w.rows(), w.cols()}, x.dtype());
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = x.data<T>();
    T* d = out.data<T>();
    for_each_tap(w, [&](int64_t col, int64_t in) { d[col] = s[in]; });
  });
  return record("unfold2d", out, {x}, [w](const Tensor& g) { return std::vector<Tensor>{fold_window(g, w)}; });
}

Tensor fold_window(const Tensor& cols, const Window& w) {
  Tensor out = zeros({w.N, w.C, w.H, w.W}, cols.dtype());
  dispatch(cols.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = cols.data<T>();
    T* d = out.data<T>();
    for_each_tap(w, [&](int64_t col, int64_t in) { d[in] += s[col]; });
  });
  return record("fold2d", out, {cols}, [w](const Tensor& g) { return std::vector<Tensor>{unfold_window(g, w)}; });
}

}  // namespace

Tensor unfold2d(const Tensor& x, const Conv2dOptions& o) {
  check_defined(x, "unfold2d");
  return unfold_window(x, window_of("unfold2d", x.shape(), o));
}

Tensor fold2d(const Tensor& cols, const Shape& input_shape, const Conv2dOptions& o) {
  check_defined(cols, "fold2d");
  const Window w = window_of("fold2d", input_shape, o);
  if (cols.shape() != Shape{w.N, w.rows(), w.cols()})
    throw ShapeError("fold2d: expected columns (" + std::to_string(w.N) + "," + std::to_string(w.rows()) + "," +
                     std::to_string(w.cols()) + ") for the input " + shape_str(input_shape) + ", got " +
                     shape_str(cols.shape()));
  return fold_window(cols, w);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dOptions o) {
  check_defined(x, "conv2d");
  check_defined(weight, "conv2d");
  if (weight.dim() != 4 || x.dim() != 4 || weight.size(1) != x.size(1))
    throw ShapeError("conv2d: expected an input (N,C,H,W) and a weight (O,C,kh,kw) with the same C, got " +
                     shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  o.kernel = {weight.size(2), weight.size(3)};
  const Window w = window_of("conv2d", x.shape(), o);
  const int64_t O = weight.size(0);
  // (O, C kh kw) x (N, C kh kw, Ho Wo) -> (N, O, Ho Wo)
  Tensor y = matmul(reshape(weight, {O, w.rows()}), unfold2d(x, o));
  y = reshape(y, {w.N, O, w.Ho, w.Wo});
  if (!bias.defined()) return y;
  if (bias.dim() != 1 || bias.size(0) != O)
    throw ShapeError("conv2d: expected a bias (" + std::to_string(O) + ",), got " + shape_str(bias.shape()));
  return y + reshape(bias, {1, O, 1, 1});
}

}  // namespace xg
