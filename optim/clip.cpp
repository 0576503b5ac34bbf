#include "optim/clip.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace xg::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0)) throw std::invalid_argument("clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm));
  double sq = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    for (double x : g.to_vector()) sq += x * x;
  }
  const double norm = std::sqrt(sq);
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
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
    }
  }
  return norm;
}

}  // namespace xg::optim
