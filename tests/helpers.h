// Shared by the test files: float64 inputs and a gradcheck assertion with the
// default (torch.autograd.gradcheck-like) tolerances: eps 1e-6, atol 1e-5, rtol 1e-3.
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "autograd/xg.h"

namespace xgt {

inline xg::Tensor leaf(const xg::Shape& s, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  xg::Generator g(seed);
  return xg::rand(s, g, xg::f64, lo, hi).requires_grad_();
}

#define XG_CHECK_GRAD(fn, ...)                                  \
  do {                                                          \
    auto xg_r_ = xg::gradcheck(fn, std::vector<xg::Tensor>{__VA_ARGS__}); \
    INFO(xg_r_.message);                                        \
    CHECK(xg_r_.ok);                                            \
    CHECK(xg_r_.checked > 0);                                   \
  } while (0)

// The message of the exception `expr` throws (fails the test if none).
#define XG_THROW_MESSAGE(expr, Type)                 \
  [&]() -> std::string {                             \
    try {                                            \
      (void)(expr);                                  \
    } catch (const Type& e) {                        \
      return e.what();                               \
    }                                                \
    FAIL_CHECK("expected " #Type " from " #expr);    \
    return std::string();                            \
  }()

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace xgt
