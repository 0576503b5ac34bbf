// Ops written by the user (CustomOp): a forward and a backward of their own,
// recorded on the tape like a built-in op.
#include "autograd/detail/tape.h"
#include "autograd/ops.h"

namespace xg {

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
