// Unpooling, the legacy cross-map response norm, bags of embeddings and the
// 3-D convolution, composed of xgrad's ops (so every order of gradient
// follows from theirs).
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/detail/window.h"
#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg {

Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& output_size) {
  const char* op = "max_unpool";
  check_defined(x, op);
  check_defined_any(indices, op);
  const int64_t dims = static_cast<int64_t>(output_size.size());
  if (dims < 1 || dims > 3 || x.dim() != dims + 2 || indices.dtype() != Dtype::i64 || indices.shape() != x.shape())
    throw ShapeError(fmt::format("{}: expected an input (N,C,...) with {} spatial dimensions and int64 indices of its "
                                 "shape, got {} and {} {}",
                                 op, dims, shape_str(x.shape()), dtype_name(indices.dtype()),
                                 shape_str(indices.shape())));
  for (int64_t n : output_size)
    if (n < 0)
      throw ShapeError(fmt::format("{}: output size {}: expected each at least 0 (the default size (in - 1) stride "
                                   "- 2 padding + kernel_size is negative where the padding is too large)",
                                   op, shape_str(output_size)));
  const int64_t planes = x.size(0) * x.size(1), per_in = x.numel() / std::max<int64_t>(planes, 1);
  const int64_t per_out = shape_numel(output_size);
  auto idx = std::make_shared<std::vector<int64_t>>();
  idx->reserve(static_cast<size_t>(x.numel()));
  const int64_t* pi = indices.data<int64_t>();
  for (int64_t e = 0; e < x.numel(); ++e) {
    if (pi[e] < 0 || pi[e] >= per_out)
      throw ShapeError(fmt::format("{}: index {} at position {} is outside the output plane of {} positions {}", op,
                                   pi[e], e, per_out, shape_str(output_size)));
    idx->push_back(e / per_in * per_out + pi[e]);
  }
  Shape out{x.size(0), x.size(1)};
  out.insert(out.end(), output_size.begin(), output_size.end());
  // each value added at its position of zeros (a repeated index adds up)
  return detail::put_add(reshape(x, {x.numel()}), idx, out);
}

Tensor cross_map_lrn2d(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  const char* op = "cross_map_lrn2d";
  check_defined(x, op);
  if (x.dim() != 4) throw ShapeError(fmt::format("{}: expected an input (N,C,H,W), got {}", op, shape_str(x.shape())));
  require(size >= 1, fmt::format("{}: size {}: expected >= 1", op, size));
  // PyTorch's CrossMapLRN2d builds each channel's window from the previous
  // one: the next channel added while c < C - pre_pad + 1, the one pre_pad
  // back removed only while c > pre_pad (so channel 0 stays in the windows
  // from channel pre_pad on). The windows as a (C, C) matrix of ones.
  const int64_t C = x.size(1), pre = (size - 1) / 2 + 1;
  std::vector<double> in(static_cast<size_t>(C), 0.0), m(static_cast<size_t>(C * C), 0.0);
  for (int64_t c = 0; c < std::min(pre, C); ++c) in[c] = 1;
  for (int64_t c = 0; c < C; ++c) {
    if (c > 0) {
      if (c < C - pre + 1) in[c + pre - 1] += 1;
      if (c > pre) in[c - pre] -= 1;
    }
    for (int64_t j = 0; j < C; ++j) m[c * C + j] = in[j];
  }
  const Tensor window = from_vector(m, {C, C}, x.dtype());
  const Autocast full(Precision::f32);  // a sum over channels, float32 under Autocast too (as PyTorch's)
  const Tensor sq = permute(x * x, {0, 2, 3, 1});                          // (N,H,W,C)
  const Tensor scale = permute(matmul(sq, transpose(window, 0, 1)), {0, 3, 1, 2});  // (N,C,H,W)
  return x * pow(scale * (alpha / static_cast<double>(size)) + k, -beta);
}

namespace {

// Each bag's first position in the flat ids: every L-th of (B, L) ids, or
// the offsets (checked), the last one dropped with include_last_offset.
std::vector<int64_t> bag_starts(const Tensor& ids, const Tensor& offsets, bool include_last_offset) {
  const char* op = "embedding_bag";
  const int64_t n = ids.numel();
  std::vector<int64_t> starts;
  if (ids.dim() == 2) {
    if (offsets.defined()) throw ShapeError("embedding_bag: offsets go with 1-D ids, not (B, L)");
    for (int64_t b = 0; b < ids.size(0); ++b) starts.push_back(b * ids.size(1));
    return starts;
  }
  if (!offsets.defined() || offsets.dtype() != Dtype::i64 || offsets.dim() != 1)
    throw ShapeError("embedding_bag: 1-D ids need int64 offsets (B), each bag's start");
  const int64_t* po = offsets.data<int64_t>();
  starts.assign(po, po + offsets.numel());
  if (include_last_offset && !starts.empty()) starts.pop_back();
  for (size_t b = 0; b < starts.size(); ++b)
    if (starts[b] < 0 || starts[b] > n || (b > 0 && starts[b] < starts[b - 1]))
      throw ShapeError(fmt::format("{}: offsets must rise from 0 within the {} ids, got {} at bag {}", op, n,
                                   starts[b], b));
  return starts;
}

}  // namespace

