// Convolutions as a product with im2col columns: unfold2d gathers each
// output position's receptive field into a column, conv2d multiplies the
// flattened weights with them (matmul: oneDNN for float32, OpenBLAS for
// float64), group by group as a batched product. conv_transpose2d runs the
// same columns the other way: the transposed weight's product with the
// input, folded into the output. unfold2d and fold2d are each other's
// adjoint, and each records the other as its backward, so gradients of
// every order follow.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "engine/conv.h"

namespace xg {

namespace {

// Where a window's element lands: the geometry both ops share.
// ph, pw pad the top and left; eh, ew the bottom and right (the same but
// for padding="same" with an odd total).
struct Window {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, eh, ew, Ho, Wo;
  int64_t rows() const { return C * kh * kw; }  // a column's length
  int64_t cols() const { return Ho * Wo; }      // output positions
};

Window window_of(const char* op, const Shape& x, std::array<int64_t, 2> kernel, const Conv2dOptions& o) {
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected an (N,C,H,W) input, got " + shape_str(x));
  auto positive = [&](const char* what, int64_t a, int64_t b, int64_t lo) {
    if (a < lo || b < lo)
      throw std::invalid_argument(std::string(op) + ": " + what + " (" + std::to_string(a) + "," + std::to_string(b) +
                                  "): expected each at least " + std::to_string(lo));
  };
  positive("kernel_size", kernel[0], kernel[1], 1);
  positive("stride", o.stride[0], o.stride[1], 1);
  positive("padding", o.padding[0], o.padding[1], 0);
  positive("dilation", o.dilation[0], o.dilation[1], 1);
  Window w{x[0], x[1], x[2], x[3], kernel[0], kernel[1], o.stride[0], o.stride[1],
           o.padding[0], o.padding[1], o.dilation[0], o.dilation[1], o.padding[0], o.padding[1], 0, 0};
  if (o.same) {
    if (w.sh != 1 || w.sw != 1)
      throw std::invalid_argument(std::string(op) + ": padding \"same\" needs stride (1,1), got (" +
                                  std::to_string(w.sh) + "," + std::to_string(w.sw) + ")");
    const int64_t th = w.dh * (w.kh - 1), tw = w.dw * (w.kw - 1);
    w.ph = th / 2, w.eh = th - th / 2, w.pw = tw / 2, w.ew = tw - tw / 2;
  }
  const int64_t span_h = w.dh * (w.kh - 1) + 1, span_w = w.dw * (w.kw - 1) + 1;
  const int64_t padded_h = w.H + w.ph + w.eh, padded_w = w.W + w.pw + w.ew;
  if (padded_h < span_h || padded_w < span_w)
    throw ShapeError(std::string(op) + ": the padded input " + std::to_string(padded_h) + "x" +
                     std::to_string(padded_w) + " is smaller than the dilated kernel " + std::to_string(span_h) +
                     "x" + std::to_string(span_w));
  w.Ho = (padded_h - span_h) / w.sh + 1;
  w.Wo = (padded_w - span_w) / w.sw + 1;
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

Tensor unfold2d(const Tensor& x, std::array<int64_t, 2> kernel, const Conv2dOptions& o) {
  check_defined(x, "unfold2d");
  return unfold_window(x, window_of("unfold2d", x.shape(), kernel, o));
}

Tensor fold2d(const Tensor& cols, const Shape& input_shape, std::array<int64_t, 2> kernel, const Conv2dOptions& o) {
  check_defined(cols, "fold2d");
  const Window w = window_of("fold2d", input_shape, kernel, o);
  if (cols.shape() != Shape{w.N, w.rows(), w.cols()})
    throw ShapeError("fold2d: expected columns (" + std::to_string(w.N) + "," + std::to_string(w.rows()) + "," +
                     std::to_string(w.cols()) + ") for the input " + shape_str(input_shape) + ", got " +
                     shape_str(cols.shape()));
  return fold_window(cols, w);
}

namespace {

// The groups of a convolution with C input and O output channels.
void check_groups(const char* op, int64_t groups, int64_t C, int64_t O) {
  if (groups < 1 || C % groups != 0 || O % groups != 0)
    throw std::invalid_argument(std::string(op) + ": groups " + std::to_string(groups) +
                                " must be at least 1 and divide both the input channels (" + std::to_string(C) +
                                ") and the output channels (" + std::to_string(O) + ")");
}

void check_bias(const char* op, const Tensor& bias, int64_t O) {
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != O))
    throw ShapeError(std::string(op) + ": expected a bias (" + std::to_string(O) + ",), got " + shape_str(bias.shape()));
}

Tensor add_channel_bias(const char* op, const Tensor& y, const Tensor& bias) {
  if (!bias.defined()) return y;
  const int64_t O = y.size(1);
  check_bias(op, bias, O);
  return y + reshape(bias, {1, O, 1, 1});
}

// conv2d as unfold2d and a (grouped) product: the float64 path, and the
// composite whose gradients give the direct path's second order.
Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window& w, int64_t G) {
  const int64_t O = weight.size(0), R = w.rows() / G;  // R: one group's column length
  // Group g's rows of the columns are the block [g R, (g+1) R): its input
  // channels. (G, O/G, R) x (N, G, R, Ho Wo) -> (N, G, O/G, Ho Wo).
  const Tensor cols = unfold_window(x, w);
  Tensor y = G == 1 ? matmul(reshape(weight, {O, R}), cols)
                    : matmul(reshape(weight, {G, O / G, R}), reshape(cols, {w.N, G, R, w.cols()}));
  return add_channel_bias("conv2d", reshape(y, {w.N, O, w.Ho, w.Wo}), bias);
}

engine::ConvGeometry geometry_of(const Window& w, int64_t O, int64_t G) {
  engine::ConvGeometry g;
  g.n = w.N, g.c = w.C, g.h = w.H, g.w = w.W;
  g.o = O, g.kh = w.kh, g.kw = w.kw, g.groups = G;
  g.sh = w.sh, g.sw = w.sw, g.dh = w.dh, g.dw = w.dw;
  g.pt = w.ph, g.pl = w.pw, g.pb = w.eh, g.pr = w.ew;
  g.ho = w.Ho, g.wo = w.Wo;
  return g;
}

// A convolution on the engine's primitives (engine/conv.h), the batch split
// into one chunk of images per thread of the pool. In = float, or bf16_t
// under Autocast(bf16); results are float32.
template <class In>
struct DirectConv {
  engine::ConvGeometry g;  // the whole batch
  int64_t chunks() const { return std::max<int64_t>(1, std::min<int64_t>(num_threads(), g.n)); }
  // The first chunk's geometry: whose primitives choose the layouts.
  engine::ConvGeometry chunk0() const {
    engine::ConvGeometry p = g;
    p.n = g.n / chunks();
    return p;
  }
  int64_t flops_per_image() const { return 2 * g.o * (g.c / g.groups) * g.kh * g.kw * g.ho * g.wo; }
  // Calls f(chunk index, its geometry, its first image) for each chunk, in parallel.
  template <class F>
  void over_chunks(F&& f) const {
    const int64_t k = chunks();
    parallel_for(k, flops_per_image() * g.n / k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        engine::ConvGeometry part = g;
        const int64_t n0 = g.n * i / k;
        part.n = g.n * (i + 1) / k - n0;
        f(i, part, n0);
      }
    });
  }
  // Layouts (engine::ConvBlocks) are float32's only: bf16 runs on NCHW.
  void forward(const In* x, const In* w, const float* b, float* y, engine::ConvBlocks blocks = {}) const {
    over_chunks([&](int64_t, const engine::ConvGeometry& p, int64_t n0) {
      if constexpr (std::is_same_v<In, float>)
        engine::conv_forward(p, x + n0 * g.c * g.h * g.w, w, b, y + n0 * g.o * g.ho * g.wo, blocks);
      else
        engine::conv_forward(p, x + n0 * g.c * g.h * g.w, w, b, y + n0 * g.o * g.ho * g.wo);
    });
  }
  void backward(const In* x, const In* w, const In* dy, float* dx, float* dw, float* db,
                engine::ConvBlocks blocks = {}) const;
};

