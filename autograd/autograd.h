// The tape: grad mode, the no-grad guard, and how an op records its backward.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/parallel.h"
#include "autograd/tensor.h"

namespace xg {

// Grad mode, per thread and on by default: while it is off, no op records
// anything (the outputs have no history).
bool grad_enabled();
void set_grad_enabled(bool on);

// RAII: no op records anything while a guard is alive.
class NoGradGuard {
 public:
  NoGradGuard();   // turns grad mode off on this thread
  ~NoGradGuard();  // restores the previous mode
  // Not copyable: a scope guard.
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
// values it needs (detached), never the output tensor itself. `saved` lists
// the tensors whose values `backward` reads (inputs, the output, or values of
// its own): their versions are recorded here, and backward throws
// std::logic_error naming the op if one was modified in place since.
// Throws std::logic_error if an input's graph was already freed by backward().
// In anomaly mode, also checks the output for NaN/Inf (AnomalyError).
// Under a TraceGuard (autograd/trace.h), also lists the op, whatever grad
// mode and the inputs, with the tensor returned.
Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward,
              const std::vector<Tensor>& saved = {});

// Inside a backward closure: whether the gradient of input i reaches a leaf
// that requires grad. Backward formulas skip the inputs that return false (their
// result is dropped anyway); outside backward it returns true.
bool needs_input_grad(size_t i);

// Anomaly mode (per thread, like grad mode): while a guard is alive, every
// op's output in forward and every gradient in backward is checked for NaN
// and Inf, and the first non-finite value throws AnomalyError naming the op,
// the module that ran it (its dotted path, such as
// "decoder.1.self_attn") and the shapes. Costs one pass over every
// value; for debugging.
struct AnomalyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
bool anomaly_enabled();  // whether anomaly mode is on for this thread
// RAII: anomaly mode on this thread while it is alive.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool on = true);  // on == false turns it off instead
  ~DetectAnomalyGuard();                        // restores the previous mode
  // Not copyable: a scope guard.
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

// Runs `each` on this thread after every node's backward formula, until
// remove_between_backward_nodes(id) on this thread; returns the id. For work
// that must advance between formulas rather than wait for the walk to end:
// dist::DataParallel moves its non-blocking gradient exchange forward this
// way, since MPI progresses it only inside MPI calls. `each` must not add or
// remove such functions.
int64_t add_between_backward_nodes(std::function<void()> each);
void remove_between_backward_nodes(int64_t id);  // an id unknown on this thread is ignored

// Names the ops created while it is alive, for anomaly messages; the previous
// name comes back when it ends. Modules open one in forward (Module::scope(),
// "MultiHeadAttention(d_model=512, heads=8) 'decoder.1.self_attn'"). Does
// nothing outside anomaly mode and export traces (TraceGuard).
class NameScope {
 public:
  explicit NameScope(std::string name);  // "" names nothing (the current name stays)
  ~NameScope();
  // Not copyable: a scope guard.
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  std::string prev_;
  bool active_ = false;
};
std::string current_scope();  // "" outside any scope or outside anomaly mode

// Settings of grad() and backward(outputs).
struct GradOptions {
  // Record the backward pass itself on the tape, so that the gradients
  // returned are differentiable tensors (a gradient penalty, a Hessian-vector
  // product). Off: nothing is recorded, and the walk is the first-order one.
  bool create_graph = false;
  // Keep the graph's saved values after the walk (for another walk through
  // it); unset means "as create_graph".
  std::optional<bool> retain_graph;
  // An input that no output depends on gets an undefined tensor; without it,
  // that is an error naming the input.
  bool allow_unused = false;
};

// The gradients of the outputs with respect to `inputs` (leaves or any
// tensor on the tape), weighted by grad_outputs (one per output, each of its
// output's shape; empty or undefined means ones for a single-element output),
// as torch.autograd.grad. Touches no grad(); runs only the part of the graph
// between the outputs and the inputs. Throws std::logic_error for an input
// that does not require grad, or is unused without allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});
// Backward from several outputs at once, accumulating into the leaves' grad()
// (torch.autograd.backward); allow_unused is ignored.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              const GradOptions& options = {});

// A user-defined differentiable op. `forward` runs with grad mode off on the
// inputs; `backward` receives the inputs and the output (detached) and the
// output's gradient, and returns one gradient per input (each of that
// input's shape, or undefined). The result behaves like a built-in op.
struct CustomOp {
  std::string name;  // the op's name in error and anomaly messages
  std::function<Tensor(const std::vector<Tensor>& inputs)> forward;  // inputs -> output
  // (inputs, output, grad_output) -> one gradient per input.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& output,
                                    const Tensor& grad_output)>
      backward;
  // Whether `backward` is written with xgrad ops on the tensors it receives,
  // so that it can itself be differentiated (create_graph). When true, it is
  // given the inputs with their history and the output linked to this op;
  // when false (the default) it runs without the tape, and differentiating
  // its result again throws std::logic_error naming the op.
  bool twice_differentiable = false;
};
// Runs op.forward and records op.backward on the tape. Throws
// std::invalid_argument if either is missing, std::logic_error if forward
// returns an undefined tensor; backward() throws std::logic_error if
// op.backward returns other than one gradient per input.
Tensor apply(const CustomOp& op, const std::vector<Tensor>& inputs);

// Number of tape nodes alive in this process (for leak tests and diagnostics).
int64_t live_nodes();

}  // namespace xg
