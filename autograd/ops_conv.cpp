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

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/detail/impl.h"
#include "autograd/detail/window.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/require.h"
#include "engine/conv.h"

namespace xg {

using detail::WindowSpec;

namespace {

// Where a window's element lands: the geometry both ops share, an (N,C,H,W)
// image's (height, width) axes.
struct Window {
  int64_t N, C;
  detail::WindowAxis h, w;
  int64_t rows() const { return C * h.kernel * w.kernel; }  // a column's length
  int64_t cols() const { return h.out * w.out; }            // output positions
};

Window window_of(const char* op, const Shape& x, const detail::WindowSpec& s) {
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected an (N,C,H,W) input, got " + shape_str(x));
  const auto a = detail::window_axes(op, {x[2], x[3]}, s);
  return {x[0], x[1], a[0], a[1]};
}

// Calls f(column element index, input element index) for every element of
// a window that falls inside the input, image n by image n (in parallel
// over images and channels: no two calls of one (n, c) share an input).
template <class F>
void for_each_tap(const Window& w, F&& f) {
  const detail::WindowAxis &a = w.h, &b = w.w;
  parallel_for(w.N * w.C, a.kernel * b.kernel * w.cols(), [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / w.C, c = nc % w.C;
      for (int64_t ki = 0; ki < a.kernel; ++ki)
        for (int64_t kj = 0; kj < b.kernel; ++kj) {
          const int64_t row = (c * a.kernel + ki) * b.kernel + kj;
          const int64_t col0 = (n * w.rows() + row) * w.cols();
          for (int64_t oh = 0; oh < a.out; ++oh) {
            const int64_t h = a.start(oh) + ki * a.dilation;
            if (h < 0 || h >= a.in) continue;
            for (int64_t ow = 0; ow < b.out; ++ow) {
              const int64_t x = b.start(ow) + kj * b.dilation;
              if (x < 0 || x >= b.in) continue;
              f(col0 + oh * b.out + ow, ((n * w.C + c) * a.in + h) * b.in + x);
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
  Tensor out = zeros({w.N, w.C, w.h.in, w.w.in}, cols.dtype());
  dispatch(cols.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = cols.data<T>();
    T* d = out.data<T>();
    for_each_tap(w, [&](int64_t col, int64_t in) { d[in] += s[col]; });
  });
  return record("fold2d", out, {cols}, [w](const Tensor& g) { return std::vector<Tensor>{unfold_window(g, w)}; });
}

}  // namespace

Tensor unfold2d(const Tensor& x, const UnfoldOptions& o) {
  check_defined(x, "unfold2d");
  return unfold_window(x, window_of("unfold2d", x.shape(), detail::spec_of_columns(o)));
}

Tensor fold2d(const Tensor& cols, const FoldOptions& o) {
  check_defined(cols, "fold2d");
  if (cols.dim() != 3)
    throw ShapeError("fold2d: expected columns (N, C kh kw, L), got " + shape_str(cols.shape()));
  const int64_t k = o.kernel_size()[0] * o.kernel_size()[1];
  if (k < 1 || cols.size(1) % k != 0)
    throw ShapeError(fmt::format("fold2d: columns {}: expected a dimension 1 divisible by the kernel's {} taps",
                                 shape_str(cols.shape()), k));
  const Shape image{cols.size(0), cols.size(1) / k, o.output_size()[0], o.output_size()[1]};
  const Window w = window_of("fold2d", image, detail::spec_of_columns(o));
  if (cols.shape() != Shape{w.N, w.rows(), w.cols()})
    throw ShapeError(fmt::format("fold2d: expected columns ({},{},{}) for the output size ({}, {}), got {}", w.N,
                                 w.rows(), w.cols(), image[2], image[3], shape_str(cols.shape())));
  return fold_window(cols, w);
}

namespace {

// The groups of a convolution with C input and O output channels.
void check_groups(const char* op, int64_t groups, int64_t C, int64_t O) {
  require(groups >= 1 && C % groups == 0 && O % groups == 0,
          fmt::format("{}: groups {} must be at least 1 and divide both the input channels ({}) and the output "
                      "channels ({})",
                      op, groups, C, O));
}

// The trace's view of a convolution's window and groups.
attr::Window traced_window(const std::vector<detail::WindowAxis>& axes, int64_t groups) {
  attr::Window t = detail::traced_window(axes);
  t.groups = groups;
  return t;
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
  return add_channel_bias("conv2d", reshape(y, {w.N, O, w.h.out, w.w.out}), bias);
}

engine::ConvGeometry geometry_of(const Window& w, int64_t O, int64_t G) {
  engine::ConvGeometry g;
  g.n = w.N, g.c = w.C, g.h = w.h.in, g.w = w.w.in;
  g.o = O, g.kh = w.h.kernel, g.kw = w.w.kernel, g.groups = G;
  g.sh = w.h.stride, g.sw = w.w.stride, g.dh = w.h.dilation, g.dw = w.w.dilation;
  g.pt = w.h.pad_before, g.pl = w.w.pad_before, g.pb = w.h.pad_after, g.pr = w.w.pad_after;
  g.ho = w.h.out, g.wo = w.w.out;
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
  void forward(const In* x, const In* w, const float* b, float* y, engine::ConvBlocks blocks = {}) const {
    over_chunks([&](int64_t, const engine::ConvGeometry& p, int64_t n0) {
      engine::conv_forward(p, x + n0 * g.c * g.h * g.w, w, b, y + n0 * g.o * g.ho * g.wo, blocks);
    });
  }
  // The layouts of the primitives of chunk 0 for an input in block xb
  // (engine::conv_blocks), or none (all 0) when results are not kept blocked.
  engine::ConvBlocks layouts(int xb) const {
    if (!engine::blocked_activations() || g.n == 0) return {};
    return engine::conv_blocks(chunk0(), xb, std::is_same_v<In, engine::bf16_t>);
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
    if (!dw) return engine::conv_backward_data(p, dyi, w, dxi, blocks);
    if (dxi) return engine::conv_backward(p, xi, w, dyi, dxi, pw, pb, blocks);
    engine::conv_backward_weights(p, xi, dyi, pw, pb, blocks);
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
  dc.backward(x, w, dy, detail::stored_view(gx).p, data_or_null<float>(w_out),
              data_or_null<float>(gb), blocks);
  return {gx, gw, gb};
}

// conv2d under Autocast(bf16): bf16 operands, float32 results. The input is
// saved as its bf16 copy, in the layout x has (blocked or not); the weight
// as itself, converted again in backward (as linear does). The result and
// the input's gradient stay blocked as float32 ones do (conv2d_direct).
Tensor conv2d_direct_bf16(const Tensor& x, const Tensor& weight, const Tensor& bias, const DirectConv<engine::bf16_t>& dc) {
  int xb = 0;
  auto x16 = saved_bf16(x, &xb);
  const int yb = dc.layouts(xb).y;
  const Shape ys{dc.g.n, dc.g.o, dc.g.ho, dc.g.wo};
  Tensor y = yb ? detail::make_blocked(ys, yb) : make_tensor(ys, f32);
  dc.forward(x16->data(), to_bf16(weight)->data(), data_or_null<float>(bias), detail::stored_view(y).p,
             {xb, yb, 0});
  return record(
      "conv2d", y, {x, weight, bias},
      [x16, xb, w = weight.detach(), dc, xs = x.shape(), has_b = bias.defined()](const Tensor& g) {
        if (grad_enabled()) throw_bf16_second_order("conv2d");
        // g as it is stored: its bf16 copy keeps that layout.
        int gb = 0;
        const auto g16 = to_bf16(g, &gb);
        return direct_backward<engine::bf16_t>(dc, x16->data(), to_bf16(w)->data(), g16->data(), xs, w.shape(),
                                               has_b, {xb, gb, dc.layouts(xb).dx});
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
  // blocked: the next op reads it as it is or converts it (detail::stored_view).
  const detail::StoredView vx = detail::stored_view(x);
  const int yb = dc.layouts(vx.block).y;
  const Shape ys{geo.n, geo.o, geo.ho, geo.wo};
  Tensor y = yb ? detail::make_blocked(ys, yb) : make_tensor(ys, f32);
  dc.forward(vx.p, weight.data<float>(), data_or_null<float>(bias), detail::stored_view(y).p, {vx.block, yb, 0});
  return record(
      "conv2d", y, {x, weight, bias},
      [x, weight, bias, dc, win, G](const Tensor& g) {
        if (grad_enabled())
          return detail::vjp_by_recompute(
              [win, G](const std::vector<Tensor>& in) { return conv2d_im2col(in[0], in[1], in[2], win, G); },
              {x, weight, bias}, g);
        // x and g as they are stored now (another op may have converted x since).
        const detail::StoredView vx = detail::stored_view(x), vg = detail::stored_view(g);
        return direct_backward<float>(dc, vx.p, weight.data<float>(), vg.p, x.shape(), weight.shape(),
                                      bias.defined(), {vx.block, vg.block, dc.layouts(vx.block).dx});
      },
      {x, weight});
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dFuncOptions& o) {
  check_defined(x, "conv2d");
  check_defined(weight, "conv2d");
  const int64_t G = o.groups();
  if (weight.dim() != 4 || x.dim() != 4 || G < 1 || weight.size(1) * G != x.size(1))
    throw ShapeError("conv2d: expected an input (N,C,H,W) and a weight (O,C/groups,kh,kw) with groups " +
                     std::to_string(G) + ", got " + shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  check_groups("conv2d", G, x.size(1), weight.size(0));
  const Window w = window_of("conv2d", x.shape(), detail::spec_of("conv2d", o, {weight.size(2), weight.size(3)}));
  // float64 stays on im2col: the oracle that gradchecks and parity tests read.
  const Tensor y = x.dtype() == f32 && engine::conv_available() ? conv2d_direct(x, weight, bias, w, G)
                                                                : conv2d_im2col(x, weight, bias, w, G);
  // Traced as one convolution, whichever path computed it.
  return detail::traced(y, [&](TracedOp& t) {
    t = TracedOp{"conv2d", t.scope, {x, weight, bias}, y, traced_window({w.h, w.w}, G), {}};
  });
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dFuncOptions& o) {
  check_defined(x, "conv1d");
  check_defined(weight, "conv1d");
  if (x.dim() != 3 || weight.dim() != 3)
    throw ShapeError("conv1d: expected an input (N,C,L) and a weight (O,C/groups,k), got " + shape_str(x.shape()) +
                     " and " + shape_str(weight.shape()));
  // Checked as 1-D (its messages name conv1d), then run as conv2d on a height of 1.
  const auto a = detail::window_axes("conv1d", {x.size(2)}, detail::spec_of("conv1d", o, {weight.size(2)}))[0];
  const auto o2 = Conv2dFuncOptions()
                      .stride({1, a.stride})
                      .padding(o.padding().same() ? ConvPadding<2>("same") : ConvPadding<2>({0, a.pad_before}))
                      .dilation({1, a.dilation})
                      .groups(o.groups());
  const Tensor y = squeeze(conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o2), 2);
  // Traced as one convolution on (N,C,L), not as the 2-D one it runs.
  return detail::traced(y, [&](TracedOp& t) {
    t = TracedOp{"conv1d", t.scope, {x, weight, bias}, y, traced_window({a}, o.groups()), {}};
  });
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dFuncOptions& o) {
  check_defined(x, "conv_transpose2d");
  check_defined(weight, "conv_transpose2d");
  if (weight.dim() != 4 || x.dim() != 4 || weight.size(0) != x.size(1))
    throw ShapeError("conv_transpose2d: expected an input (N,C,H,W) and a weight (C,O/groups,kh,kw) with the same C, "
                     "got " + shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), G = o.groups();
  const int64_t kh = weight.size(2), kw = weight.size(3), O = weight.size(1) * G;
  check_groups("conv_transpose2d", G, C, O);
  const auto sizes = detail::transposed_sizes("conv_transpose2d", {H, W}, {kh, kw}, o);
  const Shape out{N, O, sizes[0], sizes[1]};
  const auto &s = o.stride(), &p = o.padding(), &d = o.dilation(), &op = o.output_padding();
  // An output_padding at or past the stride (PyTorch allows it below the
  // dilation) leaves output rows that fold's window cannot place: then the
  // whole uncropped result is folded (padding 0), and the output cut from it,
  // rows past its end being zeros.
  const bool wide = op[0] >= s[0] || op[1] >= s[1];
  const WindowSpec spec{{kh, kw}, detail::values(s), wide ? std::vector<int64_t>{0, 0} : detail::values(p),
                        detail::values(d), {}, false, false};
  const Shape canvas =
      wide ? Shape{N, O, (H - 1) * s[0] + d[0] * (kh - 1) + 1, (W - 1) * s[1] + d[1] * (kw - 1) + 1} : out;
  const Window w = window_of("conv_transpose2d", canvas, spec);
  const int64_t R = O / G * kh * kw;  // one group's column length
  // Columns (N, O kh kw, H W): every input position spreads its channels
  // through the transposed weight, and fold2d sums the windows into place.
  Tensor cols = G == 1 ? matmul(transpose(reshape(weight, {C, R}), 0, 1), reshape(x, {N, C, H * W}))
                       : matmul(transpose(reshape(weight, {G, C / G, R}), 1, 2), reshape(x, {N, G, C / G, H * W}));
  Tensor folded = fold_window(reshape(cols, {N, G * R, H * W}), w);
  if (wide)  // rows [padding, padding + out) of the canvas, zeros past it
    folded = pad(folded, {-p[1], p[1] + out[3] - canvas[3], -p[0], p[0] + out[2] - canvas[2]});
  const Tensor y = add_channel_bias("conv_transpose2d", folded, bias);
  // Traced as one op, whatever it is composed of.
  return detail::traced(y, [&](TracedOp& t) {
    attr::Window traced;
    traced.stride = detail::values(s), traced.pad_begin = traced.pad_end = detail::values(p);
    traced.dilation = detail::values(d), traced.output_padding = detail::values(op), traced.groups = G;
    t = TracedOp{"conv_transpose2d", t.scope, {x, weight, bias}, y, traced, {}};
  });
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dFuncOptions& o) {
  check_defined(x, "conv_transpose1d");
  check_defined(weight, "conv_transpose1d");
  if (x.dim() != 3 || weight.dim() != 3)
    throw ShapeError("conv_transpose1d: expected an input (N,C,L) and a weight (C,O/groups,k), got " +
                     shape_str(x.shape()) + " and " + shape_str(weight.shape()));
  // Checked as 1-D (its messages name conv_transpose1d), then run on a height of 1.
  const auto o2 = ConvTranspose2dFuncOptions()
                      .stride({1, o.stride()[0]})
                      .padding({0, o.padding()[0]})
                      .output_padding({0, o.output_padding()[0]})
                      .groups(o.groups())
                      .dilation({1, o.dilation()[0]});
  detail::transposed_sizes("conv_transpose1d", {x.size(2)}, {weight.size(2)}, o);
  return squeeze(conv_transpose2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o2), 2);
}

}  // namespace xg
