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
//   bilstm_gp, cross_attention_gp, linear_cross_entropy_gg
//                    through the ops whose second order is computed by
//                    recomputation (nn::LSTM's recurrence, attention,
//                    linear_cross_entropy): g = the gradient with respect to
//                    x alone, by xg::grad(create_graph); P = sum(g^2); dP/d
//                    every parameter and input by xg::grad (allow_unused)
//                    and again by P.backward()
//   wgan_gp_layernorm  as mlp_gp, through nn::LayerNorm
// Every tensor must agree with PyTorch to parity::kTolerance relative to its
// largest value (the key biases, and in cross_attention_gp the value biases,
// whose derivatives are zero by construction, relative to the largest of all
// parameters': see parity::zero_by_construction), and
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
using parity::compare_all;

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
  // get(key), or undefined when the file has no such tensor.
  Tensor find(const std::string& key) const {
    auto it = file.find(name + "." + key);
    return it == file.end() ? Tensor() : it->second;
  }
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

// A WGAN-GP critic's loss, mean(D(x)) + weight * mean((|dD/dx| - 1)^2), the
// first gradient with respect to x alone; backward into every parameter and
// x, compared with PyTorch's. The critic's configuration line is
// "in hidden weight"; Critic is built from (in, hidden, gen).
template <class Critic>
bool gradient_penalty(const CaseFile& c, std::istringstream& config, const char* what) {
  int64_t in = 0, hidden = 0;
  double weight = 0;
  config >> in >> hidden >> weight;
  Generator gen(0);
  Critic critic(in, hidden, gen);
  critic.to(f64);
  critic.load_state_dict(c.group("param"));
  Tensor x = c.get("x").requires_grad_();
  const Tensor d = critic.forward(x);  // (N,1)
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
  return parity::report(kProgram, c.name, what, diffs, kTolerance);
}

bool mlp_gp(const CaseFile& c, std::istringstream& config) {
  return gradient_penalty<Critic>(c, config, "gradient penalty, backward through grad(create_graph)");
}

// ---- the Transformer ----------------------------------------------------------------

models::Batch batch(const Tensor& ids) {
  const int64_t* p = ids.data<int64_t>();
  return {std::vector<int64_t>(p, p + ids.numel()), ids.size(0), ids.size(1)};
}

// file["CASE.PREFIX" + name] for each name (optional: undefined where missing).
std::vector<Tensor> from_file(const CaseFile& c, const std::string& prefix, const std::vector<std::string>& names,
                              bool optional = false) {
  std::vector<Tensor> out;
  for (const std::string& n : names) out.push_back(optional ? c.find(prefix + n) : c.get(prefix + n));
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
  model.load_state_dict(c.group("param"));  // strict: the names of PyTorch's layers are exactly ours
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

// ---- second order through recomputed backwards -------------------------------------

// The first gradient d<y, gy>/dx with respect to x alone, on the tape: every
// other input's share of the second order comes through its graph only.
Tensor first_gradient(const Tensor& y, const Tensor& gy, const Tensor& x) {
  GradOptions o;
  o.create_graph = true;
  return grad({y}, {x}, {gy}, o)[0];
}

// dP/d each of `inputs` by xg::grad (allow_unused, the graph kept) and then
// by P.backward() into their grad(), both against PyTorch's P.backward()
// ("grad.NAME"; missing where PyTorch has none: the input does not reach P).
// zero_ends as compare_all's.
void compare_second_order(std::vector<std::pair<std::string, double>>& diffs, const CaseFile& c, const Tensor& p,
                          const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                          const std::vector<std::string>& zero_ends = {}) {
  GradOptions o;
  o.allow_unused = true;
  o.retain_graph = true;
  const std::vector<Tensor> by_grad = grad({p}, inputs, {}, o);
  p.backward();
  std::vector<Tensor> by_backward;
  for (const Tensor& t : inputs) by_backward.push_back(t.grad());
  const std::vector<Tensor> ref = from_file(c, "grad.", names, true);
  compare_all(diffs, "grad dP/d", names, by_grad, ref, zero_ends);
  compare_all(diffs, "backward dP/d", names, by_backward, ref, zero_ends);
}

// The case's checks for P = |g|^2, g = d<y, gy>/dx with respect to x alone:
// g, P, and dP/d every parameter of m and every tensor of `others` (x among
// them), as compare_second_order.
bool penalty_case(const CaseFile& c, nn::Module& m, const Tensor& y, const Tensor& x,
                  const std::vector<std::pair<std::string, Tensor>>& others, const std::vector<std::string>& zero_ends,
                  const char* what) {
  const Tensor g = first_gradient(y, c.get("gy"), x);
  const Tensor p = sum(mul(g, g));
  std::vector<std::pair<std::string, double>> diffs = {{"g", parity::rel_diff(g, c.get("g"))},
                                                       {"P", parity::rel_diff(p, c.get("p"))}};
  std::vector<std::string> names;
  std::vector<Tensor> inputs;
  for (auto& [pname, w] : m.named_parameters()) names.push_back(pname), inputs.push_back(w);
  for (const auto& [name, t] : others) names.push_back(name), inputs.push_back(t);
  compare_second_order(diffs, c, p, names, inputs, zero_ends);
  return parity::report(kProgram, c.name, what, diffs, kTolerance);
}

// nn::LSTM(bidirectional) with lengths, h0 and c0; y its output.
bool bilstm_gp(const CaseFile& c, std::istringstream& config) {
  int64_t input_size = 0, hidden_size = 0;
  std::string lengths_text;
  config >> input_size >> hidden_size >> lengths_text;
  const auto ro = nn::RNNOptions(input_size, hidden_size).batch_first(true).bidirectional(true);
  std::vector<int64_t> lengths;
  std::istringstream l(lengths_text);
  for (std::string v; std::getline(l, v, ',');) lengths.push_back(std::stoll(v));
  Generator gen(0);
  nn::LSTM lstm(ro, gen);
  lstm.to(f64);
  lstm.load_state_dict(c.group("param"));  // strict: torch.nn.LSTM's names are ours
  Tensor x = c.get("x").requires_grad_(), h0 = c.get("h0").requires_grad_(), c0 = c.get("c0").requires_grad_();
  const Tensor y = lstm.forward(x, h0, lengths, c0).output;  // (B,T,2H)
  return penalty_case(c, lstm, y, x, {{"h0", h0}, {"c0", c0}, {"x", x}}, {},
                      "bidirectional LSTM, P = |d<y,gy>/dx|^2, dP/d all");
}

// The critic fc2(tanh(ln(fc1(x)))).
struct LayerNormCritic : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> ln;
  LayerNormCritic(int64_t in, int64_t hidden, Generator& gen)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(in, hidden, gen))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(hidden, 1, gen))),
        ln(register_module("ln", std::make_shared<nn::LayerNorm>(hidden))) {}
  Tensor forward(const Tensor& x) override { return fc2->forward(tanh(ln->forward(fc1->forward(x)))); }
  std::string type_name() const override { return "LayerNormCritic"; }
};

