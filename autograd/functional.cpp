#include "autograd/functional.h"

#include <stdexcept>
#include <string>

#include "autograd/autograd.h"
#include "autograd/ops.h"

namespace xg {

namespace {

// v must match the tensors it is a direction for, one by one.
void check_directions(const char* who, const std::vector<Tensor>& at, const std::vector<Tensor>& v) {
  if (v.size() != at.size())
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(v.size()) + " direction tensors for " +
                                std::to_string(at.size()) + " inputs");
  for (size_t i = 0; i < at.size(); ++i)
    if (!v[i].defined() || v[i].shape() != at[i].shape() || v[i].dtype() != at[i].dtype())
      throw ShapeError(std::string(who) + ": direction " + std::to_string(i) + " is " +
                       (v[i].defined() ? shape_str(v[i].shape()) + " " + dtype_name(v[i].dtype()) : "undefined") +
                       ", its input is " + shape_str(at[i].shape()) + " " + dtype_name(at[i].dtype()));
}

// sum_i <a_i, b_i> over the defined a_i; undefined if none is.
Tensor dot_all(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Tensor total;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined()) continue;
    Tensor d = sum(mul(a[i], b[i]));
    total = total.defined() ? add(total, d) : d;
  }
  return total;
}

bool on_tape(const Tensor& t) { return t.defined() && (t.requires_grad() || !t.is_leaf()); }

// Grad mode on for the scope (the products need the tape).
struct GradOn {
  bool prev = grad_enabled();
  GradOn() { set_grad_enabled(true); }
  ~GradOn() { set_grad_enabled(prev); }
};

}  // namespace

std::vector<Tensor> hvp(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& v, Tensor* value) {
  check_directions("hvp", params, v);
  GradOn on;
  const Tensor loss = f();
  if (!loss.defined() || loss.numel() != 1)
    throw ShapeError("hvp: the function must return a single-element loss, got " +
                     (loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor")));
  if (value) *value = loss.detach();
  std::vector<Tensor> out(params.size());
  if (on_tape(loss)) {
    GradOptions o;
    o.create_graph = true;
    o.allow_unused = true;
    const Tensor d = dot_all(grad({loss}, params, {}, o), v);
    if (on_tape(d)) {
      GradOptions o2;
      o2.allow_unused = true;
      out = grad({d}, params, {}, o2);
    }
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (!out[i].defined()) out[i] = zeros(params[i].shape(), params[i].dtype());
  return out;
}

Tensor jvp(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
           const std::vector<Tensor>& v, Tensor* value) {
  check_directions("jvp", inputs, v);
  GradOn on;
  // Fresh leaves with the inputs' values: the product needs gradients with
  // respect to them, whether or not the inputs themselves require one.
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs) xs.push_back(x.detach().requires_grad_());
  const Tensor y = f(xs);
  if (!y.defined()) throw std::invalid_argument("jvp: the function returned an undefined tensor");
  if (value) *value = y.detach();
  if (!on_tape(y)) return zeros(y.shape(), y.dtype());
  Tensor u = zeros(y.shape(), y.dtype()).requires_grad_();
  GradOptions o;
  o.create_graph = true;
  o.allow_unused = true;
  const Tensor d = dot_all(grad({y}, xs, {u}, o), v);
  if (!on_tape(d)) return zeros(y.shape(), y.dtype());
  GradOptions o2;
  o2.allow_unused = true;
  Tensor jv = grad({d}, {u}, {}, o2)[0];
  return jv.defined() ? jv : zeros(y.shape(), y.dtype());
}

}  // namespace xg
