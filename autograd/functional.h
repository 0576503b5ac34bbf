// Products with derivatives of a function, without forming the matrices
// (torch.autograd.functional): the Hessian-vector product of a scalar
// function and the Jacobian-vector product of any function. Both are built
// on xg::grad with create_graph, so every op on the way must be twice
// differentiable (every built-in op is, except products under
// Autocast(bf16), which throw naming themselves).
#pragma once

#include <functional>
#include <vector>

#include "autograd/tensor.h"

namespace xg {

// H v for the scalar loss f() and its parameters: one tensor per parameter,
// (d/dp) <d f / d params, v>. v holds one tensor per parameter, of its shape
// and dtype. If `value` is given it receives f()'s value (detached). A
// parameter f does not depend on gets zeros.
std::vector<Tensor> hvp(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& v, Tensor* value = nullptr);

// J v for y = f(inputs): the directional derivative of f along v (one
// tensor per input), of y's shape. f is called with fresh leaves holding
// the inputs' values (the inputs need not require a gradient). Computed by the double-vjp trick, not by
// dual numbers: with u a dummy gradient of y's shape, g(u) = J^T u is linear
// in u, and J v = d<g(u), v>/du. Costs two backward passes. If `value` is
// given it receives f(inputs) (detached).
Tensor jvp(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
           const std::vector<Tensor>& v, Tensor* value = nullptr);

}  // namespace xg
