// Trace: while a TraceGuard is alive, every op this thread passes through
// record() is also listed, with its inputs, its output, the module that ran
// it and its attributes (a permute's order, a reduction's axes, a window),
// for a program that writes the computation out (an exporter). The tape
// itself keeps none of that: training pays one thread-local test per op.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "autograd/tensor.h"

namespace xg {

// The attributes of a traced op, one struct per family of ops, read by name.
// The attribute structs, one per family of traced ops.
namespace attr {
// An op with no attributes.
struct None {};
// permute
struct Permutation {
  std::vector<int64_t> order;  // output axis i is input axis order[i]
};
// sum, mean
struct Axes {
  std::vector<int64_t> axes;  // the reduced axes, normalised
  bool keepdims = false;      // reduced axes kept as size 1
};
// vector_norm
struct Norm {
  std::vector<int64_t> axes;  // the reduced axes, normalised
  bool keepdims = false;      // reduced axes kept as size 1
  double ord = 2;             // the norm's order
};
// softmax, log_softmax, concat
struct Axis {
  int64_t axis = 0;  // normalised
};
// slice, slice_like
struct Slice {
  int64_t axis = 0;                        // normalised
  int64_t start = 0;                       // as given (Python's bounds)
  int64_t end = 0;                         // as given
  int64_t step = 1;                        // as given
  int64_t like_axis = -1;                  // slice_like: the length is this axis of extra[0]; -1 for slice
};
// broadcast_like
struct BroadcastLike {
  int64_t axis = 0;       // the size-1 axis broadcast
  int64_t like_axis = 0;  // to the size of this axis of extra[0]
};
// add_scalar, mul_scalar, pow (the exponent), layer_norm and batch_norm (eps), masked_fill (the value)
struct Scalar {
  double value = 0;  // the scalar, exponent, eps or fill value
};
// the activations: their options in PyTorch's order
struct Params {
  std::vector<double> values;  // leaky_relu: the slope; hardtanh: min, max; ...
};
// conv1d, conv2d, conv_transpose2d, max_pool2d, avg_pool2d; one value per spatial axis
struct Window {
  std::vector<int64_t> kernel;          // the window's (a convolution's is its weight's last sizes)
  std::vector<int64_t> stride;          // between windows
  std::vector<int64_t> pad_begin;       // implicit positions before each axis (a transposed convolution's: taken off)
  std::vector<int64_t> pad_end;         // and after
  std::vector<int64_t> dilation;        // between taps
  std::vector<int64_t> output_padding;  // conv_transpose2d's
  int64_t groups = 1;                   // convolutions'
  bool ceil_mode = false;               // pooling's
  bool count_include_pad = true;        // avg_pool2d's
  int64_t divisor_override = 0;         // avg_pool2d's, 0 for none
};
// adaptive_avg_pool2d
struct OutputSize {
  std::vector<int64_t> size;  // the output's spatial size
};
// attention
struct Attention {
  int64_t heads = 1;        // H
  bool causal = false;      // query i sees keys j <= i
  int64_t kv_length = 0;    // keys read (0: all)
  double scale = 1;         // the scores' scale, as computed
};
// recurrent_layer
struct Recurrent {
  int cell = 0;          // the RecurrentCell (autograd/ops.h), as an int
  bool reverse = false;  // the backward direction
};
// recurrent_state
struct RecurrentState {
  bool cell_state = false;  // c_n (else h_n) of its recurrent_layer input
};
// id_mask
struct Id {
  int64_t id = 0;  // the id marked
};
}  // namespace attr
// One of the structs above.
using TraceAttrs = std::variant<attr::None, attr::Permutation, attr::Axes, attr::Norm, attr::Axis, attr::Slice,
                                attr::BroadcastLike, attr::Scalar, attr::Params, attr::Window, attr::OutputSize,
                                attr::Attention, attr::Recurrent, attr::RecurrentState, attr::Id>;

// One op as it ran. `inputs` are record()'s inputs (an undefined tensor where
// an optional input was absent: linear's bias); `output` is the tensor the op
// returned; `attrs` its attributes; `extra` the tensors it reads that are
// not on the tape (gather_rows' ids, where's condition, a comparison's two
// operands, attention's padding mask, slice_like's and broadcast_like's
// `like`, a recurrent layer's lengths).
struct TracedOp {
  std::string op;              // record()'s name: "linear", "reshape", ...
  std::string scope;           // the innermost module's description (NameScope), "" if none
  std::vector<Tensor> inputs;  // record()'s inputs, in its order
  Tensor output;               // the tensor the op returned
  TraceAttrs attrs;            // its attributes (attr::None when it has none)
  std::vector<Tensor> extra;   // tensors read beside the inputs (above)
  // The attributes as the struct A; std::bad_variant_access if they are another.
  template <class A>
  const A& attr() const {
    return std::get<A>(attrs);
  }
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
