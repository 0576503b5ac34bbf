// Shape ops. reshape shares storage; everything else copies into a new
// contiguous tensor (tensors are always contiguous row-major).
#include <cstring>
#include <numeric>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/ops.h"

namespace xg {

namespace {

// dst (contiguous, `shape`) = src read at `offset` with `strides`.
Tensor gather_strided(const Tensor& src, const Shape& shape, int64_t offset, const std::vector<int64_t>& strides) {
  Tensor out = make_tensor(shape, src.dtype());
  // Nothing to copy; and the rows below would be memcpy'd with length 0 from
  // a source that may be null (an empty from_blob tensor).
  if (out.numel() == 0) return out;
  dispatch_any(src.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = src.data<T>() + offset;
    T* d = out.data<T>();
    if (shape.empty()) {
      d[0] = s[0];
      return;
    }
    // Row by row: rows stay contiguous (the head permute (B,T,H,D)->(B,H,T,D)),
    // repeat one value (broadcasting a column or a scalar), or step through.
    Shape rows(shape.begin(), shape.end() - 1);
    std::vector<int64_t> rs(strides.begin(), strides.end() - 1);
    rows.push_back(1);
    rs.push_back(0);
    const int64_t len = shape.back(), step = strides.back();
    detail::parallel_for_each_strided<1>(rows, {&rs}, len, [&](int64_t r, const std::array<int64_t, 1>& off) {
      T* dst = d + r * len;
      const T* src = s + off[0];
      if (step == 1) std::memcpy(dst, src, len * sizeof(T));
      else if (step == 0) std::fill(dst, dst + len, *src);
      else
        for (int64_t j = 0; j < len; ++j) dst[j] = src[j * step];
    });
  });
  return out;
}

// dst[offset + strides . idx] += src[idx]: the adjoint of gather_strided.
void scatter_add_strided(const Tensor& src, Tensor& dst, int64_t offset, const std::vector<int64_t>& strides) {
  dispatch_any(src.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* s = src.data<T>();
    T* d = dst.data<T>() + offset;
    detail::for_each_strided<1>(src.shape(), {&strides}, [&](int64_t o, const std::array<int64_t, 1>& off) { d[off[0]] += s[o]; });
  });
}

// The adjoint pair as ops, each the other's backward: what slice's
// gradient is built from when it must be differentiable (second order).
Tensor scatter_strided_op(const Tensor& g, const Shape& in, int64_t offset, const std::vector<int64_t>& strides);
Tensor gather_strided_op(const Tensor& x, const Shape& shape, int64_t offset, const std::vector<int64_t>& strides) {
  Tensor out = gather_strided(x, shape, offset, strides);
  return record("slice", out, {x}, [in = x.shape(), offset, strides](const Tensor& g) {
    return std::vector<Tensor>{scatter_strided_op(g, in, offset, strides)};
  });
}
Tensor scatter_strided_op(const Tensor& g, const Shape& in, int64_t offset, const std::vector<int64_t>& strides) {
  Tensor out = zeros(in, g.dtype());
  scatter_add_strided(g, out, offset, strides);
  return record("slice_backward", out, {g}, [shape = g.shape(), offset, strides](const Tensor& gg) {
    return std::vector<Tensor>{gather_strided_op(gg, shape, offset, strides)};
  });
}

}  // namespace

namespace detail {

Tensor take(const Tensor& x, const Index& idx, const Shape& shape) {
  Tensor out = make_tensor(shape, x.dtype());
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for (size_t j = 0; j < idx->size(); ++j) po[j] = px[(*idx)[j]];
  });
  return record("take", out, {x}, [idx, in = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{put_add(g, idx, in)};
  });
}

Tensor put_add(const Tensor& g, const Index& idx, const Shape& shape) {
  Tensor out = zeros(shape, g.dtype());
  dispatch(g.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.data<T>();
    T* po = out.data<T>();
    for (size_t j = 0; j < idx->size(); ++j) po[(*idx)[j]] += pg[j];
  });
  return record("put_add", out, {g}, [idx, gs = g.shape()](const Tensor& gg) {
    return std::vector<Tensor>{take(gg, idx, gs)};
  });
}

}  // namespace detail

