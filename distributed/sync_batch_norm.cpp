#include "distributed/sync_batch_norm.h"

#include "autograd/autograd.h"
#include "distributed/dist.h"
#include "nn/batch_norm.h"

namespace xg::dist {

Tensor all_sum(const Tensor& t) {
  if (world_size() == 1) return t;
  CustomOp op;
  op.name = "all_sum";
  op.forward = [](const std::vector<Tensor>& in) {
    Tensor out = in[0].detach().clone();
    allreduce(out, ReduceOp::sum);
    return out;
  };
  // Every process's output is the sum of every input, so each input's
  // gradient is the sum of the outputs' gradients: all_sum again, which
  // keeps it differentiable.
  op.backward = [](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
    return std::vector<Tensor>{all_sum(g)};
  };
  op.twice_differentiable = true;
  return apply(op, {t});
}

int64_t sync_batch_norm(nn::Module& model) {
  int64_t n = 0;
  std::vector<nn::Module*> todo{&model};
  while (!todo.empty()) {
    nn::Module* m = todo.back();
    todo.pop_back();
    if (auto* bn = dynamic_cast<nn::BatchNorm*>(m)) {
      bn->synchronise(all_sum);
      ++n;
    }
    for (auto& [name, child] : m->named_children()) todo.push_back(child.get());
  }
  return n;
}

}  // namespace xg::dist
