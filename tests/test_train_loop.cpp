// The model-agnostic training loop (train/): the step checks, the Trainer and
// fit() on a toy job, whatever the application.
#include <cstdio>

#include "autograd/autograd.h"
#include "autograd/serialize.h"
#include "tests/helpers.h"
#include "train/detail/step_checks.h"
#include "train/loop.h"

using namespace xg;
using namespace xg::train;

TEST_CASE("train: the step checks every trainer shares name the step, and the parameter whose gradient is not finite") {
  CHECK(XG_THROW_MESSAGE(detail::check_loss(std::nan(""), 7), optim::NonFiniteError) ==
        "step 7: the loss is nan; stopped before updating the parameters");
  CHECK(XG_THROW_MESSAGE(detail::check_loss(INFINITY, 2, " (hint)"), optim::NonFiniteError) ==
        "step 2: the loss is inf; stopped before updating the parameters (hint)");
  detail::check_loss(1.5, 1);  // finite: nothing
  auto vec = [](std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); };
  Tensor a = vec({3.0, 0.0}).requires_grad_();
  Tensor b = vec({4.0}).requires_grad_();
  a.set_grad(vec({3.0, 0.0}));
  b.set_grad(vec({4.0}));
  const std::vector<std::pair<std::string, Tensor>> named = {{"a", a}, {"b", b}};
  CHECK(detail::clip_or_stop(named, 0, 1) == doctest::Approx(5.0));  // 0: no clip
  CHECK(b.grad().item() == 4.0);
  CHECK(detail::clip_or_stop(named, 1.0, 1) == doctest::Approx(5.0));
  CHECK(b.grad().item() == doctest::Approx(0.8).epsilon(1e-5));
  b.set_grad(vec({std::nan("")}));
  CHECK(XG_THROW_MESSAGE(detail::clip_or_stop(named, 1.0, 3), optim::NonFiniteError) ==
        "step 3: the gradient norm is nan (first non-finite gradient: b); stopped before updating the parameters");
  CHECK(a.grad().to_vector()[0] == doctest::Approx(0.6).epsilon(1e-5));  // left as it was
}