Tensor reshape(const Tensor& a, const Shape& shape) {
  check_defined_any(a, "reshape");
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: more than one -1 in " + shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      throw ShapeError("reshape: negative dimension in " + shape_str(shape));
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.numel() % known != 0)
      throw ShapeError("reshape: cannot reshape " + shape_str(a.shape()) + " (" + std::to_string(a.numel()) +
                       " elements) into " + shape_str(shape));
    s[infer] = a.numel() / known;
  }
  if (shape_numel(s) != a.numel())
    throw ShapeError("reshape: cannot reshape " + shape_str(a.shape()) + " (" + std::to_string(a.numel()) +
                     " elements) into " + shape_str(shape) + " (" + std::to_string(shape_numel(s)) + " elements)");
  if (s == a.shape()) return a;
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = s;
  impl->dtype = a.dtype();
  impl->buf = a.impl()->buf;
  return record("reshape", Tensor(std::move(impl)), {a},
                [in = a.shape()](const Tensor& g) { return std::vector<Tensor>{reshape(g, in)}; });
}

Tensor permute(const Tensor& a, const std::vector<int64_t>& perm) {
  const int64_t nd = check_defined_any(a, "permute").dim();
  std::string what = "permute: " + [&] {
    std::string r = "(";
    for (size_t i = 0; i < perm.size(); ++i) r += (i ? "," : "") + std::to_string(perm[i]);
    return r + ")";
  }() + " is not a permutation of the " + std::to_string(nd) + " axes of " + shape_str(a.shape());
  if (static_cast<int64_t>(perm.size()) != nd) throw ShapeError(what);
  std::vector<int64_t> p(nd), inv(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    if (perm[i] < -nd || perm[i] >= nd) throw ShapeError(what);
    p[i] = perm[i] < 0 ? perm[i] + nd : perm[i];
    if (inv[p[i]] >= 0) throw ShapeError(what);
    inv[p[i]] = i;
  }
  bool identity = true;
  for (int64_t i = 0; i < nd; ++i) identity = identity && p[i] == i;
  if (identity) return a;
  auto in_strides = contiguous_strides(a.shape());
  Shape out_shape(nd);
  std::vector<int64_t> strides(nd);
  for (int64_t i = 0; i < nd; ++i) {
    out_shape[i] = a.shape()[p[i]];
    strides[i] = in_strides[p[i]];
  }
  Tensor out = gather_strided(a, out_shape, 0, strides);
  return detail::traced(
      record("permute", out, {a}, [inv](const Tensor& g) { return std::vector<Tensor>{permute(g, inv)}; }),
      [&p](TracedOp& t) { t.attrs = attr::Permutation{p}; });
}

Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1) {
  const int64_t nd = check_defined_any(a, "transpose").dim();
  int64_t x = normalize_axis(axis0, nd, "transpose"), y = normalize_axis(axis1, nd, "transpose");
  std::vector<int64_t> p(nd);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[x], p[y]);
  return permute(a, p);
}

Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "slice").dim(), "slice");
  if (step <= 0) throw ShapeError("slice: step must be positive, got " + std::to_string(step));
  const int64_t n = a.shape()[ax];
  auto clampi = [n](int64_t i) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };
  int64_t b = clampi(start), e = clampi(end);
  int64_t len = e > b ? (e - b + step - 1) / step : 0;
  Shape out_shape = a.shape();
  out_shape[ax] = len;
  auto strides = contiguous_strides(a.shape());
  const int64_t offset = b * strides[ax];
  strides[ax] *= step;
  Tensor out = gather_strided(a, out_shape, offset, strides);
  Tensor r = record("slice", out, {a}, [in = a.shape(), offset, strides](const Tensor& g) {
    return std::vector<Tensor>{scatter_strided_op(g, in, offset, strides)};  // an op: the second order follows
  });
  // The bounds as given (Python's): clamped, they would fix the length in a trace.
  return detail::traced(r, [=](TracedOp& t) { t.attrs = attr::Slice{ax, start, end, step}; });
}

