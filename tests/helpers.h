// Shared by the test files: float64 inputs and a gradcheck assertion with the
// default (torch.autograd.gradcheck-like) tolerances: eps 1e-6, atol 1e-5, rtol 1e-3.
#pragma once
#include <doctest/doctest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/xg.h"
#include "engine/gemm.h"

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

// The same for the gradient of the gradient (gradgradcheck).
#define XG_CHECK_GRADGRAD(fn, ...)                                            \
  do {                                                                        \
    auto xg_r_ = xg::gradgradcheck(fn, std::vector<xg::Tensor>{__VA_ARGS__}); \
    INFO(xg_r_.message);                                                      \
    CHECK(xg_r_.ok);                                                          \
    CHECK(xg_r_.checked > 0);                                                 \
  } while (0)

// A barrier for tests that need threads to hold their state at the same
// time: each of `n` threads calls arrive_and_wait() and none returns before
// all have arrived.
class Meeting {
 public:
  explicit Meeting(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == n_) cv_.notify_all();
    cv_.wait(lock, [&] { return arrived_ >= n_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
};

// A case that cannot run on this machine says so with this marker: CTest
// reports it as skipped (SKIP_REGULAR_EXPRESSION "xg-skip"), and .ci/run
// lists it. "(hardware)" marks what no package can fix, such as bf16 on a
// CPU without AVX512_BF16.
#define XG_SKIP_HARDWARE(reason) MESSAGE("xg-skip (hardware): " << reason)

// bf16 products for the life of this guard: on the hardware where the CPU
// has bf16, emulated otherwise (engine::set_bf16_emulation: the operands
// rounded to bf16 as the hardware rounds them, the products in float32), so
// the bf16 code paths are tested on every machine. Says which.
class Bf16Products {
 public:
  Bf16Products() {
    const std::string why = xg::engine::bf16_unsupported_reason();
    if (!why.empty()) {
      MESSAGE("bf16 emulated here (" << why << ")");
      xg::engine::set_bf16_emulation(true);
    }
  }
  ~Bf16Products() { xg::engine::set_bf16_emulation(false); }
  Bf16Products(const Bf16Products&) = delete;
  Bf16Products& operator=(const Bf16Products&) = delete;
};

// f() under each route of bf16 products this machine runs (engine::Bf16Route:
// widened always, emulated where the CPU has no bf16; native where it has),
// the process's route restored after. Says which.
template <class F>
void for_each_bf16_route(F f) {
  Bf16Products products;
  const xg::engine::Bf16Route before = xg::engine::bf16_route();
  for (const xg::engine::Bf16Route route : {xg::engine::Bf16Route::native, xg::engine::Bf16Route::widened}) {
    if (route == xg::engine::Bf16Route::native && xg::engine::bf16_emulated()) continue;
    xg::engine::set_bf16_route(route);
    const std::string name = route == xg::engine::Bf16Route::native ? "native" : "widened";
    INFO("bf16 route " << name);
    f();
  }
  xg::engine::set_bf16_route(before);
}

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

// f's value and its inputs' gradients under a fixed random projection of the
// output: what two computations of one function must agree on.
inline std::vector<xg::Tensor> values_and_grads(
    const std::function<xg::Tensor(const std::vector<xg::Tensor>&)>& f, const std::vector<xg::Tensor>& inputs) {
  for (const xg::Tensor& t : inputs) const_cast<xg::Tensor&>(t).zero_grad();
  xg::Tensor y = f(inputs);
  xg::Generator g(99);
  xg::sum(y * xg::rand(y.shape(), g, y.dtype())).backward();
  std::vector<xg::Tensor> out{y.detach()};
  for (const xg::Tensor& t : inputs) out.push_back(t.grad());
  return out;
}

// Same shapes, and every element equal to relative precision `rel`.
inline void check_close(const std::vector<xg::Tensor>& a, const std::vector<xg::Tensor>& b, double rel) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].shape() == b[i].shape());
    auto va = a[i].to_vector(), vb = b[i].to_vector();
    for (size_t j = 0; j < va.size(); ++j) CHECK(va[j] == doctest::Approx(vb[j]).epsilon(rel));
  }
}

// Restores the thread count when the test ends, even through a failed REQUIRE.
struct ThreadsGuard {
  int before = xg::num_threads();
  ~ThreadsGuard() { xg::set_num_threads(before); }
};

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace xgt
