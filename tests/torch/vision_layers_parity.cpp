// Compares xgrad's image layers with torch.nn's, from what
// tests/torch/vision_layers_parity.py wrote: each layer is built from the
// same spec, PyTorch's state dict is loaded strictly (so the parameter names
// and shapes are PyTorch's), and the output and the gradients of the input
// and every parameter of sum(y * wy) plus a gradient penalty on the input
// are compared in float64. Exits 1 if any differs beyond parity::kTolerance.
//   vision_layers_parity FILE.safetensors
#include <memory>
#include <sstream>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

// "Conv2d in=4 out=6 kernel=3,3 ..." as the class name and key -> numbers
// ("same" is kept as the key same=1).
struct Spec {
  std::string kind;
  std::map<std::string, std::vector<int64_t>> args;
  int64_t one(const std::string& k) const { return args.at(k).at(0); }
  std::array<int64_t, 2> two(const std::string& k) const { return {args.at(k).at(0), args.at(k).at(1)}; }
  bool has(const std::string& k) const { return args.count(k) > 0; }
};

Spec parse(const std::string& text) {
  std::istringstream in(text);
  Spec s;
  in >> s.kind;
  for (std::string token; in >> token;) {
    const auto eq = token.find('=');
    const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
    if (value == "same") {
      s.args["same"] = {1};
      continue;
    }
    std::istringstream v(value);
    for (std::string part; std::getline(v, part, ',');) s.args[key].push_back(std::stoll(part));
  }
  return s;
}

std::unique_ptr<nn::Module> build(const Spec& s, Generator& gen) {
  const int64_t in = s.one("in"), out = s.one("out");
  const bool bias = s.one("bias") != 0;
  if (s.kind == "Conv2d") {
    Conv2dOptions o;
    o.stride = s.two("stride"), o.dilation = s.two("dilation"), o.groups = s.one("groups");
    o.same = s.has("same");
    if (!o.same) o.padding = s.two("padding");
    return std::make_unique<nn::Conv2d>(in, out, s.two("kernel"), gen, o, bias);
  }
  if (s.kind == "Conv1d") {
    Conv1dOptions o;
    o.stride = s.one("stride"), o.dilation = s.one("dilation"), o.groups = s.one("groups");
    o.same = s.has("same");
    if (!o.same) o.padding = s.one("padding");
    return std::make_unique<nn::Conv1d>(in, out, s.one("kernel"), gen, o, bias);
  }
  if (s.kind == "ConvTranspose2d") {
    ConvTranspose2dOptions o;
    o.stride = s.two("stride"), o.padding = s.two("padding"), o.output_padding = s.two("output_padding");
    o.dilation = s.two("dilation"), o.groups = s.one("groups");
    return std::make_unique<nn::ConvTranspose2d>(in, out, s.two("kernel"), gen, o, bias);
  }
  throw std::invalid_argument("vision_layers_parity: no layer " + s.kind);
}

bool run_case(const std::string& name, const std::string& text, std::map<std::string, Tensor>& file) {
  Generator gen(0);
  std::unique_ptr<nn::Module> m = build(parse(text), gen);
  m->to(f64);
  std::map<std::string, Tensor> state;
  const std::string prefix = name + ".param.";
  for (auto& [k, v] : file)
    if (k.rfind(prefix, 0) == 0) state[k.substr(prefix.size())] = v;
  m->load_state_dict(state);  // strict: every PyTorch name is one of ours, and back
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  Tensor x = get("x").requires_grad_();
  const Tensor y = m->forward(x);
  GradOptions create;
  create.create_graph = true;
  const Tensor loss = sum(mul(y, get("wy")));
  const Tensor gx = grad({loss}, {x}, {}, create)[0];
  std::vector<Tensor> inputs{x};
  for (auto& [pname, p] : m->named_parameters()) inputs.push_back(p);
  const std::vector<Tensor> g = grad({add(loss, sum(mul(gx, gx)))}, inputs);
  std::vector<std::pair<std::string, double>> diffs = {{"y", parity::rel_diff(y, get("y"))},
                                                       {"grad x", parity::rel_diff(g[0], get("grad.x"))}};
  size_t i = 1;
  for (auto& [pname, p] : m->named_parameters())
    diffs.push_back({"grad " + pname, parity::rel_diff(g[i++], get("grad." + pname))});
  return parity::report("vision_layers_parity", name, m->type_name(), diffs);
}

}  // namespace

int main(int argc, char** argv) {
  return xg::parity::run_file("vision_layers_parity", argc, argv, run_case);
}