// The gradients asked for (dx, and dw with db, each null when not):
// engine::conv_backward when both are, which reorders dy once for the two.
// Chunk 0 writes dw and db; the others write partial sums, added after.
template <class In>
void DirectConv<In>::backward(const In* x, const In* w, const In* dy, float* dx, float* dw, float* db,
                              engine::ConvBlocks blocks) const {
  if (!dx && !dw) return;
  const int64_t k = chunks(), nw = g.o * (g.c / g.groups) * g.kh * g.kw, stride = nw + g.o;
  std::vector<float> partial(static_cast<size_t>(dw ? std::max<int64_t>(k - 1, 0) * stride : 0));
  over_chunks([&](int64_t i, const engine::ConvGeometry& p, int64_t n0) {
    const In *xi = x + n0 * g.c * g.h * g.w, *dyi = dy + n0 * g.o * g.ho * g.wo;
    float* dxi = dx ? dx + n0 * g.c * g.h * g.w : nullptr;
    float* pw = i == 0 ? dw : partial.data() + (i - 1) * stride;
    float* pb = !db ? nullptr : i == 0 ? db : partial.data() + (i - 1) * stride + nw;
    if constexpr (std::is_same_v<In, float>) {
      if (!dw) return engine::conv_backward_data(p, dyi, w, dxi, blocks);
      if (dxi) return engine::conv_backward(p, xi, w, dyi, dxi, pw, pb, blocks);
      engine::conv_backward_weights(p, xi, dyi, pw, pb, blocks);
    } else {
      if (!dw) return engine::conv_backward_data(p, dyi, w, dxi);
      if (dxi) return engine::conv_backward(p, xi, w, dyi, dxi, pw, pb);
      engine::conv_backward_weights(p, xi, dyi, pw, pb);
    }
  });
  if (!dw) return;
  for (int64_t i = 1; i < k; ++i) {
    const float* part = partial.data() + (i - 1) * stride;
    for (int64_t j = 0; j < nw; ++j) dw[j] += part[j];
    if (db)
      for (int64_t j = 0; j < g.o; ++j) db[j] += part[nw + j];
  }
}