Tensor slice_like(const Tensor& a, int64_t axis, const Tensor& like, int64_t like_axis) {
  const int64_t la = normalize_axis(like_axis, check_defined_any(like, "slice_like").dim(), "slice_like");
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "slice_like").dim(), "slice_like");
  const int64_t n = like.shape()[la];
  if (n > a.shape()[ax])
    throw ShapeError("slice_like: " + shape_str(like.shape()) + " has " + std::to_string(n) + " on axis " +
                     std::to_string(la) + ", more than the " + std::to_string(a.shape()[ax]) + " of " +
                     shape_str(a.shape()) + " on axis " + std::to_string(ax));
  // The length as read from `like` in a graph: its extra tensor and axis.
  return detail::traced(slice(a, ax, 0, n), [&](TracedOp& t) {
    std::get<attr::Slice>(t.attrs).like_axis = la;
    t.extra = {like};
  });
}

Tensor concat(const std::vector<Tensor>& ts, int64_t axis) {
  if (ts.empty()) throw ShapeError("concat: no tensors given");
  const Tensor& t0 = check_defined_any(ts[0], "concat");
  const int64_t ax = normalize_axis(axis, t0.dim(), "concat");
  Shape out_shape = t0.shape();
  out_shape[ax] = 0;
  for (size_t k = 0; k < ts.size(); ++k) {
    const Tensor& t = check_defined_any(ts[k], "concat");
    detail::check_same_dtype(t0, t, "concat");
    bool ok = t.dim() == t0.dim();
    for (int64_t i = 0; ok && i < t0.dim(); ++i) ok = i == ax || t.shape()[i] == t0.shape()[i];
    if (!ok)
      throw ShapeError("concat: tensor " + std::to_string(k) + " has shape " + shape_str(t.shape()) +
                       ", which does not match tensor 0's " + shape_str(t0.shape()) + " outside axis " +
                       std::to_string(axis));
    out_shape[ax] += t.shape()[ax];
  }
  Tensor out = make_tensor(out_shape, t0.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= out_shape[i];
  for (int64_t i = ax + 1; i < t0.dim(); ++i) inner *= out_shape[i];
  std::vector<int64_t> sizes;
  dispatch_any(t0.dtype(), [&](auto z) {
    using T = decltype(z);
    T* d = out.data<T>();
    const int64_t row = out_shape[ax] * inner;
    int64_t col = 0;
    for (const Tensor& t : ts) {
      const int64_t w = t.shape()[ax] * inner;
      const T* s = t.data<T>();
      sizes.push_back(t.shape()[ax]);
      if (w == 0) continue;  // an empty tensor's data may be null: memcpy must not see it
      for (int64_t o = 0; o < outer; ++o) std::memcpy(d + o * row + col, s + o * w, w * sizeof(T));
      col += w;
    }
  });
  return detail::traced(record("concat", out, ts, [sizes, ax](const Tensor& g) { return split(g, sizes, ax); }),
                        [ax](TracedOp& t) { t.attrs = attr::Axis{ax}; });
}

Tensor stack(const std::vector<Tensor>& ts, int64_t axis) {
  if (ts.empty()) throw ShapeError("stack: no tensors given");
  const int64_t ax = normalize_axis(axis, check_defined_any(ts[0], "stack").dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t k = 0; k < ts.size(); ++k) {
    if (check_defined_any(ts[k], "stack").shape() != ts[0].shape())
      throw ShapeError("stack: tensor " + std::to_string(k) + " has shape " + shape_str(ts[k].shape()) +
                       ", expected tensor 0's " + shape_str(ts[0].shape()));
    us.push_back(unsqueeze(ts[k], ax));
  }
  return concat(us, ax);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t axis) {
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "split").dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw ShapeError("split: negative size " + std::to_string(s));
    total += s;
  }
  if (total != a.shape()[ax])
    throw ShapeError("split: sizes add up to " + std::to_string(total) + " but axis " + std::to_string(axis) +
                     " of " + shape_str(a.shape()) + " has " + std::to_string(a.shape()[ax]));
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(a, ax, at, at + s));
    at += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis) {
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "chunk").dim(), "chunk");
  if (chunks <= 0 || a.shape()[ax] % chunks != 0)
    throw ShapeError("chunk: axis " + std::to_string(axis) + " of " + shape_str(a.shape()) +
                     " does not divide into " + std::to_string(chunks) + " equal parts");
  return split(a, std::vector<int64_t>(chunks, a.shape()[ax] / chunks), ax);
}

