// The tape: grad mode, the no-grad guard, and how an op records its backward.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/parallel.h"
#include "autograd/tensor.h"

namespace xg {

bool grad_enabled();
void set_grad_enabled(bool on);

// RAII: no op records anything while a guard is alive.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Given the gradient of the op's output, returns one gradient per input (an
// undefined Tensor where an input gets none). Runs with grad mode off.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// Links `output` into the tape if grad mode is on and any input requires a
// gradient; otherwise returns it untouched. `backward` must capture only the
// values it needs (detached), never the output tensor itself.
// Throws std::logic_error if an input's graph was already freed by backward().
Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward);

// A user-defined differentiable op. `forward` runs with grad mode off on the
// inputs; `backward` receives the inputs and the output (detached) and the
// output's gradient, and returns one gradient per input (each of that
// input's shape, or undefined). The result behaves like a built-in op.
struct CustomOp {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>& inputs)> forward;
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& output,
                                    const Tensor& grad_output)>
      backward;
};
Tensor apply(const CustomOp& op, const std::vector<Tensor>& inputs);

// Number of tape nodes alive in this process (for leak tests and diagnostics).
int64_t live_nodes();

}  // namespace xg