// The float32 gradients of a direct convolution (those asked for), from
// In-typed operands: {dx, dw, db}; dx in block dx_block (0: NCHW).
template <class In>
std::vector<Tensor> direct_backward(const DirectConv<In>& dc, const In* x, const In* w, const In* dy,
                                    const Shape& xs, const Shape& ws, bool has_b, engine::ConvBlocks blocks = {}) {
  Tensor gx = !needs_input_grad(0) ? Tensor() : blocks.dx ? detail::make_blocked(xs, blocks.dx) : make_tensor(xs, f32);
  Tensor gw = needs_input_grad(1) ? make_tensor(ws, f32) : Tensor();
  Tensor gb = has_b && needs_input_grad(2) ? make_tensor({dc.g.o}, f32) : Tensor();
  // The primitive computes both; a bias gradient alone still needs a weight buffer.
  Tensor w_out = gw.defined() ? gw : gb.defined() ? make_tensor(ws, f32) : Tensor();
  dc.backward(x, w, dy, gx.defined() ? detail::stored(gx) : nullptr, w_out.defined() ? w_out.data<float>() : nullptr,
              gb.defined() ? gb.data<float>() : nullptr, blocks);
  return {gx, gw, gb};
}

// conv2d under Autocast(bf16): bf16 operands, float32 results. The input is
// saved as its bf16 copy; the weight as itself, converted again in backward
// (as linear does).
Tensor conv2d_direct_bf16(const Tensor& x, const Tensor& weight, const Tensor& bias, const DirectConv<engine::bf16_t>& dc) {
  Tensor y = make_tensor({dc.g.n, dc.g.o, dc.g.ho, dc.g.wo}, f32);
  auto x16 = saved_bf16(x);
  dc.forward(x16->data(), to_bf16(weight)->data(), bias.defined() ? bias.data<float>() : nullptr, y.data<float>());
  return record(
      "conv2d", y, {x, weight, bias},
      [x16, w = weight.detach(), dc, xs = x.shape(), has_b = bias.defined()](const Tensor& g) {
        if (grad_enabled()) throw_bf16_second_order("conv2d");
        return direct_backward<engine::bf16_t>(dc, x16->data(), to_bf16(w)->data(), to_bf16(g)->data(), xs,
                                               w.shape(), has_b);
      },
      {weight});
}

