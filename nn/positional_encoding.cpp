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
  std::vector<double> pe(static_cast<size_t>(max_len_ * d_model_));
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
  Tensor pe = start == 0 && T == max_len_ ? pe_ : slice(pe_, 0, start, start + T);  // (T,C), broadcasts over B
  return dropout->forward(x + pe);
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
  return x + slice(weight_, 0, start, start + T);  // (T,C) broadcasts over B
}

}  // namespace xg::nn
