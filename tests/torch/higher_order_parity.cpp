// Compares xgrad's second-order gradients with what
// tests/torch/higher_order_parity.py wrote from PyTorch, in float64, on the
// same weights (loaded into the state dict by name) and inputs:
//   mlp_gp           gradient penalty of an MLP critic: xg::grad(create_graph)
//                    of the output with respect to the input, then
//                    Tensor::backward of the penalised loss
//   transformer_gp   a one-layer models::Transformer's loss L plus
//                    0.5 * sum_p |dL/dp|^2, differentiated again by xg::grad
//   transformer_hvp  xg::hvp of L along a direction from the file, and, on
//                    xgrad's side only, against central differences of dL/dp
// Every tensor must agree with PyTorch to parity::kTolerance relative to its
// largest value (the key biases, whose derivatives are zero by construction,
// relative to the largest of all parameters': see zero_by_construction), and
// with the central differences to kFiniteDifferenceTolerance. Prints one line
// per comparison; exits 1 if any differs.
//   higher_order_parity FILE.safetensors
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/xg.h"
#include "models/transformer.h"
#include "nn/nn.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

constexpr const char* kProgram = "higher_order_parity";
constexpr double kTolerance = parity::kTolerance;  // reached (measured 3e-15 at most), so no looser figure
// Central differences of the gradient: step and the agreement required.
constexpr double kStep = 1e-5, kFiniteDifferenceTolerance = 1e-6;

// The tensors of one case: file["CASE.KEY"], or of one group: "CASE.GROUP.NAME" -> NAME.
struct CaseFile {
  std::string name;
  std::map<std::string, Tensor>& file;
  Tensor get(const std::string& key) const { return file.at(name + "." + key); }
  std::map<std::string, Tensor> group(const std::string& group) const {
    std::map<std::string, Tensor> out;
    const std::string prefix = name + "." + group + ".";
    for (auto& [k, v] : file)
      if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
    return out;
  }
};

// ---- mlp_gp -------------------------------------------------------------------------

// The critic: Linear(in, hidden), tanh, Linear(hidden, hidden), gelu, Linear(hidden, 1).
struct Critic : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  Critic(int64_t in, int64_t hidden, Generator& gen)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(in, hidden, gen))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden, gen))),
        fc3(register_module("fc3", std::make_shared<nn::Linear>(hidden, 1, gen))) {}
  Tensor forward(const Tensor& x) override { return fc3->forward(gelu(fc2->forward(tanh(fc1->forward(x))))); }
  std::string type_name() const override { return "Critic"; }
};

bool mlp_gp(const CaseFile& c, std::istringstream& config) {
  int64_t in = 0, hidden = 0;
  double weight = 0;
  config >> in >> hidden >> weight;
  Generator gen(0);
  Critic critic(in, hidden, gen);
  critic.to(f64);
  critic.load_state_dict(c.group("param"));
  Tensor x = c.get("x").requires_grad_();
  Tensor d = critic.forward(x);  // (N,1)
  GradOptions o;
  o.create_graph = true;
  const Tensor g = grad({sum(d)}, {x}, {}, o)[0];  // (N,in), on the tape
  const Tensor norm = sqrt(sum(mul(g, g), {1}));   // (N)
  const Tensor loss = mean(d) + weight * mean(pow(norm - 1.0, 2.0));
  loss.backward();
  std::vector<std::pair<std::string, double>> diffs = {{"loss", parity::rel_diff(loss, c.get("loss"))},
                                                       {"grad x", parity::rel_diff(x.grad(), c.get("grad.x"))}};
  for (auto& [pname, p] : critic.named_parameters())
    diffs.push_back({"grad " + pname, parity::rel_diff(p.grad(), c.get("grad." + pname))});
  return parity::report(kProgram, c.name, "gradient penalty, backward through grad(create_graph)", diffs,
                        kTolerance);
}

// ---- the Transformer ----------------------------------------------------------------

// The key projection's bias adds q . b to every score of a query's row, which
// the softmax ignores: the loss does not depend on w_k.bias at all, so its
// gradient and every second derivative through it are zero in exact
// arithmetic, and both sides hold rounding noise (~1e-17 against gradients
// ~1). Such a tensor is compared relative to the largest value of all the
// parameters' tensors of the comparison; any other relative to its own.
bool zero_by_construction(const std::string& name) {
  const std::string end = ".w_k.bias";
  return name.size() >= end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::abs(x));
  return m;
}

