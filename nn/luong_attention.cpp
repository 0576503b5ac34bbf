#include "nn/luong_attention.h"

#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg::nn {

namespace {

void need(bool ok, const std::string& what) { require(ok, what, "LuongAttention: "); }

}  // namespace

LuongAttention::LuongAttention(const LuongOptions& o, Generator& gen) : opts_(o) {
  const int64_t most = int64_t{1} << 24;
  need(o.query_size >= 1 && o.query_size <= most, "query_size " + std::to_string(o.query_size) + ": expected 1.." + std::to_string(most));
  need(o.key_size >= 1 && o.key_size <= most, "key_size " + std::to_string(o.key_size) + ": expected 1.." + std::to_string(most));
  need(o.hidden >= 0 && o.hidden <= most, "hidden " + std::to_string(o.hidden) + ": expected 0.." + std::to_string(most));
  need(o.score == "dot" || o.score == "general" || o.score == "concat",
       "score '" + o.score + "': expected dot, general or concat");
  need(o.score != "dot" || o.query_size == o.key_size,
       "the dot score needs query_size == key_size, got " + std::to_string(o.query_size) + " and " +
           std::to_string(o.key_size));
  need(o.window >= 0 && o.window <= most, "window " + std::to_string(o.window) + ": expected 0 (global) to " + std::to_string(most));
  if (opts_.hidden == 0) opts_.hidden = o.query_size;
  if (o.score == "general") w_a_ = register_module("w_a", std::make_shared<Linear>(o.query_size, o.key_size, gen, false));
  if (o.score == "concat")
    concat_ = register_module("w_a", std::make_shared<AdditiveAttention>(o.query_size, o.key_size, opts_.hidden, gen));
  if (o.window > 0) {
    w_p_ = register_module("w_p", std::make_shared<Linear>(o.query_size, opts_.hidden, gen, false));
    v_p_ = register_module("v_p", std::make_shared<Linear>(opts_.hidden, 1, gen, false));
  }
}

std::string LuongAttention::type_name() const {
  return "LuongAttention(score=" + opts_.score + (opts_.window > 0 ? ", window=" + std::to_string(opts_.window) : "") + ")";
}

Tensor LuongAttention::scores(const Tensor& query, const Tensor& key) {
  const auto named = scope();
  if (query.dim() != 3 || key.dim() != 3 || query.size(0) != key.size(0) || query.size(2) != opts_.query_size ||
      key.size(2) != opts_.key_size)
    throw ShapeError(describe() + ": query " + shape_str(query.shape()) + " and key " + shape_str(key.shape()) +
                     ": expected (B,T," + std::to_string(opts_.query_size) + ") and (B,S," +
                     std::to_string(opts_.key_size) + ")");
  if (opts_.score == "dot") return matmul(query, transpose(key, 1, 2));                         // (B,T,S)
  if (opts_.score == "general") return matmul(w_a_->forward(query), transpose(key, 1, 2));      // q W_a k
  return concat_->scores(query, key);
}

Tensor LuongAttention::aligned_positions(const Tensor& query, const Tensor& key_padding_mask, int64_t S) {
  if (opts_.window == 0) throw std::logic_error(describe() + ": aligned_positions is local-p's; this is global attention");
  const int64_t B = query.size(0);
  // S_b: each row's unpadded length, (B,1).
  std::vector<double> lengths(static_cast<size_t>(B), static_cast<double>(S));
  if (key_padding_mask.defined())
    for (int64_t b = 0; b < B; ++b) {
      int64_t n = 0;
      for (int64_t s = 0; s < S; ++s) n += key_padding_mask.at({b, s}) == 0;
      lengths[static_cast<size_t>(b)] = static_cast<double>(n);
    }
  const Tensor len = from_vector(lengths, {B, 1}, query.dtype());
  const Tensor p = squeeze(v_p_->forward(tanh(w_p_->forward(query))), 2);  // (B,T)
  return mul(sigmoid(p), len);
}

AttentionOutput LuongAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const Tensor& key_padding_mask) {
  const auto named = scope();
  const Tensor s = scores(query, key);
  if (opts_.window == 0) return attend(s, value, key_padding_mask);
  if (key_padding_mask.defined() && key_padding_mask.shape() != Shape{s.size(0), s.size(2)})
    throw ShapeError(describe() + ": key_padding_mask " + shape_str(key_padding_mask.shape()) + ": expected " +
                     shape_str({s.size(0), s.size(2)}) + " (B,S)");
  if (value.dim() != 3 || value.size(0) != s.size(0) || value.size(1) != s.size(2))
    throw ShapeError(describe() + ": value " + shape_str(value.shape()) + ": expected (" + std::to_string(s.size(0)) +
                     "," + std::to_string(s.size(2)) + ",Cv)");
  // Local-p: the window [p - D, p + D] as a mask, then the Gaussian of width D/2 around p.
  const int64_t B = s.size(0), T = s.size(1), S = s.size(2);
  const Tensor p = aligned_positions(query, key_padding_mask, S);  // (B,T)
  const auto pv = p.to_vector();
  std::vector<double> outside(static_cast<size_t>(B * T * S)), pos(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) pos[static_cast<size_t>(i)] = static_cast<double>(i);
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t i = 0; i < S; ++i) {
      const bool padded = key_padding_mask.defined() && key_padding_mask.at({bt / T, i}) != 0;
      outside[static_cast<size_t>(bt * S + i)] =
          padded || std::abs(static_cast<double>(i) - pv[static_cast<size_t>(bt)]) > static_cast<double>(opts_.window);
    }
  const Tensor masked = masked_fill(s, from_vector(outside, {B, T, S}, s.dtype()), -1e30);
  AttentionOutput out;
  const Tensor in_window = softmax(masked, -1);
  const double sigma = static_cast<double>(opts_.window) / 2;
  const Tensor d = sub(from_vector(pos, {1, 1, S}, s.dtype()), unsqueeze(p, 2));  // (B,T,S): s - p
  out.weights = mul(in_window, exp(mul(d, d) * (-1.0 / (2 * sigma * sigma))));
  out.context = matmul(out.weights, value);
  return out;
}

Tensor LuongAttention::forward(const Tensor& x) { return forward(x, x, x).context; }

}  // namespace xg::nn
