// xg::grad's walk: only the nodes on a path from the outputs to the inputs
// asked for run, and the gradients reaching those inputs are returned, not
// accumulated into any leaf.
#include <cmath>
#include <sstream>

#include "autograd/detail/tape.h"
#include "autograd/ops.h"

namespace xg {

using namespace detail;

namespace {

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

// Before the walk, as backward's BackwardPass: the saved tensors of every
// node the walk may run (needed, not a leaf, with an edge onward), the
// latest changed one reported.
void check_needed_versions(const std::vector<std::shared_ptr<Node>>& roots,
                           const std::unordered_set<const Node*>& needed) {
  if (!written_since_recorded(roots)) return;
  const Node* changed = nullptr;
  for (const Node* n : needed) {
    if (n->leaf || (changed && n->seq < changed->seq) || saved_versions_match(*n)) continue;
    if (leads_to(*n, needed)) changed = n;
  }
  if (changed) check_saved_versions(*changed);
}

std::vector<Tensor> grad_walk(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
                              const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph,
                              bool allow_unused) {
  GradModeScope mode(create_graph);
  const std::vector<std::shared_ptr<Node>> nodes = root_nodes(roots);
  std::unordered_map<const Node*, std::vector<size_t>> target_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined()) throw std::invalid_argument("grad: input " + std::to_string(i) + " is undefined");
    std::shared_ptr<Node> e = gradient_edge(x);
    if (!e)
      throw std::logic_error("grad: input " + std::to_string(i) + " " + shape_str(x.shape()) +
                             " does not require grad and has no grad_fn: no gradient can reach it");
    target_of[e.get()].push_back(i);
  }
  const std::unordered_set<const Node*> needed = nodes_leading_to(nodes, target_of);
  check_needed_versions(nodes, needed);
  g_needed = &needed;
  std::vector<Tensor> results(inputs.size());
  BackwardPass pass(nodes, /*hooks=*/false);
  for (size_t k = 0; k < nodes.size(); ++k)
    if (needed.count(nodes[k].get())) pass.send(nodes[k], grad_outputs[k]);
  for (auto [node, g] = pass.next(); node; std::tie(node, g) = pass.next()) {
    auto t = target_of.find(node);
    if (t != target_of.end())  // a leaf's node may pop more than once (its seq is its first use's)
      for (size_t i : t->second) accumulate(results[i], g);
    if (node->leaf || !leads_to(*node, needed)) continue;
    const std::vector<Tensor> in_grads = run_node(*node, g);
    for (size_t i = 0; i < node->next.size(); ++i) {
      const std::shared_ptr<Node>& input = node->next[i];
      if (!input || !needed.count(input.get()) || !in_grads[i].defined()) continue;
      check_input_gradient(*node, i, in_grads[i], g);
      pass.send(input, in_grads[i]);
    }
    if (!retain_graph) release(*node);
  }
  if (!retain_graph) pass.unlink();
  if (!allow_unused)
    for (size_t i = 0; i < results.size(); ++i)
      if (!results[i].defined())
        throw std::logic_error("grad: input " + std::to_string(i) + " " + shape_str(inputs[i].shape()) +
                               " is not reached from the outputs (pass allow_unused = true to get an undefined "
                               "tensor for it instead)");
  return results;
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& o) {
  const std::vector<Tensor> gs = seeds("grad", outputs, grad_outputs);
  if (inputs.empty()) throw std::invalid_argument("grad: no inputs given");
  return grad_walk(outputs, gs, inputs, o.retain_graph.value_or(o.create_graph), o.create_graph, o.allow_unused);
}

}  // namespace xg
