// The steps every walk over the tape takes, and backward()'s walk: each
// node, latest first, runs its backward and sends the gradients on; leaves
// accumulate theirs into grad().
#include <cmath>
#include <sstream>

#include "autograd/detail/tape.h"
#include "autograd/ops.h"

namespace xg {

using namespace detail;

namespace {

// The checks of backward, each named for what it guards.

// A node reached again after a backward without retain_graph freed it.
void check_not_released(const Node& node) {
  if (node.released)
    throw std::logic_error(std::string("backward: the graph through ") + node.op +
                           " was already freed by an earlier backward(); pass retain_graph=true to the first "
                           "call to backward through it twice");
}

// Runs a node's backward function: one gradient per input (undefined where
// an input needs none).
std::vector<Tensor> call_backward(Node& node, const Tensor& g) {
  // Saved and restored: a backward formula may itself run xg::grad (a fused
  // op's second order by recomputation).
  struct Restore {
    const std::vector<std::shared_ptr<Node>>* edges = g_backward_edges;
    Node* current = g_current_node;
    ~Restore() {
      g_backward_edges = edges;
      g_current_node = current;
    }
  } restore;
  g_backward_edges = &node.next;
  g_current_node = &node;
  if (g_profile) g_profile->charge("between", "", "backward walk");  // the walk's own work since the last node
  std::vector<Tensor> in_grads = node.fn(g);
  if (g_profile) g_profile->charge("backward", node.scope, node.op);
  for (const auto& entry : g_between_nodes) entry.second();
  if (in_grads.size() != node.next.size())
    throw std::logic_error(std::string("backward of ") + node.op + " returned " + std::to_string(in_grads.size()) +
                           " gradients for " + std::to_string(node.next.size()) + " inputs");
  return in_grads;
}

// Adds g to a leaf's .grad.
void accumulate_into_leaf(TensorImpl& leaf, Tensor g) {
  if (leaf.grad.defined())
    accumulate(leaf.grad, g);
  else if (g.impl().use_count() == 1 && g.impl()->buf.use_count() == 1)
    leaf.grad = std::move(g);  // no other tensor sees these values: keep them, no copy
  else
    leaf.grad = g.clone();  // g shares storage with another tensor (a pass-through, a reshape, the seed)
}

}  // namespace

namespace detail {

thread_local GradSlots* g_grad_slots = nullptr;

Tensor accumulating_grad(size_t i) {
  GradSlots* s = g_grad_slots;
  // Only the node backward() is running now: not a node of a walk that its
  // backward runs inside (a second order by recomputation).
  if (!s || g_anomaly || g_current_node != s->node || i >= s->node->next.size() || s->took(i)) return {};
  const Node* input = s->node->next[i].get();
  if (!input) return {};
  // Not when another edge of this node leads to the same input: its gradient
  // would be sent into the same sum while the formula holds it.
  for (size_t j = 0; j < s->node->next.size(); ++j)
    if (j != i && s->node->next[j].get() == input) return {};
  Tensor* slot = s->pass->waiting(input);
  if (!slot || !writable_alone(*slot) || slot->dtype() != s->node->input_dtypes[i] ||
      slot->shape() != s->node->input_shapes[i] || channel_block(*slot) != 0)
    return {};
  s->taken.resize(s->node->next.size(), 0);  // only for the nodes that take one
  s->taken[i] = 1;
  return *slot;
}

// Whether every tensor the node saved is at the version it was saved at.
bool saved_versions_match(const Node& node) {
  for (const SavedVersion& sv : node.saved)
    if (sv.buf->version.load(std::memory_order_relaxed) != sv.version) return false;
  return true;
}

// A saved tensor modified in place since the op saved it: the gradient
// would be computed from the wrong values.
void check_saved_versions(const Node& node) {
  for (const SavedVersion& sv : node.saved) {
    const uint64_t now = sv.buf->version.load(std::memory_order_relaxed);
    if (now == sv.version) continue;
    const std::string what =
        sv.which >= 0 ? "input " + std::to_string(sv.which) + " " + shape_str(node.input_shapes[sv.which])
        : sv.which == SavedVersion::kSavedOutput
            ? "output " + shape_str(sv.shape)
            : "saved tensor " + std::to_string(SavedVersion::kSavedOther - sv.which) + " " + shape_str(sv.shape);
    throw std::logic_error("backward of " + where_str(node.op, node.scope) + ": its " + what +
                           ", saved for the gradient, was modified in place after " + node.op +
                           " used it (version " + std::to_string(sv.version) + " when saved, " +
                           std::to_string(now) + " now). Modify a clone() instead, or only after backward().");
  }
}

// Whether an in-place write has been counted since the oldest node of the
// roots' histories was recorded: if not, no saved tensor of theirs changed,
// and the check of them all before a walk can be skipped.
bool written_since_recorded(const std::vector<std::shared_ptr<Node>>& roots) {
  const uint64_t now = g_writes.load(std::memory_order_relaxed);
  for (const auto& r : roots)
    if (!r->leaf && r->writes != now) return true;
  return false;
}

// The gradient a backward returned for input i has the input's dtype and
// shape and, in anomaly mode, is finite.
void check_input_gradient(const Node& node, size_t i, const Tensor& gi, const Tensor& g) {
  if (gi.dtype() != node.input_dtypes[i])
    throw std::logic_error(std::string("backward of ") + node.op + ": gradient for input " + std::to_string(i) +
                           " is " + dtype_name(gi.dtype()) + ", the input is " + dtype_name(node.input_dtypes[i]));
  if (gi.shape() != node.input_shapes[i])
    throw std::logic_error(std::string("backward of ") + node.op + ": gradient for input " + std::to_string(i) +
                           " has shape " + shape_str(gi.shape()) + ", expected " + shape_str(node.input_shapes[i]));
  check_finite_gradient(node, i, gi, g);
}

std::vector<std::shared_ptr<Node>> root_nodes(const std::vector<Tensor>& roots) {
  std::vector<std::shared_ptr<Node>> nodes;
  for (const Tensor& root : roots) {
    std::shared_ptr<Node> n = gradient_edge(root);
    if (!n)
      throw std::logic_error("backward: tensor does not require grad and has no grad_fn "
                             "(did you forget requires_grad_() on a leaf, or run under NoGradGuard?)");
    check_not_released(*n);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::vector<Tensor> run_node(Node& node, const Tensor& g) {
  check_not_released(node);
  // Checked before the walk too; again here because a hook, or a backward
  // function, may have written to a saved tensor since.
  check_saved_versions(node);
  if (g_anomaly) check_finite_in(node, g);
  return call_backward(node, g);
}

void release(Node& node) {
  node.fn = nullptr;
  node.saved.clear();
  node.released = true;
}

// The seeds of a walk: the given gradients, or ones for single-element
// outputs; each checked against its output.
std::vector<Tensor> seeds(const char* who, const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs) {
  if (outputs.empty()) throw std::invalid_argument(std::string(who) + ": no outputs given");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(grad_outputs.size()) +
                                " grad_outputs for " + std::to_string(outputs.size()) + " outputs");
  std::vector<Tensor> gs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& y = outputs[k];
    if (!y.defined()) throw std::invalid_argument(std::string(who) + ": output " + std::to_string(k) + " is undefined");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[k];
    if (!g.defined()) {
      if (y.numel() != 1)
        throw ShapeError(std::string(who) + ": output " + std::to_string(k) + " has shape " + shape_str(y.shape()) +
                         " and no gradient was given; only a single-element output can be its own seed");
      g = ones(y.shape(), y.dtype());
    }
    if (g.shape() != y.shape() || g.dtype() != y.dtype())
      throw ShapeError(std::string(who) + ": gradient " + shape_str(g.shape()) + " " + dtype_name(g.dtype()) +
                       " does not match output " + std::to_string(k) + " " + shape_str(y.shape()) + " " +
                       dtype_name(y.dtype()));
    gs.push_back(std::move(g));
  }
  return gs;
}

}  // namespace detail

namespace {

// run_node with the walk's waiting gradients offered to the node's backward
// (accumulating_grad), the previous offer restored after.
std::vector<Tensor> run_with_slots(Node& node, const Tensor& g, GradSlots& slots) {
  struct Restore {
    GradSlots* prev = g_grad_slots;
    ~Restore() { g_grad_slots = prev; }
  } restore;
  g_grad_slots = &slots;
  return run_node(node, g);
}

// backward()'s walk: every node reachable from the roots runs, and the
// gradients reaching leaves accumulate into their grad(). Before it, the
// saved tensors of every node are checked (BackwardPass), so a version
// mismatch changes no grad().
void backward_walk(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs, bool retain_graph,
                   bool create_graph) {
  GradModeScope mode(create_graph);
  g_needed = nullptr;
  const std::vector<std::shared_ptr<Node>> nodes = root_nodes(roots);
  BackwardPass pass(nodes, /*hooks=*/true);
  for (size_t k = 0; k < nodes.size(); ++k) pass.send(nodes[k], grad_outputs[k]);
  for (auto [node, g] = pass.next(); node; std::tie(node, g) = pass.next()) {
    if (node->leaf) {
      accumulate_into_leaf(*node->leaf, std::move(g));
      pass.leaf_accumulated(node);
      continue;
    }
    GradSlots slots{&pass, node, {}};
    const std::vector<Tensor> in_grads = run_with_slots(*node, g, slots);
    for (size_t i = 0; i < node->next.size(); ++i) {
      const std::shared_ptr<Node>& input = node->next[i];
      if (!input) continue;
      pass.edge_walked(input.get(), in_grads[i]);
      if (slots.took(i)) {  // the backward added its gradient into the waiting one
        const Tensor* waiting = pass.waiting(input.get());
        if (!waiting || in_grads[i].impl() != waiting->impl())
          throw std::logic_error(std::string("backward of ") + node->op + " took input " + std::to_string(i) +
                                 "'s waiting gradient (accumulating_grad) but did not return it");
        waiting->impl()->buf->version.fetch_add(1, std::memory_order_relaxed);  // written in place, as add_in_place
        continue;
      }
      if (!in_grads[i].defined()) continue;
      check_input_gradient(*node, i, in_grads[i], g);
      pass.send(input, in_grads[i]);
    }
    if (!retain_graph) release(*node);
  }
  if (!retain_graph) pass.unlink();
}

}  // namespace

void Tensor::backward(bool retain_graph, bool create_graph) const {
  if (numel() != 1)
    throw ShapeError("backward: called on a tensor of shape " + shape_str(shape()) +
                     " without a gradient; only a single-element tensor can be its own seed");
  backward(ones(shape(), dtype()), retain_graph, create_graph);
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  if (grad_output.shape() != shape() || grad_output.dtype() != dtype())
    throw ShapeError("backward: gradient " + shape_str(grad_output.shape()) + " " + dtype_name(grad_output.dtype()) +
                     " does not match output " + shape_str(shape()) + " " + dtype_name(dtype()));
  backward_walk({*this}, {grad_output}, retain_graph || create_graph, create_graph);
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, const GradOptions& o) {
  const std::vector<Tensor> gs = seeds("backward", outputs, grad_outputs);
  backward_walk(outputs, gs, o.retain_graph.value_or(o.create_graph), o.create_graph);
}

}  // namespace xg
