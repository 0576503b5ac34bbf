// The tape. Each op output that needs a gradient gets a Node holding its
// backward closure and edges to the nodes of its inputs; backward.cpp and
// grad.cpp walk them (autograd/detail/tape.h lists the files of the tape).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/detail/tape.h"
#include "autograd/ops.h"

namespace xg {

namespace detail {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly = false;
thread_local std::string g_scope;
thread_local const std::vector<std::shared_ptr<Node>>* g_backward_edges = nullptr;
thread_local Node* g_current_node = nullptr;
thread_local std::vector<std::pair<int64_t, std::function<void()>>> g_between_nodes;
thread_local std::vector<TracedOp>* g_trace = nullptr;
thread_local const std::unordered_set<const Node*>* g_needed = nullptr;
std::atomic<uint64_t> g_seq{0};
std::atomic<uint64_t> g_writes{0};  // count_in_place_write()
std::atomic<int64_t> g_live_nodes{0};
std::atomic<int64_t> g_hooks{0};
std::atomic<int64_t> g_hook_id{0};
}  // namespace detail

using namespace detail;

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

int64_t add_between_backward_nodes(std::function<void()> each) {
  const int64_t id = ++g_hook_id;
  g_between_nodes.emplace_back(id, std::move(each));
  return id;
}
void remove_between_backward_nodes(int64_t id) {
  auto& list = g_between_nodes;
  list.erase(std::remove_if(list.begin(), list.end(), [id](const auto& entry) { return entry.first == id; }), list.end());
}

int64_t live_nodes() { return g_live_nodes.load(); }

namespace {
// Inside a backward closure: the gradient edge of the running node's input
// i (null where that input needs no gradient, or outside backward).
const std::shared_ptr<Node>* input_edge(size_t i) {
  if (!g_backward_edges || i >= g_backward_edges->size() || !(*g_backward_edges)[i]) return nullptr;
  return &(*g_backward_edges)[i];
}
}  // namespace

bool needs_input_grad(size_t i) {
  if (!g_backward_edges || i >= g_backward_edges->size()) return true;
  const std::shared_ptr<Node>* e = input_edge(i);
  return e && (!g_needed || g_needed->count(e->get()));
}

namespace detail {

Tensor saved_output(const Tensor& out) {
  if (!g_grad_enabled || !g_current_node || !out.defined()) return out;
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = out.shape();
  impl->dtype = out.dtype();
  impl->buf = out.impl()->buf;
  impl->grad_fn = g_current_node->shared_from_this();
  return Tensor(std::move(impl));
}

Tensor input_with_values(size_t i, const Tensor& values) {
  const std::shared_ptr<Node>* e = input_edge(i);
  if (!g_grad_enabled || !e) return values.detach();
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = values.shape();
  impl->dtype = values.dtype();
  impl->buf = values.impl()->buf;
  impl->grad_fn = *e;
  return Tensor(std::move(impl));
}

Tensor alias(const Tensor& t) {
  return record("alias", t.detach(), {t}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

std::vector<Tensor> vjp_by_recompute(const std::function<Tensor(const std::vector<Tensor>&)>& composed,
                                     const std::vector<Tensor>& inputs, const Tensor& g) {
  std::vector<Tensor> aliases(inputs.size()), wanted;
  std::vector<size_t> where;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    // Every input with a gradient edge stays linked, not only those whose
    // gradient was asked for: under create_graph the gradients returned are
    // functions of all of them (d/dw of d/dx, a gradient penalty's terms).
    aliases[i] = input_edge(i) || needs_input_grad(i) ? alias(inputs[i]) : inputs[i].detach();
    if (needs_input_grad(i)) {
      wanted.push_back(aliases[i]);
      where.push_back(i);
    }
  }
  std::vector<Tensor> out(inputs.size());
  if (wanted.empty()) return out;
  const Tensor y = composed(aliases);
  GradOptions o;
  o.create_graph = true;
  o.allow_unused = true;
  std::vector<Tensor> gs = grad({y}, wanted, {g}, o);
  for (size_t k = 0; k < where.size(); ++k) out[where[k]] = gs[k];
  return out;
}

}  // namespace detail

void count_in_place_write() { g_writes.fetch_add(1, std::memory_order_relaxed); }

Node::Node() : seq(g_seq.fetch_add(1)), writes(g_writes.load(std::memory_order_relaxed)) { g_live_nodes.fetch_add(1); }

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

namespace detail {

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


}  // namespace detail

bool records(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && (t.impl()->grad_fn || t.impl()->requires_grad)) return true;
  return false;
}

namespace {
Tensor record_on_tape(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward,
                      const std::vector<Tensor>& saved) {
  if (g_anomaly && !g_backward_edges) check_forward(op, output, inputs);
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
    node->input_dtypes.push_back(t.defined() ? t.dtype() : Dtype::f32);
    const Node* in = node->next.back().get();
    if (in && !in->leaf) node->writes = std::min(node->writes, in->writes);
  }
  if (g_anomaly || g_profile) node->scope = g_scope;
  node->saved.reserve(saved.size());
  for (size_t k = 0; k < saved.size(); ++k) {
    const Tensor& t = saved[k];
    if (!t.defined()) continue;
    const auto& buf = t.impl()->buf;
    int64_t which = SavedVersion::kSavedOther - static_cast<int64_t>(k);
    if (buf == output.impl()->buf) which = SavedVersion::kSavedOutput;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].impl()->buf == buf) {
        which = static_cast<int64_t>(i);
        break;
      }
    node->saved.push_back({buf, buf->version.load(std::memory_order_relaxed), which, which >= 0 ? Shape{} : t.shape()});
  }
  // The output may share storage with an input (reshape); give it its own impl.
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = output.shape();
  impl->dtype = output.dtype();
  impl->buf = output.impl()->buf;
  impl->grad_fn = std::move(node);
  return Tensor(std::move(impl));
}
}  // namespace

Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward,
              const std::vector<Tensor>& saved) {
  // The op's kernels ran before this call: its forward time ends here.
  if (g_profile && !g_backward_edges) g_profile->charge("forward", g_scope, op);
  Tensor out = record_on_tape(op, std::move(output), inputs, std::move(backward), saved);
  // The trace lists the tensor returned (a recorded output gets its own impl).
  if (g_trace) g_trace->push_back(TracedOp{op, g_scope, inputs, out, attr::None{}, {}});
  return out;
}

TraceGuard::TraceGuard(std::vector<TracedOp>& ops) : prev_(g_trace) { g_trace = &ops; }
TraceGuard::~TraceGuard() { g_trace = prev_; }
bool tracing() { return g_trace != nullptr; }

int64_t Tensor::add_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) {
  if (!defined() || !impl_->requires_grad || impl_->grad_fn)
    throw std::logic_error("add_post_accumulate_grad_hook: only leaves that require grad accumulate a gradient");
  if (!hook) throw std::invalid_argument("add_post_accumulate_grad_hook: the hook is empty");
  const int64_t id = g_hook_id.fetch_add(1) + 1;
  impl_->post_accumulate_hooks.emplace_back(id, std::move(hook));
  g_hooks.fetch_add(1);
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(int64_t id) {
  if (!defined()) return;
  auto& hooks = impl_->post_accumulate_hooks;
  for (auto it = hooks.begin(); it != hooks.end(); ++it)
    if (it->first == id) {
      hooks.erase(it);
      g_hooks.fetch_sub(1);
      return;
    }
}

}  // namespace xg
