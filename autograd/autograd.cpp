// The tape. Each op output that needs a gradient gets a Node holding its
// backward closure and edges to the nodes of its inputs. backward() walks the
// nodes in reverse creation order (a valid reverse topological order, since
// an op's node is always created after its inputs' nodes), with no recursion.
#include <cmath>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"

namespace xg {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly = false;
thread_local std::string g_scope;  // the innermost NameScope (anomaly mode only)
thread_local const std::vector<std::shared_ptr<Node>>* g_backward_edges = nullptr;  // of the node running backward
thread_local Node* g_current_node = nullptr;  // the node whose backward runs
// xg::grad: the nodes through which a gradient reaches an input asked for
// (null in backward(), where every node runs).
thread_local const std::unordered_set<const Node*>* g_needed = nullptr;
// (the ops a backward formula runs are not checked one by one: its results are)
std::atomic<uint64_t> g_seq{0};
std::atomic<uint64_t> g_writes{0};  // count_in_place_write()
std::atomic<int64_t> g_live_nodes{0};
std::atomic<int64_t> g_hooks{0};     // post-accumulate-grad hooks registered, process-wide
std::atomic<int64_t> g_hook_id{0};
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
int64_t live_nodes() { return g_live_nodes.load(); }

bool anomaly_enabled() { return g_anomaly; }
DetectAnomalyGuard::DetectAnomalyGuard(bool on) : prev_(g_anomaly) { g_anomaly = on; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = prev_; }

NameScope::NameScope(std::string name) {
  if (!g_anomaly || name.empty()) return;
  active_ = true;
  prev_ = std::move(g_scope);
  g_scope = std::move(name);
}
NameScope::~NameScope() {
  if (active_) g_scope = std::move(prev_);
}
std::string current_scope() { return g_anomaly ? g_scope : std::string(); }

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

int64_t first_nonfinite(const Tensor& t) {
  if (t.dtype() == Dtype::i64) return -1;  // every integer is finite
  return dispatch(t.dtype(), [&](auto z) -> int64_t {
    const auto* p = t.data<decltype(z)>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  });
}

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

namespace {

std::string value_str(const Tensor& t, int64_t i) {
  const double v = t.dtype() == Dtype::f32 ? t.data<float>()[i] : t.data<double>()[i];
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

std::string where_str(const std::string& op, const std::string& scope) {
  return scope.empty() ? op : op + " (in " + scope + ")";
}

// Anomaly mode, forward: the output of `op` must be finite.
void check_forward(const char* op, const Tensor& out, const std::vector<Tensor>& inputs) {
  const int64_t bad = first_nonfinite(out);
  if (bad < 0) return;
  std::ostringstream m;
  m << "anomaly: " << where_str(op, g_scope) << " produced " << value_str(out, bad) << " at flat index " << bad
    << " of its output " << shape_str(out.shape()) << " " << dtype_name(out.dtype()) << "; inputs:";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    m << " " << i << " " << shape_str(inputs[i].shape());
    const int64_t j = first_nonfinite(inputs[i]);
    if (j >= 0) m << " (already holds " << value_str(inputs[i], j) << " at " << j << ")";
    else m << " (finite)";
  }
  throw AnomalyError(m.str());
}

}  // namespace

bool records(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && (t.impl()->grad_fn || t.impl()->requires_grad)) return true;
  return false;
}

Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward,
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
  if (g_anomaly) node->scope = g_scope;
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

namespace {

void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
    return;
  }
  slot = add(slot, g);
}

// The checks of backward, each named for what it guards.

