// Compares xgrad's nn::RNN / LSTM / GRU with what tests/torch/rnn_parity.py
// wrote from PyTorch: the same weights (loaded by their PyTorch names into
// the state dict), inputs, initial states and lengths; the outputs, final
// states and the gradients of every parameter and input must agree to
// parity::kTolerance relative to the largest value of each tensor. Prints one line per case;
// exits 1 if any differs.
//   rnn_parity FILE.safetensors
#include <cmath>
#include <cstdio>
#include <exception>
#include <sstream>

#include "autograd/xg.h"
#include "nn/rnn.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

bool run_case(const std::string& name, const std::string& config, std::map<std::string, Tensor>& file) {
  std::istringstream in(config);
  std::string kind, nonlinearity, lengths_text;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  int bidirectional = 0;
  in >> kind >> nonlinearity >> input_size >> hidden_size >> num_layers >> bidirectional >> lengths_text;
  const auto o = nn::RNNOptions(input_size, hidden_size)
                     .num_layers(num_layers)
                     .nonlinearity(kind == "RNN" ? nonlinearity : "tanh")
                     .batch_first(true)
                     .bidirectional(bidirectional != 0);
  std::vector<int64_t> lengths;
  if (lengths_text != "-") {
    std::istringstream l(lengths_text);
    for (std::string v; std::getline(l, v, ',');) lengths.push_back(std::stoll(v));
  }
  Generator gen(0);
  std::unique_ptr<nn::RNNBase> m;
  if (kind == "LSTM") m = std::make_unique<nn::LSTM>(o, gen);
  else if (kind == "GRU") m = std::make_unique<nn::GRU>(o, gen);
  else m = std::make_unique<nn::RNN>(o, gen);
  m->to(f64);
  std::map<std::string, Tensor> weights;
  const std::string prefix = name + ".param.";
  for (auto& [k, v] : file)
    if (k.rfind(prefix, 0) == 0) weights[k.substr(prefix.size())] = v;
  m->load_state_dict(weights);  // strict: every PyTorch name is one of ours, and back
  auto get = [&](const std::string& key) {
    auto it = file.find(name + "." + key);
    return it == file.end() ? Tensor() : it->second;
  };
  Tensor x = get("x").requires_grad_(), h0 = get("h0"), c0 = get("c0");
  if (h0.defined()) h0.requires_grad_();
  if (c0.defined()) c0.requires_grad_();
  const nn::RNNOutput r = m->forward(x, h0, lengths, c0);
  Tensor loss = add(sum(mul(r.output, get("w_out"))), sum(mul(r.h_n, get("w_h"))));
  if (r.c_n.defined()) loss = add(loss, sum(mul(r.c_n, get("w_c"))));
  loss.backward();

  std::vector<std::pair<std::string, double>> diffs = {{"output", parity::rel_diff(r.output, get("output"))},
                                                       {"h_n", parity::rel_diff(r.h_n, get("h_n"))},
                                                       {"grad x", parity::rel_diff(x.grad(), get("grad.x"))}};
  if (r.c_n.defined()) diffs.push_back({"c_n", parity::rel_diff(r.c_n, get("c_n"))});
  if (h0.defined()) diffs.push_back({"grad h0", parity::rel_diff(h0.grad(), get("grad.h0"))});
  if (c0.defined()) diffs.push_back({"grad c0", parity::rel_diff(c0.grad(), get("grad.c0"))});
  for (auto& [pname, p] : m->named_parameters()) diffs.push_back({"grad " + pname, parity::rel_diff(p.grad(), get("grad." + pname))});
  return parity::report("rnn_parity", name, m->type_name(), diffs);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file("rnn_parity", argc, argv, run_case); }