bool wgan_gp_layernorm(const CaseFile& c, std::istringstream& config) {
  return gradient_penalty<LayerNormCritic>(c, config, "gradient penalty through layer_norm");
}

// nn::MultiHeadAttention(x, memory, memory, key_padding_mask). g does not
// depend on w_o.bias (added last: PyTorch has no gradient for it), nor on
// w_k.bias (see parity::zero_by_construction), nor on w_v.bias (each query's weights
// sum to 1, so it adds w_o b_v to every output whatever x): dP/d of the last
// two is rounding noise on both sides.
bool cross_attention_gp(const CaseFile& c, std::istringstream& config) {
  int64_t channels = 0, heads = 0;
  config >> channels >> heads;
  Generator gen(0);
  nn::MultiHeadAttention mha(channels, heads, 0.0, gen, nullptr);
  mha.to(f64);
  mha.load_state_dict(c.group("param"));
  Tensor x = c.get("x").requires_grad_(), memory = c.get("memory").requires_grad_();
  const Tensor y = mha.forward(x, memory, memory, c.get("pad"));  // (B,T,C)
  return penalty_case(c, mha, y, x, {{"memory", memory}, {"x", x}}, {"w_k.bias", "w_v.bias"},
                      "cross-attention, P = |d<y,gy>/dx|^2, dP/d all");
}

// xg::linear_cross_entropy(x, W, b) with ignored rows and label smoothing.
bool linear_cross_entropy_gg(const CaseFile& c, std::istringstream& config) {
  int64_t ignore_index = 0;
  double smoothing = 0;
  config >> ignore_index >> smoothing;
  Tensor x = c.get("x").requires_grad_(), w = c.get("weight").requires_grad_(), b = c.get("bias").requires_grad_();
  const Tensor t = c.get("targets");
  const std::vector<int64_t> targets(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  const Tensor loss = linear_cross_entropy(x, w, b, targets, ignore_index, smoothing);
  GradOptions o;
  o.create_graph = true;
  const Tensor g = grad({loss}, {x}, {}, o)[0];  // (N,C), with respect to x alone
  const Tensor p = sum(mul(g, g));
  std::vector<std::pair<std::string, double>> diffs = {{"loss", parity::rel_diff(loss, c.get("loss"))},
                                                       {"g", parity::rel_diff(g, c.get("g"))},
                                                       {"P", parity::rel_diff(p, c.get("p"))}};
  compare_second_order(diffs, c, p, {"weight", "bias", "x"}, {w, b, x});
  return parity::report(kProgram, c.name, "P = |dL/dx|^2, dP/dW, dP/db, dP/dx", diffs, kTolerance);
}

bool run_case(const std::string& name, const std::string& config, std::map<std::string, Tensor>& file) {
  std::istringstream in(config);
  const CaseFile c{name, file};
  if (name == "mlp_gp") return mlp_gp(c, in);
  if (name == "bilstm_gp") return bilstm_gp(c, in);
  if (name == "wgan_gp_layernorm") return wgan_gp_layernorm(c, in);
  if (name == "cross_attention_gp") return cross_attention_gp(c, in);
  if (name == "linear_cross_entropy_gg") return linear_cross_entropy_gg(c, in);
  return transformer(c, in);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file(kProgram, argc, argv, run_case); }