// conv2d on the engine's primitives, float32; its second order by
// recomputation through the im2col composite, differentiable to any order.
Tensor conv2d_direct(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window& win, int64_t G) {
  detail::check_same_dtype(x, weight, "conv2d");
  if (bias.defined()) detail::check_same_dtype(x, bias, "conv2d");
  check_bias("conv2d", bias, weight.size(0));
  const engine::ConvGeometry geo = geometry_of(win, weight.size(0), G);
  if (autocast_bf16(x)) return conv2d_direct_bf16(x, weight, bias, DirectConv<engine::bf16_t>{geo});
  const DirectConv<float> dc{geo};
  // The result stays in the layout the primitive writes, when that is
  // blocked: the next op reads it as it is or converts it (detail::stored).
  const int xb = detail::channel_block(x);
  const int yb = engine::blocked_activations() && geo.n > 0 ? engine::conv_blocks(dc.chunk0(), xb).y : 0;
  const Shape ys{geo.n, geo.o, geo.ho, geo.wo};
  Tensor y = yb ? detail::make_blocked(ys, yb) : make_tensor(ys, f32);
  dc.forward(detail::stored(x), weight.data<float>(), bias.defined() ? bias.data<float>() : nullptr,
             detail::stored(y), {xb, yb, 0});
  return record(
      "conv2d", y, {x, weight, bias},
      [x, weight, bias, dc, win, G](const Tensor& g) {
        if (grad_enabled())
          return detail::vjp_by_recompute(
              [win, G](const std::vector<Tensor>& in) { return conv2d_im2col(in[0], in[1], in[2], win, G); },
              {x, weight, bias}, g);
        // x and g as they are stored now (another op may have converted x since).
        const int xb = detail::channel_block(x);
        const int dxb = engine::blocked_activations() && dc.g.n > 0 ? engine::conv_blocks(dc.chunk0(), xb).dx : 0;
        return direct_backward<float>(dc, detail::stored(x), weight.data<float>(), detail::stored(g), x.shape(),
                                      weight.shape(), bias.defined(), {xb, detail::channel_block(g), dxb});
      },
      {x, weight});
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  check_defined(x, "conv2d");
  check_defined(weight, "conv2d");
  const int64_t G = o.groups;
  if (weight.dim() != 4 || x.dim() != 4 || G < 1 || weight.size(1) * G != x.size(1))
    throw ShapeError("conv2d: expected an input (N,C,H,W) and a weight (O,C/groups,kh,kw) with groups " +
                     std::to_string(G) + ", got " + shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  check_groups("conv2d", G, x.size(1), weight.size(0));
  const Window w = window_of("conv2d", x.shape(), {weight.size(2), weight.size(3)}, o);
  // float64 stays on im2col: the oracle that gradchecks and parity tests read.
  const Tensor y = x.dtype() == f32 && engine::conv_available() ? conv2d_direct(x, weight, bias, w, G)
                                                                : conv2d_im2col(x, weight, bias, w, G);
  // Exported as one convolution (ONNX Conv), whichever path computed it.
  return detail::traced(y, [&](TracedOp& t) {
    t = TracedOp{"conv2d", t.scope, {x, weight, bias}, y, {w.sh, w.sw, w.ph, w.pw, w.eh, w.ew, w.dh, w.dw, G}, {}, {}};
  });
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dOptions& o) {
  check_defined(x, "conv1d");
  check_defined(weight, "conv1d");
  if (x.dim() != 3 || weight.dim() != 3)
    throw ShapeError("conv1d: expected an input (N,C,L) and a weight (O,C/groups,k), got " + shape_str(x.shape()) +
                     " and " + shape_str(weight.shape()));
  Conv2dOptions o2;
  o2.stride = {1, o.stride};
  o2.padding = {0, o.padding};
  o2.dilation = {1, o.dilation};
  o2.groups = o.groups;
  o2.same = o.same;
  const Tensor y = squeeze(conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o2), 2);
  // Exported as one convolution on (N,C,L), so that L may change from run to
  // run: ints = stride, padding at the start and end, dilation, groups.
  const int64_t total = o.dilation * (weight.size(2) - 1);
  const int64_t begin = o.same ? total / 2 : o.padding, end = o.same ? total - total / 2 : o.padding;
  return detail::traced(y, [&](TracedOp& t) {
    t = TracedOp{"conv1d", t.scope, {x, weight, bias}, y, {o.stride, begin, end, o.dilation, o.groups}, {}, {}};
  });
}

