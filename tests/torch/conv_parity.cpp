// Compares conv2d (groups, padding "same"), conv1d, conv_transpose2d,
// unfold2d and fold2d with what tests/torch/conv_parity.py wrote from
// PyTorch in float64: the output, the gradients of the input, weight and
// bias of sum(y * wy) plus a gradient penalty on the input (so the second
// order too), and unfold and fold of the same windows. Prints one line per
// case; exits 1 if any differs beyond parity::kTolerance.
//   conv_parity FILE.safetensors
#include <array>
#include <sstream>

#include "autograd/xg.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

// One case's configuration, as conv_parity.py writes it; padding -1 is "same".
struct Config {
  std::string kind;
  std::array<int64_t, 2> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  int has_bias = 0;
};

Config parse(const std::string& text) {
  std::istringstream in(text);
  Config c;
  in >> c.kind >> c.stride[0] >> c.stride[1] >> c.padding[0] >> c.padding[1] >> c.dilation[0] >> c.dilation[1] >>
      c.groups >> c.has_bias >> c.output_padding[0] >> c.output_padding[1];
  return c;
}

// A padding of -1 is PyTorch's "same".
Conv2dFuncOptions conv2d_options(const Config& c) {
  return Conv2dFuncOptions()
      .stride(c.stride)
      .padding(c.padding[0] == -1 ? ConvPadding<2>("same") : ConvPadding<2>(c.padding))
      .dilation(c.dilation)
      .groups(c.groups);
}

Tensor forward(const Config& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (c.kind == "conv2d") return conv2d(x, w, b, conv2d_options(c));
  if (c.kind == "conv1d")
    return conv1d(x, w, b,
                  Conv1dFuncOptions()
                      .stride(c.stride[1])
                      .padding(c.padding[1] == -1 ? ConvPadding<1>("same") : ConvPadding<1>(c.padding[1]))
                      .dilation(c.dilation[1])
                      .groups(c.groups));
  return conv_transpose2d(
      x, w, b,
      ConvTranspose2dFuncOptions().stride(c.stride).padding(c.padding).output_padding(c.output_padding).dilation(
          c.dilation).groups(c.groups));
}

bool run_case(const std::string& name, const std::string& text, std::map<std::string, Tensor>& file) {
  const Config c = parse(text);
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  Tensor x = get("x").requires_grad_(), w = get("w").requires_grad_();
  Tensor b = c.has_bias ? get("b").requires_grad_() : Tensor();
  Tensor y = forward(c, x, w, b);
  GradOptions create;
  create.create_graph = true;
  const Tensor loss = sum(mul(y, get("wy")));
  const Tensor gx = grad({loss}, {x}, {}, create)[0];
  std::vector<Tensor> inputs{x, w};
  if (c.has_bias) inputs.push_back(b);
  GradOptions unused;
  unused.allow_unused = true;
  const std::vector<Tensor> g = grad({add(loss, sum(mul(gx, gx)))}, inputs, {}, unused);
  std::vector<std::pair<std::string, double>> diffs = {{"y", parity::rel_diff(y, get("y"))},
                                                       {"grad x", parity::rel_diff(g[0], get("grad.x"))},
                                                       {"grad w", parity::rel_diff(g[1], get("grad.w"))}};
  if (c.has_bias) diffs.push_back({"grad b", parity::rel_diff(g[2].defined() ? g[2] : zeros(b.shape(), f64), get("grad.b"))});
  if (file.count(name + ".unfold")) {
    const auto u = UnfoldOptions({w.size(2), w.size(3)}).stride(c.stride).padding(c.padding).dilation(c.dilation);
    const auto f = FoldOptions({get("x").size(2), get("x").size(3)}, {w.size(2), w.size(3)})
                       .stride(c.stride)
                       .padding(c.padding)
                       .dilation(c.dilation);
    diffs.push_back({"unfold", parity::rel_diff(unfold2d(get("x"), u), get("unfold"))});
    diffs.push_back({"fold", parity::rel_diff(fold2d(get("unfold") * 2.0 + 1.0, f), get("fold"))});
  }
  return parity::report("conv_parity", name, text, diffs);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file("conv_parity", argc, argv, run_case); }
