#include "optim/clip.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace xg::optim {

namespace {
// Sum of squares in double with 8 independent partial sums: one long chain
// of dependent additions waits on each addition's latency instead of
// streaming memory (docs/optim.md, gradient clipping). The order is fixed,
// so the result does not depend on threads.
template <class T>
double sum_squares(const T* d, int64_t n) {
  constexpr int64_t kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) lane[k] += double(d[i + k]) * double(d[i + k]);
  for (; i < n; ++i) lane[0] += double(d[i]) * double(d[i]);
  double sq = 0;
  for (double v : lane) sq += v;
  return sq;
}
}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  double sq = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    sq += g.dtype() == f32 ? sum_squares(g.data<float>(), g.numel()) : sum_squares(g.data<double>(), g.numel());
  }
  return std::sqrt(sq);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  if (!(max_norm > 0) || std::isnan(max_norm))
    throw std::invalid_argument("clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm));
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) {
    if (!error_if_nonfinite) return norm;  // gradients left as they are
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      if (!g.defined()) continue;
      const int64_t bad = first_nonfinite(g);
      if (bad >= 0)
        throw NonFiniteError("clip_grad_norm: the total gradient norm is " + std::to_string(norm) +
                             "; the gradient of parameter " + std::to_string(i) + " " + shape_str(g.shape()) +
                             " holds " + std::to_string(g.to_vector()[static_cast<size_t>(bad)]) +
                             ". Gradients left unclipped.");
    }
    throw NonFiniteError("clip_grad_norm: the total gradient norm overflows to " + std::to_string(norm) +
                         " though every gradient is finite");
  }
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {  // as PyTorch: also for a norm within 1e-6 below max_norm
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (g.dtype() == f32) {
        float* d = g.data<float>();
        for (int64_t i = 0, n = g.numel(); i < n; ++i) d[i] = float(d[i] * scale);
      } else {
        double* d = g.data<double>();
        for (int64_t i = 0, n = g.numel(); i < n; ++i) d[i] *= scale;
      }
      g.bump_version();
    }
  }
  return norm;
}

}  // namespace xg::optim