// A node reached again after a backward without retain_graph freed it.
void check_not_released(const Node& node) {
  if (node.released)
    throw std::logic_error(std::string("backward: the graph through ") + node.op +
                           " was already freed by an earlier backward(); pass retain_graph=true");
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

// Anomaly mode: the gradient flowing into a node's backward is finite.
void check_finite_in(const Node& node, const Tensor& g) {
  const int64_t bad = first_nonfinite(g);
  if (bad >= 0)
    throw AnomalyError("anomaly: the gradient flowing into " + where_str(node.op, node.scope) + "'s backward holds " +
                       value_str(g, bad) + " at flat index " + std::to_string(bad) + " of " + shape_str(g.shape()));
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
  if (!g_anomaly) return;
  const int64_t bad = first_nonfinite(gi);
  if (bad >= 0)
    throw AnomalyError("anomaly: backward of " + where_str(node.op, node.scope) + " produced " + value_str(gi, bad) +
                       " at flat index " + std::to_string(bad) + " of the gradient for input " + std::to_string(i) +
                       " " + shape_str(gi.shape()) + " from a finite output gradient " + shape_str(g.shape()));
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
  std::vector<Tensor> in_grads = node.fn(g);
  if (in_grads.size() != node.next.size())
    throw std::logic_error(std::string("backward of ") + node.op + " returned " + std::to_string(in_grads.size()) +
                           " gradients for " + std::to_string(node.next.size()) + " inputs");
  return in_grads;
}

// Adds g to a leaf's .grad.
void accumulate_into_leaf(TensorImpl& leaf, Tensor g) {
  if (leaf.grad.defined())
    leaf.grad = add(leaf.grad, g);
  else if (g.impl().use_count() == 1 && g.impl()->buf.use_count() == 1)
    leaf.grad = std::move(g);  // no other tensor sees these values: keep them, no copy
  else
    leaf.grad = g.clone();  // g shares storage with another tensor (a pass-through, a reshape, the seed)
}

// The state of one backward pass: the nodes ready to run, latest first (a
// node's seq is its place on the tape, so every node runs after all that
// feed it), the gradients waiting for them, and the post-accumulate hooks
// still owed.
class BackwardPass {
 public:
  // hooks: whether post-accumulate hooks fire and saved versions are
  // checked before the walk (backward(), not xg::grad): see survey.
  BackwardPass(const std::vector<std::shared_ptr<Node>>& roots, bool hooks) {
    if (!hooks) return;
    const bool hooked = g_hooks.load(std::memory_order_relaxed) > 0, versions = written_since_recorded(roots);
    if (hooked || versions) survey(roots, hooked, versions);
  }

  // Queues gradient g for node n, or adds it to the one already waiting.
  void send(const std::shared_ptr<Node>& n, const Tensor& g) {
    auto it = waiting_.find(n.get());
    if (it != waiting_.end()) {
      accumulate(it->second, g);
      return;
    }
    waiting_.emplace(n.get(), g);
    ready_.push(n.get());
    visited_.push_back(n);
  }

  // The next node to run and its whole gradient; null when done.
  std::pair<Node*, Tensor> next() {
    if (ready_.empty()) return {nullptr, Tensor()};
    Node* n = ready_.top();
    ready_.pop();
    auto it = waiting_.find(n);
    Tensor g = std::move(it->second);
    waiting_.erase(it);
    return {n, std::move(g)};
  }

  // After a leaf accumulated: its hooks fire once no edge owes it more.
  void leaf_accumulated(Node* leaf_node) {
    auto it = pending_.find(leaf_node);
    if (it != pending_.end() && it->second == 0) fire_hooks(leaf_node);
  }
  // An edge into n has been walked, with gradient g (maybe undefined). The
  // last edge into a hooked leaf fires its hooks now unless a gradient is
  // still queued for it (its node then fires after accumulating).
  void edge_walked(Node* n, const Tensor& g) {
    auto it = pending_.find(n);
    if (it != pending_.end() && --it->second == 0 && !g.defined() && !waiting_.count(n)) fire_hooks(n);
  }

  // Without retain_graph: unlinks every node that ran from its inputs.
  void unlink() {
    for (auto& n : visited_)
      if (n->released) n->next.clear();
  }

 private:
  // One pass over the nodes reachable from the roots, before the walk. With
  // `versions`, checks what each saved (check_saved_versions on the latest
  // whose saved tensors changed, the node the walk would have stopped at
  // first), so that a version mismatch throws before any leaf's grad()
  // changes. With `hooks`, counts for each leaf with post-accumulate hooks
  // the edges that owe it a gradient (a leaf's node may run more than once:
  // its seq is that of its first use).
  void survey(const std::vector<std::shared_ptr<Node>>& roots, bool hooks, bool versions) {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    const Node* changed = nullptr;
    for (const auto& r : roots)
      if (seen.insert(r.get()).second) stack.push_back(r.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (versions && !saved_versions_match(*n) && (!changed || n->seq > changed->seq)) changed = n;
      for (const auto& nx : n->next) {
        if (!nx) continue;
        if (hooks && nx->leaf && !nx->leaf->post_accumulate_hooks.empty()) ++pending_[nx.get()];
        if (seen.insert(nx.get()).second) stack.push_back(nx.get());
      }
    }
    if (changed) check_saved_versions(*changed);
    if (!hooks) return;
    for (const auto& r : roots)
      if (r->leaf && !r->leaf->post_accumulate_hooks.empty() && !pending_.count(r.get())) pending_[r.get()] = 0;
  }
  static void fire_hooks(Node* leaf_node) {
    const Tensor leaf(leaf_node->leaf);
    const auto hooks = leaf_node->leaf->post_accumulate_hooks;  // a copy: a hook may add or remove hooks
    for (const auto& h : hooks) h.second(leaf);
  }

  static bool later(Node* a, Node* b) { return a->seq < b->seq; }
  std::priority_queue<Node*, std::vector<Node*>, decltype(&later)> ready_{&later};
  std::unordered_map<Node*, Tensor> waiting_;
  std::unordered_map<Node*, int64_t> pending_;
  // Every visited node kept alive until the walk ends, even if releasing a
  // node drops the last reference to one of its inputs' nodes.
  std::vector<std::shared_ptr<Node>> visited_;
};

// Grad mode during a walk: on only when the walk records the gradients'
// own graph (create_graph); the previous mode comes back at the end.
struct GradModeScope {
  bool prev = g_grad_enabled;
  const std::unordered_set<const Node*>* needed = g_needed;
  explicit GradModeScope(bool on) { g_grad_enabled = on; }
  ~GradModeScope() {
    g_grad_enabled = prev;
    g_needed = needed;
  }
};

// The nodes from which a gradient path reaches one of `targets` (targets
// included): the only ones xg::grad runs.
std::unordered_set<const Node*> nodes_leading_to(const std::vector<std::shared_ptr<Node>>& roots,
                                                 const std::unordered_map<const Node*, std::vector<size_t>>& targets) {
  std::unordered_set<const Node*> needed, done;
  std::vector<std::pair<const Node*, size_t>> stack;  // (node, next child to look at)
  for (const auto& r : roots) {
    if (done.count(r.get())) continue;
    stack.push_back({r.get(), 0});
    done.insert(r.get());
    while (!stack.empty()) {
      auto& [n, k] = stack.back();
      if (k < n->next.size()) {
        const Node* c = n->next[k++].get();
        if (c && done.insert(c).second) stack.push_back({c, 0});
        continue;
      }
      bool lead = targets.count(n) > 0;
      for (const auto& c : n->next) lead = lead || (c && needed.count(c.get()));
      if (lead) needed.insert(n);
      stack.pop_back();
    }
  }
  return needed;
}

// Whether a gradient leaving n reaches a node of `needed` (xg::grad runs n
// only then).
bool leads_to(const Node& n, const std::unordered_set<const Node*>& needed) {
  for (const auto& c : n.next)
    if (c && needed.count(c.get())) return true;
  return false;
}

// The walk: first the saved tensors of every node it may run are checked
// (so that a version mismatch changes no grad()); then each node, latest
// first, checks what it saved again, runs its backward, checks the
// gradients it returns and sends them on. With `inputs` (xg::grad) the
// gradients reaching them are returned instead of accumulated into any
// leaf, and only the nodes on a path to them run.
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
                                 bool retain_graph, bool create_graph, const std::vector<Tensor>* inputs,
                                 bool allow_unused) {
  GradModeScope mode(create_graph);
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (const Tensor& root : roots) {
    std::shared_ptr<Node> n = gradient_edge(root);
    if (!n)
      throw std::logic_error("backward: tensor does not require grad and has no grad_fn "
                             "(did you forget requires_grad_() on a leaf, or run under NoGradGuard?)");
    if (n->released)
      throw std::logic_error("backward: this graph was already freed by an earlier backward(); "
                             "pass retain_graph=true to the first call to backward through it twice");
    root_nodes.push_back(std::move(n));
  }
  std::unordered_map<const Node*, std::vector<size_t>> target_of;
  std::unordered_set<const Node*> needed;
  std::vector<Tensor> results;
  if (inputs) {
    for (size_t i = 0; i < inputs->size(); ++i) {
      const Tensor& x = (*inputs)[i];
      if (!x.defined()) throw std::invalid_argument("grad: input " + std::to_string(i) + " is undefined");
      std::shared_ptr<Node> e = gradient_edge(x);
      if (!e)
        throw std::logic_error("grad: input " + std::to_string(i) + " " + shape_str(x.shape()) +
                               " does not require grad and has no grad_fn: no gradient can reach it");
      target_of[e.get()].push_back(i);
    }
    needed = nodes_leading_to(root_nodes, target_of);
    // Before the walk, as backward's survey: the saved tensors of every node
    // the walk may run (needed, not a leaf, with an edge onward), the latest
    // changed one reported.
    const Node* changed = nullptr;
    if (written_since_recorded(root_nodes))
      for (const Node* n : needed) {
        if (n->leaf || (changed && n->seq < changed->seq) || saved_versions_match(*n)) continue;
        if (leads_to(*n, needed)) changed = n;
      }
    if (changed) check_saved_versions(*changed);
    g_needed = &needed;
    results.resize(inputs->size());
  } else {
    g_needed = nullptr;
  }
  BackwardPass pass(root_nodes, inputs == nullptr);
  for (size_t k = 0; k < root_nodes.size(); ++k)
    if (!inputs || needed.count(root_nodes[k].get())) pass.send(root_nodes[k], grad_outputs[k]);
  while (true) {
    auto [node, g] = pass.next();
    if (!node) break;
    if (inputs) {
      auto t = target_of.find(node);
      if (t != target_of.end())  // a leaf's node may pop more than once (its seq is its first use's)
        for (size_t i : t->second) results[i] = results[i].defined() ? add(results[i], g) : g;
      if (node->leaf || !leads_to(*node, needed)) continue;
    } else if (node->leaf) {
      accumulate_into_leaf(*node->leaf, std::move(g));
      pass.leaf_accumulated(node);
      continue;
    }
    check_not_released(*node);
    // Checked before the walk too; again here because a hook, or a backward
    // function, may have written to a saved tensor since.
    check_saved_versions(*node);
    if (g_anomaly) check_finite_in(*node, g);
    const std::vector<Tensor> in_grads = call_backward(*node, g);
    for (size_t i = 0; i < node->next.size(); ++i) {
      const std::shared_ptr<Node>& input = node->next[i];
      if (!input) continue;
      if (inputs) {
        if (!needed.count(input.get())) continue;
      } else {
        pass.edge_walked(input.get(), in_grads[i]);
      }
      if (!in_grads[i].defined()) continue;
      check_input_gradient(*node, i, in_grads[i], g);
      pass.send(input, in_grads[i]);
    }
    if (!retain_graph) {  // drops the saved values
      node->fn = nullptr;
      node->saved.clear();
      node->released = true;
    }
  }
  if (!retain_graph) pass.unlink();
  if (inputs && !allow_unused)
    for (size_t i = 0; i < results.size(); ++i)
      if (!results[i].defined())
        throw std::logic_error("grad: input " + std::to_string(i) + " " + shape_str((*inputs)[i].shape()) +
                               " is not reached from the outputs (pass allow_unused = true to get an undefined "
                               "tensor for it instead)");
  return results;
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

}  // namespace

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
  run_backward({*this}, {grad_output}, retain_graph || create_graph, create_graph, nullptr, false);
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, const GradOptions& o) {
  const std::vector<Tensor> gs = seeds("backward", outputs, grad_outputs);
  run_backward(outputs, gs, o.retain_graph.value_or(o.create_graph), o.create_graph, nullptr, false);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& o) {
  const std::vector<Tensor> gs = seeds("grad", outputs, grad_outputs);
  if (inputs.empty()) throw std::invalid_argument("grad: no inputs given");
  return run_backward(outputs, gs, o.retain_graph.value_or(o.create_graph), o.create_graph, &inputs,
                      o.allow_unused);
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
  // A twice-differentiable op's backward gets the inputs with their history;
  // the other kind gets them detached and runs without the tape.
  const bool twice = op.twice_differentiable;
  std::vector<Tensor> saved;
  for (const Tensor& t : inputs) saved.push_back(!t.defined() ? Tensor() : twice ? t : t.detach());
  Tensor saved_out = out.detach();
  auto bw = op.backward;
  std::string name = op.name;
  std::vector<Tensor> versioned = saved;
  versioned.push_back(saved_out);
  return record(
      name.c_str(), out, inputs,
      [bw, saved, saved_out, name, twice, live = inputs](const Tensor& g) {
        std::vector<Tensor> grads;
        if (twice) {
          grads = bw(saved, detail::saved_output(saved_out), g);
        } else {
          const bool recording = grad_enabled();
          {
            NoGradGuard off;
            grads = bw(saved, saved_out, g.detach());
          }
          if (recording) {
            // Each gradient is linked to what it was computed from by a node
            // that refuses to be differentiated (PyTorch's once_differentiable).
            std::vector<Tensor> from{g};
            from.insert(from.end(), live.begin(), live.end());
            for (Tensor& gi : grads)
              if (gi.defined())
                gi = record((name + " (backward)").c_str(), gi.detach(), from, [name](const Tensor&) -> std::vector<Tensor> {
                  throw std::logic_error("custom op '" + name +
                                         "': its backward is not twice differentiable, so a gradient of its "
                                         "gradient (create_graph) cannot go through it; write its backward with "
                                         "xgrad ops and set twice_differentiable = true");
                });
          }
        }
        if (grads.size() != saved.size())
          throw std::logic_error("custom op '" + name + "': backward returned " + std::to_string(grads.size()) +
                                 " gradients for " + std::to_string(saved.size()) + " inputs");
        return grads;
      },
      versioned);
}

}  // namespace xg
