// Shared by tests/test_nn_*.cpp: gradient checks on whole modules and the
// "every parameter got a gradient" check.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/xg.h"
#include "tests/helpers.h"
#include "nn/nn.h"

namespace xgnt {

// Default gradcheck options (eps 1e-6, atol 1e-5, rtol 1e-3) over `params`
// and `extra` inputs; `f` is the model's forward. Everything must be float64.
inline void check_grad(const std::function<xg::Tensor()>& f, std::vector<xg::Tensor> params,
                       const std::vector<xg::Tensor>& extra = {}) {
  params.insert(params.end(), extra.begin(), extra.end());
  xg::GradcheckResult r = xg::gradcheck(f, params);
  INFO(r.message);
  CHECK(r.ok);
  CHECK(r.checked > 0);
}

inline bool any_nonzero(const xg::Tensor& t) {
  for (double v : t.to_vector())
    if (v != 0.0) return true;
  return false;
}

// After one backward of sum(out * w) for a fixed random w, every parameter
// has a defined, non-zero gradient. Parameters named in `structural_zero`
// (those whose gradient is zero by construction, such as an attention key
// bias, which adds the same amount to every score of a softmax row) must
// instead have a gradient that vanishes up to rounding.
inline void check_all_params_get_grad(xg::nn::Module& m, const xg::Tensor& out, uint64_t seed = 7,
                                      const std::vector<std::string>& structural_zero = {}) {
  xg::Generator g(seed);
  xg::Tensor w = xg::randn(out.shape(), g, out.dtype());
  xg::sum(out * w).backward();
  for (auto& [name, p] : m.named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    bool zero_by_construction = false;
    for (const auto& z : structural_zero) zero_by_construction = zero_by_construction || name == z;
    if (zero_by_construction) {
      for (double v : p.grad().to_vector()) CHECK(std::abs(v) < 1e-5);
    } else {
      CHECK(any_nonzero(p.grad()));
    }
  }
}

inline xg::Tensor input(const xg::Shape& s, uint64_t seed, xg::Dtype d = xg::f64) {
  xg::Generator g(seed);
  return xg::randn(s, g, d);
}

using xgt::contains;

// The message of the exception `expr` throws as `Type` (fails the test if none).
#define XGN_THROW_MESSAGE(expr, Type) XG_THROW_MESSAGE(expr, Type)

}  // namespace xgnt
