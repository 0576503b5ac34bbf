// Export trace: while a TraceGuard is alive, every op this thread passes
// through record() is also listed, with its inputs, its output, the module
// that ran it and the attributes an exporter needs (a reshape's shape, a
// permute's order, a reduction's axes). The tape itself keeps none of that:
// training pays one thread-local test per op, nothing more (docs/onnx.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg {

// One op as it ran. `inputs` are record()'s inputs (an undefined tensor where
// an optional input was absent: linear's bias); `output` is the tensor the op
// returned. The attributes' meaning is per op, listed in docs/onnx.md:
//   ints   permute: the order; sum, mean: the axes (normalised) then keepdims;
//          softmax, log_softmax, concat: the axis (normalised); slice: the axis
//          (normalised), then start, end and step as given (Python's bounds);
//          mean relabels the sum and the scaling it is made of as one op.
//          vector_norm: the axes (normalised) then keepdims;
//   reals  add_scalar, mul_scalar: the scalar; pow: the exponent; layer_norm, add_layer_norm: eps;
//          the activations: their options in PyTorch's order (leaky_relu: the slope; hardtanh:
//          min, max; elu, selu, celu: alpha, scale, 1/alpha or 1; softplus: beta, threshold;
//          softshrink, hardshrink: lambd; threshold: threshold, value); vector_norm: ord
//   extra  tensors the op reads that are not on the tape: gather_rows' ids
//          (int64), where's condition, a comparison's two operands.
struct TracedOp {
  std::string op;              // record()'s name: "linear", "reshape", ...
  std::string scope;           // the innermost module's description (NameScope), "" if none
  std::vector<Tensor> inputs;  // record()'s inputs, in its order
  Tensor output;               // the tensor the op returned
  std::vector<int64_t> ints;   // integer attributes (above)
  std::vector<double> reals;   // real attributes (above)
  std::vector<Tensor> extra;   // tensors read beside the inputs (above)
};

// Lists into `ops` every op this thread records while alive (whether or not
// grad mode is on or any input requires grad); the previous trace, if any,
// comes back at the end. Modules name themselves (NameScope) while it is alive.
class TraceGuard {
 public:
  explicit TraceGuard(std::vector<TracedOp>& ops);  // lists into `ops` from now on
  ~TraceGuard();                                    // the previous trace (or none) again
  // Not copyable: a scope guard.
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;

 private:
  std::vector<TracedOp>* prev_;
};
bool tracing();  // whether a TraceGuard is alive on this thread

}  // namespace xg
