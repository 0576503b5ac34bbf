// Compares xgrad's image models (ResNet plain and pre-activation, ViT, CNN)
// with the PyTorch twins of tests/torch/vision_models_parity.py: each model
// is built from the same configuration, the twin's state dict is loaded
// strictly (so every parameter and buffer name and shape is the twin's), and
// in float64 the training-mode logits, the gradient of every parameter of
// sum(logits * wy) (those zero by construction, the key biases, relative
// to the largest of all: parity::compare_all), the evaluation-mode logits after one SGD step (batch norm
// on the running statistics that step left), the state dict after, and the
// ViT's class attention are compared. The parameter count must equal
// PyTorch's and ResNetConfig / ViTConfig / CNNConfig::parameter_count(),
// for the tiny cases and for the default configurations. Exits 1 if any
// differs beyond parity::kTolerance.
//   vision_models_parity FILE.safetensors
#include <memory>
#include <sstream>

#include "autograd/xg.h"
#include "models/cnn.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

constexpr double kLearningRate = 0.1;  // as LR in the .py

struct Built {
  std::unique_ptr<nn::Module> model;
  double expected_count = 0;  // the configuration's parameter_count()
};

// "resnet depth=14 width=4 ..." -> the model of that configuration.
Built build(const std::string& text) {
  std::istringstream in(text);
  std::string kind;
  in >> kind;
  std::map<std::string, int64_t> f;
  for (std::string token; in >> token;) {
    const auto eq = token.find('=');
    f[token.substr(0, eq)] = std::stoll(token.substr(eq + 1));
  }
  if (kind == "resnet") {
    models::ResNetConfig c;
    c.depth = f.at("depth"), c.width = f.at("width"), c.in_channels = f.at("in_channels");
    c.classes = f.at("classes"), c.preact = f.at("preact") != 0;
    return {std::make_unique<models::ResNet>(c), c.parameter_count()};
  }
  if (kind == "vit") {
    models::ViTConfig c;
    c.image = f.at("image"), c.patch = f.at("patch"), c.in_channels = f.at("in_channels"), c.classes = f.at("classes");
    c.d_model = f.at("d_model"), c.heads = f.at("heads"), c.layers = f.at("layers"), c.d_ff = f.at("d_ff");
    c.dropout = 0;  // the twin has none: dropout's draws cannot be matched
    return {std::make_unique<models::ViT>(c), c.parameter_count()};
  }
  if (kind == "cnn") {
    models::CNNConfig c;
    c.image = f.at("image"), c.in_channels = f.at("in_channels"), c.classes = f.at("classes");
    c.channels1 = f.at("channels1"), c.channels2 = f.at("channels2"), c.hidden = f.at("hidden");
    c.dropout = 0;
    return {std::make_unique<models::CNN>(c), c.parameter_count()};
  }
  throw std::invalid_argument("vision_models_parity: no model " + kind);
}

// 0 when all three counts agree, else 1e300 (so report() says DIFFERENT).
double count_diff(const Built& b, const Tensor& torch_count) {
  const double ours = static_cast<double>(b.model->num_parameters());
  const double theirs = static_cast<double>(torch_count.data<int64_t>()[0]);
  return ours == theirs && ours == b.expected_count ? 0.0 : 1e300;
}

// One training step as the twin took it: logits, gradients, SGD update.
std::vector<std::pair<std::string, double>> train_step(nn::Module& m, const std::string& name,
                                                       std::map<std::string, Tensor>& file) {
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  const Tensor y = m.forward(get("x"));
  std::vector<Tensor> params = m.parameters();
  const std::vector<Tensor> grads = grad({sum(mul(y, get("wy")))}, params);
  std::vector<std::pair<std::string, double>> diffs = {{"y", parity::rel_diff(y, get("y"))}};
  std::vector<std::string> names;
  std::vector<Tensor> ref;
  for (auto& [pname, p] : m.named_parameters()) {
    names.push_back(pname);
    ref.push_back(get("grad." + pname));
  }
  // The ViT's key biases get gradients zero by construction (see compare_all).
  parity::compare_all(diffs, "grad", names, grads, ref);
  NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) params[k].copy_(params[k].detach() - kLearningRate * grads[k]);
  return diffs;
}

bool run_case(const std::string& name, const std::string& text, std::map<std::string, Tensor>& file) {
  Built b = build(text);
  nn::Module& m = *b.model;
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  std::vector<std::pair<std::string, double>> diffs = {{"parameter count", count_diff(b, get("count"))}};
  if (name.rfind("count_", 0) == 0) return parity::report("vision_models_parity", name, text, diffs);
  m.to(f64);
  std::map<std::string, Tensor> state;
  const std::string prefix = name + ".param.";
  for (auto& [k, v] : file)
    if (k.rfind(prefix, 0) == 0) state[k.substr(prefix.size())] = v;
  m.load_state_dict(state);  // strict: every twin's name is one of ours, and back
  for (auto& d : train_step(m, name, file)) diffs.push_back(d);
  m.eval();
  diffs.push_back({"eval y", parity::rel_diff(m.forward(get("eval.x")), get("eval.y"))});
  if (auto* vit = dynamic_cast<models::ViT*>(&m))
    diffs.push_back(
        {"class attention", parity::rel_diff(vit->class_attention(get("eval.x")), get("eval.class_attention"))});
  for (auto& [k, v] : m.state_dict())
    diffs.push_back({"after " + k, parity::rel_diff(v.to(f64), get("after." + k).to(f64))});
  return parity::report("vision_models_parity", name, m.type_name(), diffs);
}

}  // namespace

int main(int argc, char** argv) {
  return xg::parity::run_file("vision_models_parity", argc, argv, run_case);
}
