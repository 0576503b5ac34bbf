// Compares xgrad's image layers with torch.nn's, from what
// tests/torch/vision_layers_parity.py wrote: each layer is built from the
// same spec, PyTorch's state dict is loaded strictly (so the parameter and
// buffer names and shapes are PyTorch's), and the output and the gradients
// of the input and every parameter of sum(y * wy) plus a gradient penalty on
// the input are compared in float64. Layers with running statistics train
// on the same batches first; their state dict after training and an
// evaluation-mode output are compared too. Exits 1 if any differs beyond
// parity::kTolerance.
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
  std::map<std::string, std::vector<double>> args;
  int64_t one(const std::string& k) const { return static_cast<int64_t>(args.at(k).at(0)); }
  double real(const std::string& k) const { return args.at(k).at(0); }
  std::array<int64_t, 2> two(const std::string& k) const {
    return {static_cast<int64_t>(args.at(k).at(0)), static_cast<int64_t>(args.at(k).at(1))};
  }
  bool has(const std::string& k) const { return args.count(k) > 0; }
  int64_t flag(const std::string& k, int64_t otherwise) const { return has(k) ? one(k) : otherwise; }
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
    for (std::string part; std::getline(v, part, ',');) s.args[key].push_back(std::stod(part));
  }
  return s;
}

std::unique_ptr<nn::Module> build_conv(const Spec& s, Generator& gen) {
  const int64_t in = s.one("in"), out = s.one("out");
  const bool bias = s.one("bias") != 0;
  if (s.kind == "Conv2d") {
    auto o = nn::Conv2dOptions(in, out, s.two("kernel")).stride(s.two("stride")).dilation(s.two("dilation"));
    auto padded = s.has("same") ? o.padding("same") : o.padding(s.two("padding"));
    return std::make_unique<nn::Conv2d>(padded.groups(s.one("groups")).bias(bias), gen);
  }
  if (s.kind == "Conv1d") {
    auto o = nn::Conv1dOptions(in, out, s.one("kernel")).stride(s.one("stride")).dilation(s.one("dilation"));
    auto padded = s.has("same") ? o.padding("same") : o.padding(s.one("padding"));
    return std::make_unique<nn::Conv1d>(padded.groups(s.one("groups")).bias(bias), gen);
  }
  if (s.kind == "ConvTranspose2d")
    return std::make_unique<nn::ConvTranspose2d>(nn::ConvTranspose2dOptions(in, out, s.two("kernel"))
                                                     .stride(s.two("stride"))
                                                     .padding(s.two("padding"))
                                                     .output_padding(s.two("output_padding"))
                                                     .dilation(s.two("dilation"))
                                                     .groups(s.one("groups"))
                                                     .bias(bias),
                                                 gen);
  throw std::invalid_argument("vision_layers_parity: no layer " + s.kind);
}

std::unique_ptr<nn::Module> build(const Spec& s, Generator& gen) {
  if (s.kind.rfind("Conv", 0) == 0) return build_conv(s, gen);
  if (s.kind == "MaxPool2d") {
    return std::make_unique<nn::MaxPool2d>(MaxPool2dOptions(s.two("kernel"))
                                               .stride(s.two("stride"))
                                               .padding(s.two("padding"))
                                               .dilation(s.two("dilation"))
                                               .ceil_mode(s.one("ceil_mode") != 0));
  }
  if (s.kind == "AvgPool2d") {
    return std::make_unique<nn::AvgPool2d>(AvgPool2dOptions(s.two("kernel"))
                                               .stride(s.two("stride"))
                                               .padding(s.two("padding"))
                                               .ceil_mode(s.one("ceil_mode") != 0)
                                               .count_include_pad(s.one("count_include_pad") != 0));
  }
  if (s.kind == "AdaptiveAvgPool2d") return std::make_unique<nn::AdaptiveAvgPool2d>(s.two("output_size"));
  if (s.kind == "Flatten") return std::make_unique<nn::Flatten>(s.one("start_dim"), s.one("end_dim"));
  if (s.kind == "GroupNorm")
    return std::make_unique<nn::GroupNorm>(s.one("num_groups"), s.one("num_channels"), s.real("eps"));
  const bool affine = s.flag("affine", 1) != 0;
  if (s.kind == "BatchNorm2d")
    return std::make_unique<nn::BatchNorm2d>(s.one("num_features"), s.real("eps"), s.real("momentum"), affine);
  if (s.kind == "BatchNorm1d")
    return std::make_unique<nn::BatchNorm1d>(s.one("num_features"), s.real("eps"), s.real("momentum"), affine);
  throw std::invalid_argument("vision_layers_parity: no layer " + s.kind);
}

// One training step: the output, and the gradients of the input and every
// parameter of sum(y * wy) plus a gradient penalty on the input.
std::vector<Tensor> step(nn::Module& m, const Tensor& x_values, const Tensor& wy) {
  Tensor x = x_values.detach().requires_grad_();
  const Tensor y = m.forward(x);
  GradOptions create;
  create.create_graph = true;
  const Tensor loss = sum(mul(y, wy));
  const Tensor gx = grad({loss}, {x}, {}, create)[0];
  std::vector<Tensor> inputs{x};
  for (auto& [pname, p] : m.named_parameters()) inputs.push_back(p);
  std::vector<Tensor> out = grad({add(loss, sum(mul(gx, gx)))}, inputs);
  out.insert(out.begin(), y);
  return out;
}

bool run_case(const std::string& name, const std::string& text, std::map<std::string, Tensor>& file) {
  const Spec spec = parse(text);
  Generator gen(0);
  std::unique_ptr<nn::Module> m = build(spec, gen);
  m->to(f64);
  std::map<std::string, Tensor> state;
  const std::string prefix = name + ".param.";
  for (auto& [k, v] : file)
    if (k.rfind(prefix, 0) == 0) state[k.substr(prefix.size())] = v;
  m->load_state_dict(state);  // strict: every PyTorch name is one of ours, and back
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  const int64_t steps = spec.flag("steps", 1);
  std::vector<Tensor> last;
  for (int64_t i = 0; i < steps; ++i) last = step(*m, get("x" + std::to_string(i)), get("wy" + std::to_string(i)));
  std::vector<std::pair<std::string, double>> diffs = {{"y", parity::rel_diff(last[0], get("y"))},
                                                       {"grad x", parity::rel_diff(last[1], get("grad.x"))}};
  size_t i = 2;
  for (auto& [pname, p] : m->named_parameters())
    diffs.push_back({"grad " + pname, parity::rel_diff(last[i++], get("grad." + pname))});
  if (spec.has("steps")) {
    m->eval();
    diffs.push_back({"eval y", parity::rel_diff(m->forward(get("eval.x")), get("eval.y"))});
    for (auto& [k, v] : m->state_dict())
      diffs.push_back({"after " + k, parity::rel_diff(v.to(f64), get("after." + k).to(f64))});
  }
  return parity::report("vision_layers_parity", name, m->type_name(), diffs);
}

}  // namespace

int main(int argc, char** argv) {
  return xg::parity::run_file("vision_layers_parity", argc, argv, run_case);
}