namespace {

// The output size of a transposed convolution along one axis, checked.
int64_t transposed_size(int64_t n, int64_t k, const ConvTranspose2dOptions& o, int axis) {
  const int64_t s = o.stride[axis], p = o.padding[axis], op = o.output_padding[axis], d = o.dilation[axis];
  const std::string at = std::string(axis == 0 ? "height" : "width") + ": ";
  if (s < 1 || d < 1 || p < 0)
    throw std::invalid_argument("conv_transpose2d: " + at + "stride " + std::to_string(s) + ", dilation " +
                                std::to_string(d) + ", padding " + std::to_string(p) +
                                ": expected stride and dilation at least 1, padding at least 0");
  // The output rows past the last input row's reach are never written: they
  // are output_padding, which PyTorch keeps below the stride or the dilation.
  if (op < 0 || (op >= s && op >= d))
    throw std::invalid_argument("conv_transpose2d: " + at + "output_padding " + std::to_string(op) +
                                " must be at least 0 and below the stride " + std::to_string(s) +
                                " or the dilation " + std::to_string(d));
  const int64_t out = (n - 1) * s - 2 * p + d * (k - 1) + op + 1;
  if (out < 1)
    throw ShapeError("conv_transpose2d: " + at + "the output size " + std::to_string(out) +
                     " is below 1 (padding " + std::to_string(p) + " too large for the input " + std::to_string(n) + ")");
  return out;
}

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvTranspose2dOptions& o) {
  check_defined(x, "conv_transpose2d");
  check_defined(weight, "conv_transpose2d");
  if (weight.dim() != 4 || x.dim() != 4 || weight.size(0) != x.size(1))
    throw ShapeError("conv_transpose2d: expected an input (N,C,H,W) and a weight (C,O/groups,kh,kw) with the same C, "
                     "got " + shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = o.groups;
  const int64_t kh = weight.size(2), kw = weight.size(3), O = weight.size(1) * G;
  check_groups("conv_transpose2d", G, C, O);
  const Shape out{N, O, transposed_size(H, kh, o, 0), transposed_size(W, kw, o, 1)};
  // An output_padding at or past the stride (PyTorch allows it below the
  // dilation) leaves output rows that fold's window cannot place: then the
  // whole uncropped result is folded (padding 0), and the output cut from it,
  // rows past its end being zeros.
  const bool wide = o.output_padding[0] >= o.stride[0] || o.output_padding[1] >= o.stride[1];
  Conv2dOptions window;
  window.stride = o.stride;
  window.padding = wide ? std::array<int64_t, 2>{0, 0} : o.padding;
  window.dilation = o.dilation;
  const Shape canvas = wide ? Shape{N, O, (H - 1) * o.stride[0] + o.dilation[0] * (kh - 1) + 1,
                                    (W - 1) * o.stride[1] + o.dilation[1] * (kw - 1) + 1}
                            : out;
  const Window w = window_of("conv_transpose2d", canvas, {kh, kw}, window);
  const int64_t R = O / G * kh * kw;  // one group's column length
  // Columns (N, O kh kw, H W): every input position spreads its channels
  // through the transposed weight, and fold2d sums the windows into place.
  Tensor cols = G == 1 ? matmul(transpose(reshape(weight, {C, R}), 0, 1), reshape(x, {N, C, H * W}))
                       : matmul(transpose(reshape(weight, {G, C / G, R}), 1, 2), reshape(x, {N, G, C / G, H * W}));
  Tensor folded = fold_window(reshape(cols, {N, G * R, H * W}), w);
  if (wide)  // rows [padding, padding + out) of the canvas, zeros past it
    folded = pad(folded, {-o.padding[1], o.padding[1] + out[3] - canvas[3], -o.padding[0],
                          o.padding[0] + out[2] - canvas[2]});
  const Tensor y = add_channel_bias("conv_transpose2d", folded, bias);
  // Exported as one ONNX ConvTranspose, whose weight layout (C, O/groups, kh, kw) is this op's.
  return detail::traced(y, [&](TracedOp& t) {
    t = TracedOp{"conv_transpose2d", t.scope, {x, weight, bias}, y,
                 {o.stride[0], o.stride[1], o.padding[0], o.padding[1], o.output_padding[0], o.output_padding[1],
                  o.dilation[0], o.dilation[1], G}, {}, {}};
  });
}

}  // namespace xg
