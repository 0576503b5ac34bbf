// Images as ONNX (opset 17): convolutions, pooling and batch norm, each one
// traced op (autograd/ops_conv.cpp, ops_pool.cpp, ops_norm.cpp give their
// windows as `ints`) mapped to one ONNX operator. Group norm needs nothing
// here: it is traced as reshape, layer_norm and a per-channel affine, which
// export as they are (GroupNormalization itself is opset 18).
#include <string>

#include "autograd/ops.h"
#include "onnx/detail/graph.h"
#include "onnx/export.h"

namespace xg::onnx::detail {

namespace {

// " (in Conv2d(...) 'conv1')", or "" when no module ran the op.

// One spatial axis of a window's output: fixed when its input is; on an
// axis that may change, the same name when the window keeps the size
// (stride 1, padding = the dilated kernel's reach), else a name of its own.
Dim window_axis(const Dim& in, int64_t out, int64_t stride, int64_t pads, int64_t reach, const std::string& op) {
  if (in.sym.empty()) return {out, ""};
  if (stride == 1 && pads == reach) return {out, in.sym};
  return {out, op + "(" + in.sym + ")"};
}

// (N, C, spatial...) -> (N, O, spatial'...): the batch kept, the channels
// fixed, each spatial axis by window_axis. k = per axis kernel, stride,
// pads begin + end and dilation.
Dims window_dims(const OpContext& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                 const std::vector<int64_t>& pads, const std::vector<int64_t>& dilation) {
  const Dims& x = c.in[0].dims;
  const Shape& y = c.op.output.shape();
  Dims out{x[0], {y[1], ""}};
  const size_t n = kernel.size();
  for (size_t i = 0; i < n; ++i)
    out.push_back(window_axis(x[2 + i], y[2 + i], stride[i], pads[i] + pads[n + i], dilation[i] * (kernel[i] - 1),
                              c.op.op));
  return out;
}

// ONNX's pads: every axis's begin, then every axis's end.
std::vector<int64_t> onnx_pads(const attr::Window& w) {
  std::vector<int64_t> pads = w.pad_begin;
  pads.insert(pads.end(), w.pad_end.begin(), w.pad_end.end());
  return pads;
}

// conv2d and conv1d (the kernel is the weight's).
Value conv(const OpContext& c) {
  const attr::Window& w = c.op.attr<attr::Window>();
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < c.in[1].dims.size(); ++i) kernel.push_back(c.in[1].dims[i].size);
  const std::vector<int64_t> pads = onnx_pads(w);
  std::vector<std::string> in{c.in[0].name, c.in[1].name};
  if (!c.in[2].name.empty()) in.push_back(c.in[2].name);
  const std::string y = c.b.node("Conv", in, [&](pb::NodeProto& n) {
    set_ints(n, "kernel_shape", kernel);
    set_ints(n, "strides", w.stride);
    set_ints(n, "pads", pads);
    set_ints(n, "dilations", w.dilation);
    set_int(n, "group", w.groups);
  });
  return Value{y, window_dims(c, kernel, w.stride, pads, w.dilation)};
}

// conv_transpose2d. The output's spatial axes are fixed: a transposed
// window's size is no single axis of the input's.
Value conv_transpose2d(const OpContext& c) {
  const attr::Window& w = c.op.attr<attr::Window>();
  for (size_t i = 2; i < 4; ++i)
    if (!c.in[0].dims[i].sym.empty())
      throw ExportError("export_model: conv_transpose2d" + in_module(c.op) + " on " + dims_str(c.in[0].dims) +
                        ": the image's height and width must be fixed (only the batch may change)");
  // PyTorch allows an output_padding below the stride or the dilation;
  // ONNX Runtime's ConvTranspose refuses one that is not below the stride
  for (size_t a = 0; a < w.output_padding.size(); ++a)
    if (w.output_padding[a] >= w.stride[a])
      throw ExportError("export_model: conv_transpose2d" + in_module(c.op) + " with output_padding " +
                        window_impl::tuple_text(w.output_padding) + " not below its stride " +
                        window_impl::tuple_text(w.stride) + ": ONNX Runtime's ConvTranspose refuses it");
  std::vector<std::string> in{c.in[0].name, c.in[1].name};
  if (!c.in[2].name.empty()) in.push_back(c.in[2].name);
  const std::string y = c.b.node("ConvTranspose", in, [&](pb::NodeProto& n) {
    set_ints(n, "kernel_shape", {c.in[1].dims[2].size, c.in[1].dims[3].size});
    set_ints(n, "strides", w.stride);
    set_ints(n, "pads", onnx_pads(w));
    set_ints(n, "output_padding", w.output_padding);
    set_ints(n, "dilations", w.dilation);
    set_int(n, "group", w.groups);
  });
  const Shape& s = c.op.output.shape();
  return Value{y, {c.in[0].dims[0], {s[1], ""}, {s[2], ""}, {s[3], ""}}};
}

Value max_pool2d(const OpContext& c) {
  const attr::Window& w = c.op.attr<attr::Window>();
  const std::vector<int64_t> pads = onnx_pads(w);
  const std::string y = c.b.node("MaxPool", {c.in[0].name}, [&](pb::NodeProto& n) {
    set_ints(n, "kernel_shape", w.kernel);
    set_ints(n, "strides", w.stride);
    set_ints(n, "pads", pads);
    set_ints(n, "dilations", w.dilation);
    set_int(n, "ceil_mode", w.ceil_mode ? 1 : 0);
  });
  return Value{y, window_dims(c, w.kernel, w.stride, pads, w.dilation)};
}

// avg_pool2d; ONNX's AveragePool has no divisor_override: refused.
Value avg_pool2d(const OpContext& c) {
  const attr::Window& w = c.op.attr<attr::Window>();
  if (w.divisor_override)
    throw ExportError("export_model: avg_pool2d" + in_module(c.op) + " with divisor_override " +
                      std::to_string(w.divisor_override) + ": ONNX's AveragePool divides by the window's size");
  const std::vector<int64_t> pads = onnx_pads(w);
  const std::string y = c.b.node("AveragePool", {c.in[0].name}, [&](pb::NodeProto& n) {
    set_ints(n, "kernel_shape", w.kernel);
    set_ints(n, "strides", w.stride);
    set_ints(n, "pads", pads);
    set_int(n, "ceil_mode", w.ceil_mode ? 1 : 0);
    set_int(n, "count_include_pad", w.count_include_pad ? 1 : 0);
  });
  return Value{y, window_dims(c, w.kernel, w.stride, pads, {1, 1})};
}

// adaptive_avg_pool2d (to the output's height and width): to 1x1 it is
// GlobalAveragePool; to a size that divides the input's, AveragePool with
// equal windows side by side. Other sizes average windows of unequal
// sizes, which no ONNX pooling writes: refused.
Value adaptive_avg_pool2d(const OpContext& c) {
  const Dims& x = c.in[0].dims;
  const int64_t oh = c.op.attr<attr::OutputSize>().size.at(0), ow = c.op.attr<attr::OutputSize>().size.at(1);
  const Dims out{x[0], x[1], {oh, ""}, {ow, ""}};
  if (oh == 1 && ow == 1) return Value{c.b.node("GlobalAveragePool", {c.in[0].name}), out};
  const bool fixed = x[2].sym.empty() && x[3].sym.empty();
  if (!fixed || x[2].size % oh != 0 || x[3].size % ow != 0)
    throw ExportError("export_model: adaptive_avg_pool2d" + in_module(c.op) + " from " + dims_str(x) + " to " +
                      std::to_string(oh) + "x" + std::to_string(ow) +
                      ": ONNX pools equal windows only; the output size must be 1x1 or divide the input's "
                      "fixed height and width");
  const std::vector<int64_t> k{x[2].size / oh, x[3].size / ow};
  const std::string y = c.b.node("AveragePool", {c.in[0].name}, [&](pb::NodeProto& n) {
    set_ints(n, "kernel_shape", k);
    set_ints(n, "strides", k);
  });
  return Value{y, out};
}

// batch_norm in evaluation (x, running_mean, running_var, weight, bias;
// reals = eps): BatchNormalization on the running statistics. A layer
// without a learned scale or shift gets ones or zeros (the operator needs both).
Value batch_norm(const OpContext& c) {
  const int64_t C = c.op.inputs[0].size(1);
  const Dtype d = c.op.output.dtype();
  const std::string scale = c.in[3].name.empty() ? c.b.constant(ones({C}, d)) : c.in[3].name;
  const std::string shift = c.in[4].name.empty() ? c.b.constant(zeros({C}, d)) : c.in[4].name;
  const double eps = c.op.attr<attr::Scalar>().value;
  const std::string y = c.b.node("BatchNormalization", {c.in[0].name, scale, shift, c.in[1].name, c.in[2].name},
                                 [&](pb::NodeProto& n) { set_float(n, "epsilon", eps); });
  return Value{y, c.in[0].dims};
}

}  // namespace

void add_vision_emitters(std::map<std::string, Emitter>& table) {
  add_emitter(table, "conv2d", conv);
  add_emitter(table, "conv1d", conv);
  add_emitter(table, "conv_transpose2d", conv_transpose2d);
  add_emitter(table, "max_pool2d", max_pool2d);
  add_emitter(table, "avg_pool2d", avg_pool2d);
  add_emitter(table, "adaptive_avg_pool2d", adaptive_avg_pool2d);
  add_emitter(table, "batch_norm", batch_norm);
}

}  // namespace xg::onnx::detail
