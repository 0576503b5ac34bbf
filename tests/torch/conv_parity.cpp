// Compares conv2d, unfold2d and fold2d with what tests/torch/conv_parity.py
// wrote from PyTorch in float64: the output, the gradients of the input,
// weight and bias of sum(y * wy) plus a gradient penalty on the input (so
// the second order too), and unfold and fold of the same windows. Prints one
// line per case; exits 1 if any differs beyond parity::kTolerance.
//   conv_parity FILE.safetensors
#include <sstream>

#include "autograd/xg.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

bool run_case(const std::string& name, const std::string& config, std::map<std::string, Tensor>& file) {
  std::istringstream in(config);
  Conv2dOptions o;
  int has_bias = 0;
  in >> o.kernel[0] >> o.kernel[1] >> o.stride[0] >> o.stride[1] >> o.padding[0] >> o.padding[1] >> o.dilation[0] >>
      o.dilation[1] >> has_bias;
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  Tensor x = get("x").requires_grad_(), w = get("w").requires_grad_();
  Tensor b = has_bias ? get("b").requires_grad_() : Tensor();
  Tensor y = conv2d(x, w, b, o);
  GradOptions create;
  create.create_graph = true;
  const Tensor loss = sum(mul(y, get("wy")));
  const Tensor gx = grad({loss}, {x}, {}, create)[0];
  std::vector<Tensor> inputs{x, w};
  if (has_bias) inputs.push_back(b);
  GradOptions unused;
  unused.allow_unused = true;
  const std::vector<Tensor> g = grad({add(loss, sum(mul(gx, gx)))}, inputs, {}, unused);
  std::vector<std::pair<std::string, double>> diffs = {
      {"y", parity::rel_diff(y, get("y"))},
      {"grad x", parity::rel_diff(g[0], get("grad.x"))},
      {"grad w", parity::rel_diff(g[1], get("grad.w"))},
      {"unfold", parity::rel_diff(unfold2d(get("x"), o), get("unfold"))},
      {"fold", parity::rel_diff(fold2d(get("unfold") * 2.0 + 1.0, get("x").shape(), o), get("fold"))}};
  if (has_bias) diffs.push_back({"grad b", parity::rel_diff(g[2].defined() ? g[2] : zeros(b.shape(), f64), get("grad.b"))});
  return parity::report("conv_parity", name, "conv2d " + config, diffs);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file("conv_parity", argc, argv, run_case); }
