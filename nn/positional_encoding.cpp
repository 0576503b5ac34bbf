#include "nn/positional_encoding.h"

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "nn/init.h"

namespace xg::nn {

namespace {

// Both position modules' sizes, positive.
void check_sizes(const char* module, int64_t d_model, int64_t max_len) {
  if (d_model <= 0 || max_len <= 0)
    throw std::invalid_argument(std::string(module) + ": d_model and max_len must be positive, got d_model=" +
                                std::to_string(d_model) + ", max_len=" + std::to_string(max_len));
}

// The length T of a (B,T,C) input whose positions start..start+T-1 the
// module `m` has: C its width, every position below max_len.
int64_t checked_length(const Module& m, const Tensor& x, int64_t start, int64_t d_model, int64_t max_len) {
  if (!x.defined()) throw ShapeError(m.describe() + ": input is undefined");
  if (x.dim() != 3 || x.size(2) != d_model)
    throw ShapeError(m.describe() + ": expected input (B,T,C) with C=" + std::to_string(d_model) + ", got " +
                     shape_str(x.shape()));
  const int64_t T = x.size(1);
  if (start < 0 || start + T > max_len)
    throw ShapeError(m.describe() + ": positions " + std::to_string(start) + ".." + std::to_string(start + T - 1) +
                     " exceed max_len=" + std::to_string(max_len));
  return T;
}

// x (B,T,C) + table[positions] for positions (T,) int64 of the module `m`
// (a table of max_len rows): the rows gathered by a tensor of positions, so
// that an export trace sees where they come from (a step's position as a
// graph input, not a constant).
Tensor add_rows(const Module& m, const Tensor& x, const Tensor& positions, const Tensor& table) {
  const int64_t max_len = table.size(0);
  const int64_t T = checked_length(m, x, 0, table.size(1), max_len);
  if (!positions.defined() || positions.dtype() != Dtype::i64 || positions.shape() != Shape{T})
    throw ShapeError(m.describe() + ": positions must be int64 (T,) = " + shape_str({T}) + " for input " +
                     shape_str(x.shape()) + ", got " +
                     (positions.defined() ? std::string(dtype_name(positions.dtype())) + " " + shape_str(positions.shape())
                                          : std::string("undefined")));
  const int64_t* p = positions.data<int64_t>();
  for (int64_t t = 0; t < T; ++t)
    if (p[t] < 0 || p[t] >= max_len)
      throw ShapeError(m.describe() + ": position " + std::to_string(p[t]) + " is outside 0.." +
                       std::to_string(max_len - 1));
  return x + gather_rows(table, positions);  // (T,C) broadcasts over B
}

}  // namespace

PositionalEncoding::PositionalEncoding(int64_t d_model, int64_t max_len, double p,
                                       std::shared_ptr<Generator> dropout_gen)
    : d_model_(d_model), max_len_(max_len) {
  check_sizes("PositionalEncoding", d_model, max_len);
  pe_ = register_buffer("pe", table(f32), /*persistent=*/false);
  dropout = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
}

// (max_len, C), computed in double and rounded once to d.
Tensor PositionalEncoding::table(Dtype d) const {
  std::vector<double> pe(static_cast<size_t>(shape_numel({max_len_, d_model_})));  // no silent overflow
  for (int64_t t = 0; t < max_len_; ++t)
    for (int64_t c = 0; c < d_model_; ++c) {
      const double freq = std::pow(10000.0, -static_cast<double>(c - c % 2) / static_cast<double>(d_model_));
      const double angle = static_cast<double>(t) * freq;
      pe[static_cast<size_t>(t * d_model_ + c)] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  return from_vector(pe, {max_len_, d_model_}, d);
}

void PositionalEncoding::on_dtype(Dtype d) { pe_.copy_(table(d)); }

std::string PositionalEncoding::type_name() const {
  return "PositionalEncoding(d_model=" + std::to_string(d_model_) + ", max_len=" + std::to_string(max_len_) + ")";
}

Tensor PositionalEncoding::forward(const Tensor& x) { return forward(x, 0); }

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) {
  const auto named = scope();
  const int64_t T = checked_length(*this, x, start, d_model_, max_len_);
  // (T,C), broadcasts over B; from the start, cut to x's length as a graph would (slice_like)
  Tensor pe = start == 0 ? (T == max_len_ ? pe_ : slice_like(pe_, 0, x, 1)) : slice(pe_, 0, start, start + T);
  return dropout->forward(x + pe);
}

Tensor PositionalEncoding::forward_at(const Tensor& x, const Tensor& positions) {
  const auto named = scope();
  return dropout->forward(add_rows(*this, x, positions, pe_));
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, Generator& gen,
                                                       double init_std)
    : max_len_(max_len), d_model_(d_model) {
  check_sizes("LearnedPositionalEmbedding", d_model, max_len);
  if (!(init_std >= 0) || !std::isfinite(init_std))
    throw std::invalid_argument("LearnedPositionalEmbedding: init_std " + std::to_string(init_std) +
                                ": expected a finite number >= 0");
  weight_ = register_parameter("weight", empty({max_len, d_model}));
  normal_(weight_, gen, 0.0, init_std);
}

std::string LearnedPositionalEmbedding::type_name() const {
  return "LearnedPositionalEmbedding(max_len=" + std::to_string(max_len_) + ", d_model=" + std::to_string(d_model_) +
         ")";
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x) { return forward(x, 0); }

Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t start) {
  const auto named = scope();
  const int64_t T = checked_length(*this, x, start, d_model_, max_len_);
  // (T,C) broadcasts over B; from the start, cut to x's length as a graph would (slice_like)
  return x + (start == 0 ? slice_like(weight_, 0, x, 1) : slice(weight_, 0, start, start + T));
}

Tensor LearnedPositionalEmbedding::forward_at(const Tensor& x, const Tensor& positions) {
  const auto named = scope();
  return add_rows(*this, x, positions, weight_);
}

}  // namespace xg::nn
