// Finite-difference gradient checking, for users' own functions and models.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg {

// Settings of gradcheck(): the step and the tolerances.
struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;  // relative tolerance (see atol)
  // At most this many elements per input are perturbed (chosen at random with
  // `seed`); <= 0 checks every element.
  int64_t max_samples_per_input = 0;
  uint64_t seed = 0;
  // gradgradcheck only: besides the first gradient with respect to all
  // inputs, take it with respect to each input alone and to each input's
  // complement, and check each against every input (mixed partials: a
  // backward that drops an input whose first gradient was not asked for is
  // caught). Costs up to 2n + 1 checks for n inputs.
  bool mixed_partials = true;
};

// What gradcheck() found.
struct GradcheckResult {
  bool ok = true;          // every element compared within tolerance
  int64_t checked = 0;     // elements compared
  // The worst element (largest error relative to its tolerance).
  int64_t worst_input = -1;
  Shape worst_index;
  double analytic = 0, numeric = 0, abs_error = 0;
  std::string message;  // one line: pass/fail, worst element, its values
};

// Checks d<w, f(inputs)>/d inputs for a fixed random w against central
// differences. Every input that requires a gradient is checked; they must be
// float64. Inputs are perturbed in place (and restored), so `f` may also
// close over them, e.g. a model's parameters.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});
// The same for a function of no arguments, checking `params` (such as a
// model's parameters after converting it to float64).
GradcheckResult gradcheck(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                          const GradcheckOptions& opts = {});

// Second order: checks the gradient of the gradient by the same central
// differences (PyTorch's gradgradcheck). With a fixed random w (f's output
// shape, float64), the first-order gradients G(x, w) = d<w, f(x)>/dx are
// computed with create_graph and gradcheck()ed as a function of both the
// inputs and w; so every backward formula on the way is checked to be
// differentiable, and correct, in its inputs and in its output gradient.
// With mixed_partials (the default) the first gradients are also taken with
// respect to each input alone and to each input's complement, the second
// order always against every input: d/dx_j (d f / d x_i) for all i, j. The
// message names the set of the first failing check.
// Needs xg::grad, so f must not run under NoGradGuard.
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});
// The same for a function of no arguments, checking `params`.
GradcheckResult gradgradcheck(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                              const GradcheckOptions& opts = {});

}  // namespace xg
