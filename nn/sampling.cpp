#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace xg::nn {

int64_t multinomial(const std::vector<double>& weights, Generator& gen) {
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0)
      throw std::invalid_argument("multinomial: weight " + std::to_string(i) + " is " + std::to_string(weights[i]) +
                                  ", expected a finite number >= 0");
    total += weights[i];
  }
  if (!(total > 0)) throw std::invalid_argument("multinomial: the weights sum to 0 (nothing to draw)");
  const double u = gen.uniform() * total;
  double acc = 0;
  int64_t last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last = static_cast<int64_t>(i);
    if (u < acc) return last;
  }
  return last;  // u landed on the rounding gap at the top: the last id with weight
}

std::vector<int64_t> sample(const Tensor& logits, Generator& gen, const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw std::invalid_argument("sample: temperature " + std::to_string(o.temperature) +
                                ": expected a finite number >= 0 (0: greedy)");
  if (o.top_k < 0) throw std::invalid_argument("sample: top_k " + std::to_string(o.top_k) + ": expected >= 0 (0: all)");
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw std::invalid_argument("sample: top_p " + std::to_string(o.top_p) + ": expected a number in (0, 1]");
  if (!logits.defined() || logits.dim() < 1 || logits.dim() > 2)
    throw ShapeError("sample: logits must be (V) or (B,V), got " +
                     (logits.defined() ? shape_str(logits.shape()) : std::string("an undefined tensor")));
  const int64_t v = logits.size(-1), rows = logits.dim() == 2 ? logits.size(0) : 1;
  if (v == 0) throw ShapeError("sample: logits " + shape_str(logits.shape()) + " have no ids to draw from");
  const std::vector<double> all = logits.to_vector();
  std::vector<int64_t> out;
  std::vector<int64_t> order(v);
  std::vector<double> w(v);
  for (int64_t r = 0; r < rows; ++r) {
    const double* z = all.data() + r * v;
    double top = -INFINITY;
    for (int64_t i = 0; i < v; ++i) {
      if (std::isnan(z[i]) || z[i] == INFINITY)
        throw std::invalid_argument("sample: row " + std::to_string(r) + " holds " + std::to_string(z[i]) + " at id " +
                                    std::to_string(i));
      top = std::max(top, z[i]);
    }
    if (top == -INFINITY)
      throw std::invalid_argument("sample: every logit of row " + std::to_string(r) + " is -inf (nothing to draw)");
    if (o.temperature == 0) {
      out.push_back(std::max_element(z, z + v) - z);  // the first of equal maxima
      continue;
    }
    // Most likely first (ties: lower id first); keep the top-k, then of those the top-p prefix.
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return z[a] > z[b]; });
    int64_t keep = o.top_k > 0 ? std::min(o.top_k, v) : v;
    double sum = 0;  // of the top-k: top-p applies to their renormalised probabilities
    for (int64_t i = 0; i < keep; ++i) sum += w[i] = std::exp((z[order[i]] - top) / o.temperature);
    if (o.top_p < 1) {
      double mass = 0;
      for (int64_t i = 0; i < keep; ++i) {
        mass += w[i] / sum;
        if (mass >= o.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    const std::vector<double> kept(w.begin(), w.begin() + keep);
    out.push_back(order[multinomial(kept, gen)]);
  }
  return out;
}

}  // namespace xg::nn
