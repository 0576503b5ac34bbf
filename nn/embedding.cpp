#include "nn/embedding.h"

#include <charconv>
#include <cmath>

#include "autograd/ops.h"
#include "autograd/require.h"
#include "nn/init.h"

namespace xg::nn {

namespace {
// Shortest text that reads back as v: "7", "0.5", "inf", "1e+30".
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, Generator& gen, std::optional<int64_t> padding_idx, double init_std)
    : num_(num), dim_(dim) {
  if (num <= 0 || dim <= 0)
    throw std::invalid_argument("Embedding: num and dim must be positive, got num=" + std::to_string(num) +
                                ", dim=" + std::to_string(dim));
  padding_idx_ = padding_index("Embedding", padding_idx, num);
  if (!(init_std >= 0) || !std::isfinite(init_std))
    throw std::invalid_argument("Embedding: init_std " + number_text(init_std) + ": expected a finite number >= 0");
  weight_ = &register_parameter("weight", empty({num, dim}));
  normal_(*weight_, gen, 0.0, init_std);
  if (padding_idx_)
    for (int64_t c = 0; c < dim; ++c) weight_->set({*padding_idx_, c}, 0.0);
}

std::string Embedding::type_name() const {
  return "Embedding(num=" + std::to_string(num_) + ", dim=" + std::to_string(dim_) + ")";
}

namespace {
// Throws ShapeError naming the module unless the n ids fill `shape` and lie
// in the vocabulary; returns whether one of them is the padding id.
bool check_ids(const Embedding& e, const int64_t* ids, int64_t n, const Shape& shape) {
  if (n != shape_numel(shape))
    throw ShapeError(e.describe() + ": " + std::to_string(n) + " ids do not fill ids_shape " + shape_str(shape));
  bool has_pad = false;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= e.num_embeddings())
      throw ShapeError(e.describe() + ": id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary of size " + std::to_string(e.num_embeddings()));
    has_pad = has_pad || ids[i] == e.padding_idx();
  }
  return has_pad;
}

// The looked-up rows `out` with the same values, but padded positions take
// them from a detached copy, so the padding row gets no gradient. An export
// trace keeps `out` itself: the values are the same, and the detached copy
// would read as a constant.
Tensor detach_padding(const Tensor& out, const int64_t* ids, int64_t n, const Shape& shape, int64_t pad) {
  if (tracing()) return out;
  std::vector<double> mask_values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mask_values[i] = ids[i] == pad ? 1.0 : 0.0;
  Shape mask_shape = shape;
  mask_shape.push_back(1);
  Tensor mask = from_vector(mask_values, mask_shape, out.dtype());  // (ids_shape..., 1)
  return where(mask, out.detach(), out);
}
}  // namespace

Tensor Embedding::forward(const std::vector<int64_t>& ids, const Shape& ids_shape) {
  const auto named = scope();
  const int64_t n = static_cast<int64_t>(ids.size());
  const bool has_pad = check_ids(*this, ids.data(), n, ids_shape);
  Tensor out = gather_rows(*weight_, ids, ids_shape);  // (ids_shape..., C)
  return has_pad ? detach_padding(out, ids.data(), n, ids_shape, *padding_idx_) : out;
}

Tensor Embedding::forward(const Tensor& ids) {
  const auto named = scope();
  if (!ids.defined()) throw ShapeError(describe() + ": ids tensor is undefined");
  if (ids.dtype() != Dtype::i64)
    throw ShapeError(describe() + ": ids must be an int64 tensor, got " + dtype_name(ids.dtype()) + " " +
                     shape_str(ids.shape()) + " (convert with .to(xg::i64))");
  const int64_t* p = ids.data<int64_t>();
  const bool has_pad = check_ids(*this, p, ids.numel(), ids.shape());
  // The tensor form of gather_rows: an export trace sees the caller's ids tensor.
  Tensor out = gather_rows(*weight_, ids);  // (ids_shape..., C)
  return has_pad ? detach_padding(out, p, ids.numel(), ids.shape(), *padding_idx_) : out;
}

}  // namespace xg::nn
