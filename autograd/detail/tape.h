// The tape's state and the steps of a walk over it, shared by the files that
// make up the tape (internal: not installed):
//   tape.cpp      grad mode, recording a node, the tape's own tensors
//   anomaly.cpp   anomaly mode and name scopes
//   backward.cpp  the steps of a walk, and backward()'s walk
//   grad.cpp      xg::grad's walk, which runs only the nodes it needs
//   custom_op.cpp ops written by the user
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/profile.h"

namespace xg::detail {

// Per thread: grad mode, anomaly mode, the innermost NameScope (anomaly mode
// only), and while a node's backward runs, that node and its input edges.
extern thread_local bool g_grad_enabled;
extern thread_local bool g_anomaly;
extern thread_local std::string g_scope;
extern thread_local const std::vector<std::shared_ptr<Node>>* g_backward_edges;
extern thread_local Node* g_current_node;
// add_between_backward_nodes' functions on this thread, with their ids.
extern thread_local std::vector<std::pair<int64_t, std::function<void()>>> g_between_nodes;
// The op profile of this thread (autograd/profile.h), null when none is alive.
extern thread_local OpProfile* g_profile;
// xg::grad: the nodes through which a gradient reaches an input asked for
// (null in backward(), where every node runs).
extern thread_local const std::unordered_set<const Node*>* g_needed;
// Process-wide: the tape's sequence, in-place writes counted, live nodes,
// post-accumulate-grad hooks registered.
extern std::atomic<uint64_t> g_seq, g_writes;
extern std::atomic<int64_t> g_live_nodes, g_hooks, g_hook_id;

// The node that carries gradient into `t`: its producer, or (for a leaf that
// requires grad) its accumulator, created once and shared by all uses.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// Anomaly mode (anomaly.cpp).
std::string where_str(const std::string& op, const std::string& scope);
void check_forward(const char* op, const Tensor& out, const std::vector<Tensor>& inputs);
void check_finite_in(const Node& node, const Tensor& g);
void check_finite_gradient(const Node& node, size_t i, const Tensor& gi, const Tensor& g);

// The steps of a walk (backward.cpp).
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
// The nodes of the roots (each must require grad and not be freed).
std::vector<std::shared_ptr<Node>> root_nodes(const std::vector<Tensor>& roots);
// The seeds of a walk: the given gradients, or ones for single-element
// outputs; each checked against its output.
std::vector<Tensor> seeds(const char* who, const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs);
bool saved_versions_match(const Node& node);
void check_saved_versions(const Node& node);
bool written_since_recorded(const std::vector<std::shared_ptr<Node>>& roots);
// One node's turn: its checks (not freed, saved tensors unchanged, a finite
// gradient in anomaly mode), then its backward: one gradient per input
// (undefined where an input needs none).
std::vector<Tensor> run_node(Node& node, const Tensor& g);
// The gradient for input i checked (dtype, shape, finite in anomaly mode).
void check_input_gradient(const Node& node, size_t i, const Tensor& gi, const Tensor& g);
// Without retain_graph: the node drops what it saved.
void release(Node& node);

// Adds g to the gradient waiting in slot (or a leaf's grad): in place when
// add_in_place may, else into a new tensor.
inline void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined())
    slot = g;
  else if (!add_in_place(slot, g))
    slot = add(slot, g);
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

  // The gradient waiting for node n (not yet run), or null.
  Tensor* waiting(const Node* n) {
    auto it = waiting_.find(const_cast<Node*>(n));
    return it == waiting_.end() ? nullptr : &it->second;
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

// While backward() runs a node's backward: the walk's waiting gradients,
// and which of them, per input edge, the backward took to add its own into
// (accumulating_grad); the walk sends those edges nothing more.
struct GradSlots {
  BackwardPass* pass = nullptr;
  const Node* node = nullptr;
  std::vector<char> taken;  // per input edge; empty until the backward takes one
  bool took(size_t i) const { return i < taken.size() && taken[i]; }
};
extern thread_local GradSlots* g_grad_slots;

}  // namespace xg::detail
