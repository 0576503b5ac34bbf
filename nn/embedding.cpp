#include "nn/embedding.h"

#include <charconv>
#include <cmath>

#include "autograd/ops.h"
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

Embedding::Embedding(int64_t num, int64_t dim, Generator& gen, int64_t padding_idx, double init_std)
    : num_(num), dim_(dim), padding_idx_(padding_idx) {
  if (num <= 0 || dim <= 0)
    throw std::invalid_argument("Embedding: num and dim must be positive, got num=" + std::to_string(num) +
                                ", dim=" + std::to_string(dim));
  if (padding_idx < -1 || padding_idx >= num)
    throw std::invalid_argument("Embedding: padding_idx " + std::to_string(padding_idx) +
                                " outside [0, " + std::to_string(num) + ") (or -1 for none)");
  if (!(init_std >= 0) || !std::isfinite(init_std))
    throw std::invalid_argument("Embedding: init_std " + number_text(init_std) + ": expected a finite number >= 0");
  weight_ = register_parameter("weight", empty({num, dim}));
  normal_(weight_, gen, 0.0, init_std);
  if (padding_idx_ >= 0)
    for (int64_t c = 0; c < dim; ++c) weight_.set({padding_idx_, c}, 0.0);
}

std::string Embedding::type_name() const {
  return "Embedding(num=" + std::to_string(num_) + ", dim=" + std::to_string(dim_) + ")";
}

Tensor Embedding::forward(const std::vector<int64_t>& ids, const Shape& ids_shape) {
  const auto named = scope();
  if (static_cast<int64_t>(ids.size()) != shape_numel(ids_shape))
    throw ShapeError(describe() + ": " + std::to_string(ids.size()) + " ids do not fill ids_shape " +
                     shape_str(ids_shape));
  bool has_pad = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= num_)
      throw ShapeError(describe() + ": id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary of size " + std::to_string(num_));
    has_pad = has_pad || ids[i] == padding_idx_;
  }
  Tensor out = gather_rows(weight_, ids, ids_shape);  // (ids_shape..., C)
  if (!has_pad) return out;
  // Same values, but padded positions take them from a detached copy, so the
  // padding row gets no gradient.
  std::vector<double> pad(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) pad[i] = ids[i] == padding_idx_ ? 1.0 : 0.0;
  Shape mask_shape = ids_shape;
  mask_shape.push_back(1);
  Tensor mask = from_vector(pad, mask_shape, out.dtype());  // (ids_shape..., 1)
  return where(mask, out.detach(), out);
}

Tensor Embedding::forward(const Tensor& ids) {
  if (!ids.defined()) throw ShapeError(describe() + ": ids tensor is undefined");
  if (ids.dtype() != Dtype::i64)
    throw ShapeError(describe() + ": ids must be an int64 tensor, got " + dtype_name(ids.dtype()) + " " +
                     shape_str(ids.shape()) + " (convert with .to(xg::i64))");
  const int64_t* p = ids.data<int64_t>();
  return forward(std::vector<int64_t>(p, p + ids.numel()), ids.shape());
}

}  // namespace xg::nn
