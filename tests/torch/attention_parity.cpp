// Compares nn::AdditiveAttention and nn::LuongAttention (dot, general) with
// what tests/torch/attention_parity.py wrote from PyTorch: the same weights
// (loaded into the state dict by name), queries, keys, values and padding;
// the context, the weights and every gradient must agree to
// parity::kTolerance. Prints one line per case; exits 1 if any differs.
//   attention_parity FILE.safetensors
#include <cstdio>
#include <exception>
#include <sstream>

#include "autograd/xg.h"
#include "nn/luong_attention.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

bool run_case(const std::string& name, const std::string& config, std::map<std::string, Tensor>& file) {
  std::istringstream in(config);
  std::string kind;
  int64_t Cq = 0, Ck = 0, A = 0;
  in >> kind >> Cq >> Ck >> A;
  Generator gen(0);
  std::unique_ptr<nn::Module> m;
  if (kind == "additive") {
    m = std::make_unique<nn::AdditiveAttention>(Cq, Ck, A, gen);
  } else {
    nn::LuongOptions o;
    o.query_size = Cq;
    o.key_size = Ck;
    o.score = kind;
    m = std::make_unique<nn::LuongAttention>(o, gen);
  }
  m->to(f64);
  std::map<std::string, Tensor> weights;
  const std::string prefix = name + ".param.";
  for (auto& [k, v] : file)
    if (k.rfind(prefix, 0) == 0) weights[k.substr(prefix.size())] = v;
  m->load_state_dict(weights);
  auto get = [&](const std::string& key) { return file.at(name + "." + key); };
  Tensor q = get("q").requires_grad_(), k = get("k").requires_grad_(), v = get("v").requires_grad_();
  const nn::AttentionOutput a = kind == "additive"
                                    ? static_cast<nn::AdditiveAttention&>(*m).forward(q, k, v, get("pad"))
                                    : static_cast<nn::LuongAttention&>(*m).forward(q, k, v, get("pad"));
  add(sum(mul(a.context, get("w_context"))), sum(mul(a.weights, get("w_weights")))).backward();
  std::vector<std::pair<std::string, double>> diffs = {{"context", parity::rel_diff(a.context, get("context"))},
                                                       {"weights", parity::rel_diff(a.weights, get("weights"))},
                                                       {"grad q", parity::rel_diff(q.grad(), get("grad.q"))},
                                                       {"grad k", parity::rel_diff(k.grad(), get("grad.k"))},
                                                       {"grad v", parity::rel_diff(v.grad(), get("grad.v"))}};
  for (auto& [pname, p] : m->named_parameters())
    diffs.push_back({"grad " + pname, parity::rel_diff(p.grad(), get("grad." + pname))});
  return parity::report("attention_parity", name, m->type_name(), diffs);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file("attention_parity", argc, argv, run_case); }
