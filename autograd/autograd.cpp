// The tape. Each op output that needs a gradient gets a Node holding its
// backward closure and edges to the nodes of its inputs. backward() walks the
// nodes in reverse creation order (a valid reverse topological order, since
// an op's node is always created after its inputs' nodes), with no recursion.
#include <queue>
#include <unordered_map>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"

namespace xg {

namespace {
thread_local bool g_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};
std::atomic<int64_t> g_live_nodes{0};
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
int64_t live_nodes() { return g_live_nodes.load(); }

Node::Node() : seq(g_seq.fetch_add(1)) { g_live_nodes.fetch_add(1); }

Node::~Node() {
  // Destroying the head of a long chain would otherwise recurse once per node.
  // Children whose last owner is this node are parked and destroyed in a loop.
  thread_local bool draining = false;
  thread_local std::vector<std::shared_ptr<Node>> parked;
  for (auto& n : next)
    if (n) parked.push_back(std::move(n));
  next.clear();
  g_live_nodes.fetch_sub(1);
  if (draining) return;
  draining = true;
  while (!parked.empty()) {
    std::shared_ptr<Node> n = std::move(parked.back());
    parked.pop_back();
    n.reset();  // may park its own children
  }
  draining = false;
}

namespace {

// The node that carries gradient into `t`: its producer, or (for a leaf that
// requires grad) its accumulator, created once and shared by all uses.
std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  const auto& impl = t.impl();
  if (impl->grad_fn) return impl->grad_fn;
  if (!impl->requires_grad) return nullptr;
  auto acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<Node>();
    acc->op = "accumulate_grad";
    acc->leaf = impl;
    impl->grad_accumulator = acc;
  }
  return acc;
}

}  // namespace

Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!g_grad_enabled) return output;
  bool any = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    const auto& impl = t.impl();
    if (impl->grad_fn && impl->grad_fn->released)
      throw std::logic_error(std::string(op) +
                             ": an input was produced by a graph that backward() has already freed. "
                             "To keep a running loss for logging, accumulate loss.item() or loss.detach(); "
                             "to call backward twice through one graph, pass retain_graph=true.");
    any = any || impl->grad_fn || impl->requires_grad;
  }
  if (!any) return output;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->fn = std::move(backward);
  node->next.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next.push_back(t.defined() ? gradient_edge(t) : nullptr);
    node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
  }
  // The output may share storage with an input (reshape); give it its own impl.
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = output.shape();
  impl->dtype = output.dtype();
  impl->buf = output.impl()->buf;
  impl->grad_fn = std::move(node);
  return Tensor(std::move(impl));
}

namespace {

void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
    return;
  }
  slot = add(slot, g);
}

void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  NoGradGuard no_grad;
  auto root_node = gradient_edge(root);
  if (!root_node)
    throw std::logic_error("backward: tensor does not require grad and has no grad_fn "
                           "(did you forget requires_grad_() on a leaf, or run under NoGradGuard?)");
  if (root_node->released)
    throw std::logic_error("backward: this graph was already freed by an earlier backward(); "
                           "pass retain_graph=true to the first call to backward through it twice");
  auto later = [](Node* a, Node* b) { return a->seq < b->seq; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  std::unordered_map<Node*, Tensor> grads;
  // Keep every visited node alive until the walk ends, even if releasing a
  // node drops the last reference to one of its inputs' nodes.
  std::vector<std::shared_ptr<Node>> visited;

  grads[root_node.get()] = grad_output;
  ready.push(root_node.get());
  visited.push_back(root_node);
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor g = std::move(grads[node]);
    grads.erase(node);
    if (node->leaf) {
      TensorImpl& leaf = *node->leaf;
      if (leaf.grad.defined())
        leaf.grad = add(leaf.grad, g);
      else if (g.impl().use_count() == 1 && g.impl()->buf.use_count() == 1)
        leaf.grad = std::move(g);  // no other tensor sees these values: keep them, no copy
      else
        leaf.grad = g.clone();  // g shares storage with another tensor (a pass-through, a reshape, the seed)
      continue;
    }
    if (node->released)
      throw std::logic_error(std::string("backward: the graph through ") + node->op +
                             " was already freed by an earlier backward(); pass retain_graph=true");
    std::vector<Tensor> in_grads = node->fn(g);
    if (in_grads.size() != node->next.size())
      throw std::logic_error(std::string("backward of ") + node->op + " returned " +
                             std::to_string(in_grads.size()) + " gradients for " +
                             std::to_string(node->next.size()) + " inputs");
    for (size_t i = 0; i < node->next.size(); ++i) {
      const auto& nx = node->next[i];
      if (!nx || !in_grads[i].defined()) continue;
      if (in_grads[i].shape() != node->input_shapes[i])
        throw std::logic_error(std::string("backward of ") + node->op + ": gradient for input " + std::to_string(i) +
                               " has shape " + shape_str(in_grads[i].shape()) + ", expected " +
                               shape_str(node->input_shapes[i]));
      auto it = grads.find(nx.get());
      if (it == grads.end()) {
        grads.emplace(nx.get(), in_grads[i]);
        ready.push(nx.get());
        visited.push_back(nx);
      } else {
        accumulate(it->second, in_grads[i]);
      }
    }
    if (!retain_graph) {
      node->fn = nullptr;  // drops the saved values
      node->released = true;
    }
  }
  if (!retain_graph)
    for (auto& n : visited) n->next.clear();
}

}  // namespace

void Tensor::backward(bool retain_graph) const {
  if (numel() != 1)
    throw ShapeError("backward: called on a tensor of shape " + shape_str(shape()) +
                     " without a gradient; only a single-element tensor can be its own seed");
  backward(ones(shape(), dtype()), retain_graph);
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  if (grad_output.shape() != shape() || grad_output.dtype() != dtype())
    throw ShapeError("backward: gradient " + shape_str(grad_output.shape()) + " " + dtype_name(grad_output.dtype()) +
                     " does not match output " + shape_str(shape()) + " " + dtype_name(dtype()));
  run_backward(*this, grad_output, retain_graph);
}

Tensor apply(const CustomOp& op, const std::vector<Tensor>& inputs) {
  if (!op.forward || !op.backward)
    throw std::invalid_argument("apply: custom op '" + op.name + "' needs both forward and backward");
  Tensor out;
  {
    NoGradGuard g;
    out = op.forward(inputs);
  }
  if (!out.defined()) throw std::logic_error("apply: forward of custom op '" + op.name + "' returned no tensor");
  std::vector<Tensor> saved;
  for (const Tensor& t : inputs) saved.push_back(t.defined() ? t.detach() : Tensor());
  Tensor saved_out = out.detach();
  auto bw = op.backward;
  std::string name = op.name;
  return record(name.c_str(), out, inputs, [bw, saved, saved_out, name](const Tensor& g) {
    std::vector<Tensor> grads = bw(saved, saved_out, g);
    if (grads.size() != saved.size())
      throw std::logic_error("custom op '" + name + "': backward returned " + std::to_string(grads.size()) +
                             " gradients for " + std::to_string(saved.size()) + " inputs");
    return grads;
  });
}

}  // namespace xg