Tensor unsqueeze(const Tensor& a, int64_t axis) {
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "unsqueeze").dim() + 1, "unsqueeze");
  Shape s = a.shape();
  s.insert(s.begin() + ax, 1);
  return reshape(a, s);
}

Tensor squeeze(const Tensor& a, int64_t axis) {
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "squeeze").dim(), "squeeze");
  if (a.shape()[ax] != 1)
    throw ShapeError("squeeze: axis " + std::to_string(axis) + " of " + shape_str(a.shape()) + " has size " +
                     std::to_string(a.shape()[ax]) + ", expected 1");
  Shape s = a.shape();
  s.erase(s.begin() + ax);
  return reshape(a, s);
}

Tensor broadcast_to(const Tensor& a, const Shape& shape) {
  check_defined_any(a, "broadcast_to");
  if (a.shape() == shape) return a;
  Shape b;
  try {
    b = detail::broadcast_shapes(a.shape(), shape, "broadcast_to");
  } catch (const ShapeError&) {
    b.clear();
  }
  if (b != shape)
    throw ShapeError("broadcast_to: cannot broadcast " + shape_str(a.shape()) + " to " + shape_str(shape));
  Tensor out = gather_strided(a, shape, 0, detail::broadcast_strides(a.shape(), shape));
  return record("broadcast_to", out, {a},
                [in = a.shape()](const Tensor& g) { return std::vector<Tensor>{detail::unbroadcast(g, in)}; });
}

Tensor broadcast_like(const Tensor& a, int64_t axis, const Tensor& like, int64_t like_axis) {
  const int64_t la = normalize_axis(like_axis, check_defined_any(like, "broadcast_like").dim(), "broadcast_like");
  const int64_t ax = normalize_axis(axis, check_defined_any(a, "broadcast_like").dim(), "broadcast_like");
  if (a.shape()[ax] != 1)
    throw ShapeError("broadcast_like: axis " + std::to_string(axis) + " of " + shape_str(a.shape()) + " has size " +
                     std::to_string(a.shape()[ax]) + ", expected 1");
  Shape s = a.shape();
  s[ax] = like.shape()[la];
  // The size as read from `like` in a graph: the axes, and `like` as the extra tensor.
  return detail::traced(broadcast_to(a, s), [&](TracedOp& t) {
    t.attrs = attr::BroadcastLike{ax, la};
    t.extra = {like};
  });
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  const Shape& s = check_defined_any(a, "flatten").shape();
  if (s.empty()) return reshape(a, {1});  // torch.flatten of a scalar
  const int64_t nd = a.dim(), b = normalize_axis(start_dim, nd, "flatten"), e = normalize_axis(end_dim, nd, "flatten");
  if (b > e)
    throw ShapeError("flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                     std::to_string(end_dim) + " for shape " + shape_str(s));
  Shape out(s.begin(), s.begin() + b);
  out.push_back(shape_numel(Shape(s.begin() + b, s.begin() + e + 1)));
  out.insert(out.end(), s.begin() + e + 1, s.end());
  return reshape(a, out);
}

Tensor unflatten(const Tensor& a, int64_t dim, const Shape& sizes) {
  const Shape& s = check_defined_any(a, "unflatten").shape();
  const int64_t d = normalize_axis(dim, a.dim(), "unflatten");
  Shape part = sizes;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < part.size(); ++i) {
    if (part[i] == -1 && infer < 0) {
      infer = static_cast<int64_t>(i);
    } else if (part[i] < 0) {
      throw ShapeError("unflatten: sizes " + shape_str(sizes) + ": expected sizes >= 0 and at most one -1");
    } else {
      known *= part[i];
    }
  }
  if (infer >= 0 && known > 0 && s[d] % known == 0) part[infer] = s[d] / known;
  if (sizes.empty() || (infer >= 0 && part[infer] < 0) || shape_numel(part) != s[d])
    throw ShapeError("unflatten: sizes " + shape_str(sizes) + " do not multiply to the size " + std::to_string(s[d]) +
                     " of dimension " + std::to_string(dim) + " of " + shape_str(s));
  Shape out(s.begin(), s.begin() + d);
  out.insert(out.end(), part.begin(), part.end());
  out.insert(out.end(), s.begin() + d + 1, s.end());
  return reshape(a, out);
}

}  // namespace xg
