// Compares the model weights (model.*) of two checkpoints: prints the largest
// absolute difference, and exits 1 when it exceeds TOLERANCE or when the two
// hold different tensors (2 on bad usage or an unreadable file).
//
//   compare_checkpoints A.safetensors B.safetensors TOLERANCE
//
// The key projections' biases are left out (key_bias.h): softmax is
// invariant to them, so their exact gradient is zero and what the optimiser
// sees is rounding noise, which Adam scales up to steps of about the learning
// rate whatever the summation order.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "autograd/serialize.h"
#include "tests/distributed/key_bias.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: compare_checkpoints A.safetensors B.safetensors TOLERANCE\n");
    return 2;
  }
  try {
    const double tolerance = std::stod(argv[3]);
    const auto a = xg::load_tensors(argv[1]), b = xg::load_tensors(argv[2]);
    double worst = 0;
    std::string where;
    size_t compared = 0;
    bool nonfinite = false;
    for (const auto& [name, t] : a) {
      if (name.rfind("model.", 0) != 0) continue;
      auto it = b.find(name);
      if (it == b.end() || it->second.shape() != t.shape()) {
        std::printf("compare_checkpoints: %s is in %s only, or of another shape\n", name.c_str(), argv[1]);
        return 1;
      }
      const auto x = t.to_vector(), y = it->second.to_vector();
      for (size_t i = 0; i < x.size(); ++i) {
        if (xgt::is_key_bias(name, i, x.size())) continue;
        if (!std::isfinite(x[i]) || !std::isfinite(y[i])) nonfinite = true;
        if (std::abs(x[i] - y[i]) > worst) {
          worst = std::abs(x[i] - y[i]);
          where = name;
        }
      }
      ++compared;
    }
    const bool ok = compared > 0 && !nonfinite && worst <= tolerance;
    std::printf("compare_checkpoints: %zu tensors, largest difference %.3g (%s), tolerance %g%s: %s\n", compared, worst,
                where.c_str(), tolerance, nonfinite ? ", a weight is not finite" : "", ok ? "equal" : "DIFFERENT");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
    return 2;
  }
}
