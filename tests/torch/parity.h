// What the PyTorch parity programs share: the relative difference of two
// tensors, the one-line verdict of a case, and the program's main.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/serialize.h"
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
// (followed by ", tolerance T" when T is not kTolerance) and returns whether
// every difference is within `tolerance`.
inline bool report(const char* program, const std::string& name, const std::string& what,
                   const std::vector<std::pair<std::string, double>>& diffs, double tolerance = kTolerance) {
  double worst = 0;
  std::string where;
  for (const auto& [tensor, d] : diffs)
    if (!(d <= worst)) {
      worst = d;
      where = tensor;
    }
  const bool ok = !diffs.empty() && worst <= tolerance;
  std::printf("%s: %-10s %s: %zu tensors, largest relative difference %.2g (%s): %s", program, name.c_str(),
              what.c_str(), diffs.size(), worst, where.c_str(), ok ? "equal" : "DIFFERENT");
  if (tolerance != kTolerance) std::printf(", tolerance %.0g", tolerance);
  std::printf("\n");
  return ok;
}

// The key projection's bias adds q . b to every score of a query's row, which
// the softmax ignores: the loss does not depend on w_k.bias at all, so its
// gradient and every second derivative through it are zero in exact
// arithmetic, and both sides hold rounding noise (~1e-17 against gradients
// ~1). Such a tensor is compared relative to the largest value of all the
// parameters' tensors of the comparison; any other relative to its own.
// `ends`: the names (after the last module prefix) of the tensors zero by
// construction in the case at hand.
inline bool zero_by_construction(const std::string& name, const std::vector<std::string>& ends) {
  for (const std::string& end : ends)
    if (name == end || (name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0 &&
                        name[name.size() - end.size() - 1] == '.'))
      return true;
  return false;
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::abs(x));
  return m;
}

// Appends ("LABEL NAME", difference) for each parameter's tensor, ours against ref.
// An undefined ref (PyTorch found no path to the tensor) wants ours
// undefined or all zeros: difference 0, else 1e300.
inline void compare_all(std::vector<std::pair<std::string, double>>& diffs, const std::string& label,
                        const std::vector<std::string>& names, const std::vector<Tensor>& ours,
                        const std::vector<Tensor>& ref, const std::vector<std::string>& zero_ends = {"w_k.bias"}) {
  double scale = 1e-300;
  for (const Tensor& r : ref)
    if (r.defined()) scale = std::max(scale, max_abs(r));
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ref[i].defined()) {
      diffs.push_back({label + " " + names[i], !ours[i].defined() || max_abs(ours[i]) == 0 ? 0.0 : 1e300});
      continue;
    }
    double d = rel_diff(ours[i], ref[i]);
    if (zero_by_construction(names[i], zero_ends) && d < 1e300)
      d = d * max_abs(ref[i]) / scale;  // max |ours - ref| / scale
    diffs.push_back({label + " " + names[i], d});
  }
}

// The main of a parity program: reads the file that its Python side wrote
// (argv[1]; one case per metadata entry, name -> configuration) and runs
// `run_case` on each. Exit 0 when every case agrees, 1 otherwise, 2 on usage.
template <class RunCase>
int run_file(const char* program, int argc, char** argv, RunCase run_case) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.safetensors (written by %s.py)\n", program, program);
    return 2;
  }
  try {
    std::map<std::string, std::string> meta;
    auto file = load_tensors(argv[1], &meta);
    bool ok = !meta.empty();
    for (auto& [name, config] : meta) ok = run_case(name, config, file) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace xg::parity