// Appends ("LABEL NAME", difference) for each parameter's tensor, ours against ref.
void compare_all(std::vector<std::pair<std::string, double>>& diffs, const std::string& label,
                 const std::vector<std::string>& names, const std::vector<Tensor>& ours,
                 const std::vector<Tensor>& ref) {
  double scale = 1e-300;
  for (const Tensor& r : ref) scale = std::max(scale, max_abs(r));
  for (size_t i = 0; i < names.size(); ++i) {
    double d = parity::rel_diff(ours[i], ref[i]);
    if (zero_by_construction(names[i]) && d < 1e300) d = d * max_abs(ref[i]) / scale;  // max |ours - ref| / scale
    diffs.push_back({label + " " + names[i], d});
  }
}

models::Batch batch(const Tensor& ids) {
  const int64_t* p = ids.data<int64_t>();
  return {std::vector<int64_t>(p, p + ids.numel()), ids.size(0), ids.size(1)};
}

// file["CASE.PREFIX" + name] for each name.
std::vector<Tensor> from_file(const CaseFile& c, const std::string& prefix, const std::vector<std::string>& names) {
  std::vector<Tensor> out;
  for (const std::string& n : names) out.push_back(c.get(prefix + n));
  return out;
}

bool transformer(const CaseFile& c, std::istringstream& config) {
  std::string kind;
  models::TransformerConfig cfg;
  double smoothing = 0;
  config >> kind >> cfg.src_vocab >> cfg.d_model >> cfg.heads >> cfg.d_ff >> cfg.pad_id >> smoothing;
  cfg.tgt_vocab = cfg.src_vocab;
  cfg.layers = 1;
  cfg.dropout = 0;
  cfg.max_len = 32;
  models::Transformer model(cfg);
  model.to(f64);
  model.load_state_dict(c.group("param"));  // strict: PyTorch's names are exactly ours
  const models::Batch src = batch(c.get("src")), tgt_in = batch(c.get("tgt_in")), tgt_out = batch(c.get("tgt_out"));
  auto loss_fn = [&] { return model.loss(src, tgt_in, tgt_out, smoothing); };
  std::vector<std::string> names;
  std::vector<Tensor> params;
  for (auto& [pname, p] : model.named_parameters()) names.push_back(pname), params.push_back(p);

  std::vector<std::pair<std::string, double>> diffs;
  if (kind == "gp") {
    const Tensor loss = loss_fn();
    GradOptions o;
    o.create_graph = true;
    const std::vector<Tensor> g = grad({loss}, params, {}, o);
    Tensor penalty = scalar(0.0, f64);
    for (const Tensor& gi : g) penalty = penalty + sum(mul(gi, gi));
    const Tensor total = loss + 0.5 * penalty;
    const std::vector<Tensor> second = grad({total}, params);
    diffs = {{"loss", parity::rel_diff(loss, c.get("loss"))}, {"total", parity::rel_diff(total, c.get("total"))}};
    compare_all(diffs, "dL/d", names, g, from_file(c, "grad.", names));
    compare_all(diffs, "dtotal/d", names, second, from_file(c, "grad_total.", names));
    return parity::report(kProgram, c.name, "L + 0.5 |dL/dp|^2, grad of grad(create_graph)", diffs, kTolerance);
  }

  // hvp: against PyTorch, then against central differences of the gradient.
  const std::vector<Tensor> v = from_file(c, "v.", names);
  Tensor value;
  const std::vector<Tensor> hv = hvp(loss_fn, params, v, &value);
  diffs.push_back({"loss", parity::rel_diff(value, c.get("loss"))});
  compare_all(diffs, "Hv", names, hv, from_file(c, "hvp.", names));
  const bool ok = parity::report(kProgram, c.name, "xg::hvp against torch.autograd.grad", diffs, kTolerance);

  std::vector<Tensor> start;
  for (const Tensor& p : params) start.push_back(p.detach().clone());
  auto gradient_at = [&](double step) {  // dL/dp at p + step v
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(start[i] + step * v[i]);
    return grad({loss_fn()}, params);
  };
  const std::vector<Tensor> plus = gradient_at(kStep), minus = gradient_at(-kStep);
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(start[i]);
  std::vector<Tensor> differences;
  for (size_t i = 0; i < params.size(); ++i) differences.push_back((plus[i] - minus[i]) / (2 * kStep));
  std::vector<std::pair<std::string, double>> fd;
  compare_all(fd, "Hv", names, differences, hv);
  return parity::report(kProgram, c.name, "xg::hvp against central differences (step 1e-5)", fd,
                        kFiniteDifferenceTolerance) &&
         ok;
}

bool run_case(const std::string& name, const std::string& config, std::map<std::string, Tensor>& file) {
  std::istringstream in(config);
  const CaseFile c{name, file};
  if (name == "mlp_gp") return mlp_gp(c, in);
  return transformer(c, in);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file(kProgram, argc, argv, run_case); }