Tensor embedding_bag(const Tensor& ids, const Tensor& weight, const Tensor& offsets, const std::string& mode,
                     const Tensor& per_sample_weights, bool include_last_offset,
                     std::optional<int64_t> padding_idx) {
  const char* op = "embedding_bag";
  check_defined(weight, op);
  check_defined_any(ids, op);
  require(mode == "sum" || mode == "mean" || mode == "max",
          "embedding_bag: mode '" + mode + "': expected 'sum', 'mean' or 'max'");
  if (ids.dtype() != Dtype::i64 || (ids.dim() != 1 && ids.dim() != 2) || weight.dim() != 2)
    throw ShapeError(fmt::format("{}: expected int64 ids (B, L) or (N) with offsets, and a weight (V, C), got {} {} "
                                 "and {}",
                                 op, dtype_name(ids.dtype()), shape_str(ids.shape()), shape_str(weight.shape())));
  const int64_t n = ids.numel();
  const std::vector<int64_t> starts = bag_starts(ids, offsets, include_last_offset);
  if (per_sample_weights.defined() && (mode != "sum" || per_sample_weights.shape() != ids.shape()))
    throw ShapeError("embedding_bag: per_sample_weights (of the ids' shape) go with mode 'sum' only");
  const int64_t B = static_cast<int64_t>(starts.size()), C = weight.size(1);
  const int64_t pad = padding_index(op, padding_idx, weight.size(0)).value_or(-1);  // -1: no id equals it
  const int64_t* pi = ids.data<int64_t>();
  auto bag_end = [&](int64_t b) {
    return b + 1 < B ? starts[b + 1] : (ids.dim() == 2 ? (b + 1) * ids.size(1) : n);
  };
  if (mode == "max") {
    const Tensor rows = gather_rows(weight, reshape(ids, {n}));  // (n, C)
    std::vector<Tensor> bags;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int64_t> keep;
      for (int64_t i = starts[b]; i < bag_end(b); ++i)
        if (pi[i] != pad) keep.push_back(i);
      bags.push_back(keep.empty() ? zeros({1, C}, weight.dtype())
                                  : max(index_select(rows, 0, from_ints(keep, {static_cast<int64_t>(keep.size())})),
                                        {0}, true));
    }
    return concat(bags, 0);  // (B, C); an empty bag is zeros
  }
  // Each kept id's row, times its per-sample weight (sum) or 1/count (mean),
  // added into its bag's row of the (B, C) result: put_add, whose backward
  // gathers (a dense (B, n) matrix of weights would take B n values).
  std::vector<int64_t> keep, kept_ids;
  std::vector<double> factor;
  auto into = std::make_shared<std::vector<int64_t>>();  // each kept value's flat position in (B, C)
  for (int64_t b = 0; b < B; ++b) {
    int64_t count = 0;
    for (int64_t i = starts[b]; i < bag_end(b); ++i) count += pi[i] != pad;
    for (int64_t i = starts[b]; i < bag_end(b); ++i) {
      if (pi[i] == pad) continue;
      keep.push_back(i), kept_ids.push_back(pi[i]);
      factor.push_back(1.0 / static_cast<double>(count));
      for (int64_t c = 0; c < C; ++c) into->push_back(b * C + c);
    }
  }
  const int64_t k = static_cast<int64_t>(keep.size());
  Tensor kept = gather_rows(weight, from_ints(kept_ids, {k}));  // (k, C)
  if (per_sample_weights.defined())
    kept = kept * unsqueeze(index_select(reshape(per_sample_weights, {n}), 0, from_ints(keep, {k})), 1);
  if (mode == "mean") kept = kept * from_vector(factor, {k, 1}, weight.dtype());
  return detail::put_add(kept, into, {B, C});  // (B, C); an empty bag is zeros
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv3dFuncOptions& o) {
  const char* op = "conv3d";
  check_defined(x, op);
  check_defined(weight, op);
  const int64_t groups = o.groups();
  if (x.dim() != 5 || weight.dim() != 5 || groups < 1 || weight.size(1) * groups != x.size(1))
    throw ShapeError(fmt::format("{}: expected an input (N,C,D,H,W) and a weight (O,C/groups,kd,kh,kw) with groups "
                                 "{}, got {} and {}",
                                 op, groups, shape_str(x.shape()), shape_str(weight.shape())));
  const auto axes = detail::window_axes(op, {x.size(2), x.size(3), x.size(4)},
                                        detail::spec_of(op, o, {weight.size(2), weight.size(3), weight.size(4)}));
  const detail::WindowAxis& depth = axes[0];
  const int64_t kd = depth.kernel, Do = depth.out;
  // the depth padded with zeros, then each output depth a sum of 2-D convolutions over the kernel's depth
  const Tensor xp = depth.pad_before || depth.pad_after ? pad(x, {0, 0, 0, 0, depth.pad_before, depth.pad_after}) : x;
  const auto o2 = Conv2dFuncOptions()
                      .stride({axes[1].stride, axes[2].stride})
                      .padding(o.padding().same() ? ConvPadding<2>("same")
                                                  : ConvPadding<2>({axes[1].pad_before, axes[2].pad_before}))
                      .dilation({axes[1].dilation, axes[2].dilation})
                      .groups(groups);
  std::vector<Tensor> depths;
  for (int64_t d = 0; d < Do; ++d) {
    Tensor acc;
    for (int64_t j = 0; j < kd; ++j) {
      const int64_t at = d * depth.stride + j * depth.dilation;
      const Tensor y = conv2d(squeeze(slice(xp, 2, at, at + 1), 2), squeeze(slice(weight, 2, j, j + 1), 2), Tensor(), o2);
      acc = acc.defined() ? acc + y : y;
    }
    depths.push_back(acc);  // (N,O,Ho,Wo)
  }
  Tensor out = stack(depths, 2);  // (N,O,Do,Ho,Wo)
  if (bias.defined()) {
    if (bias.shape() != Shape{weight.size(0)})
      throw ShapeError(fmt::format("{}: expected a bias ({},), got {}", op, weight.size(0), shape_str(bias.shape())));
    out = out + reshape(bias, {1, weight.size(0), 1, 1, 1});
  }
  return out;
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose3dFuncOptions& o) {
  const char* op = "conv_transpose3d";
  check_defined(x, op);
  check_defined(weight, op);
  if (x.dim() != 5 || weight.dim() != 5 || weight.size(0) != x.size(1))
    throw ShapeError(fmt::format("{}: expected an input (N,C,D,H,W) and a weight (C,O/groups,kd,kh,kw) with the same "
                                 "C, got {} and {}",
                                 op, shape_str(x.shape()), shape_str(weight.shape())));
  const auto s = detail::values(o.stride()), p = detail::values(o.padding()), d = detail::values(o.dilation());
  const auto out_pad = detail::values(o.output_padding());
  const int64_t D = x.size(2), kd = weight.size(2);
  const int64_t Do = detail::transposed_sizes(op, {D, x.size(3), x.size(4)},
                                              {kd, weight.size(3), weight.size(4)}, o)[0];  // checks every axis
  const auto o2 = ConvTranspose2dFuncOptions()
                      .stride({s[1], s[2]})
                      .padding({p[1], p[2]})
                      .output_padding({out_pad[1], out_pad[2]})
                      .groups(o.groups())
                      .dilation({d[1], d[2]});
  // Input depth i through kernel depth j lands on output depth i s - p + j d:
  // each a 2-D transposed convolution, summed where they meet.
  std::vector<Tensor> depths(static_cast<size_t>(Do));
  for (int64_t i = 0; i < D; ++i)
    for (int64_t j = 0; j < kd; ++j) {
      const int64_t z = i * s[0] - p[0] + j * d[0];
      if (z < 0 || z >= Do) continue;
      const Tensor y = conv_transpose2d(squeeze(slice(x, 2, i, i + 1), 2), squeeze(slice(weight, 2, j, j + 1), 2),
                                        Tensor(), o2);
      depths[z] = depths[z].defined() ? depths[z] + y : y;
    }
  // A depth no tap reaches (output_padding at the end, or a stride past the
  // kernel) is zeros; when no depth is reached at all, zeros made from a
  // plane of the inputs, so that the output still depends on them (as
  // PyTorch's does, its gradient zero).
  Tensor plane;
  for (const Tensor& t : depths)
    if (t.defined()) plane = t;
  const bool none_reached = !plane.defined();
  if (none_reached)
    plane = conv_transpose2d(squeeze(slice(x, 2, 0, 1), 2), squeeze(slice(weight, 2, 0, 1), 2), Tensor(), o2) * 0.0;
  for (Tensor& t : depths)
    if (!t.defined()) t = none_reached ? plane : zeros(plane.shape(), x.dtype());
  Tensor out = stack(depths, 2);  // (N,O,Do,Ho,Wo)
  const int64_t O = out.size(1);
  if (bias.defined()) {
    if (bias.shape() != Shape{O})
      throw ShapeError(fmt::format("{}: expected a bias ({},), got {}", op, O, shape_str(bias.shape())));
    out = out + reshape(bias, {1, O, 1, 1, 1});
  }
  return out;
}

}  // namespace xg
