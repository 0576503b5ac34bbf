// What the PyTorch parity programs share: the relative difference of two
// tensors and the one-line verdict of a case.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace xg::parity {

// Agreement required of every compared tensor, relative to its largest value.
constexpr double kTolerance = 1e-12;

// max |a - b| / max |b| (1e300 on a shape mismatch or an undefined tensor).
inline double rel_diff(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return 1e300;
  const auto x = a.to_vector(), y = b.to_vector();
  double diff = 0, scale = 1e-300;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

// Prints "PROGRAM: CASE WHAT: N tensors, largest relative difference D (NAME): equal|DIFFERENT"
// and returns whether every difference is within kTolerance.
inline bool report(const char* program, const std::string& name, const std::string& what,
                   const std::vector<std::pair<std::string, double>>& diffs) {
  double worst = 0;
  std::string where;
  for (const auto& [tensor, d] : diffs)
    if (!(d <= worst)) {
      worst = d;
      where = tensor;
    }
  const bool ok = !diffs.empty() && worst <= kTolerance;
  std::printf("%s: %-10s %s: %zu tensors, largest relative difference %.2g (%s): %s\n", program, name.c_str(),
              what.c_str(), diffs.size(), worst, where.c_str(), ok ? "equal" : "DIFFERENT");
  return ok;
}

}  // namespace xg::parity
