// Compares max_pool2d (and its indices), avg_pool2d, adaptive_avg_pool2d,
// batch_norm (and batch_norm_relu) and group_norm with what tests/torch/pool_norm_parity.py wrote
// from PyTorch in float64: the output, and the gradients of every input of
// sum(tanh(y) * wy) plus a gradient penalty on the input (so the second
// order too); for batch_norm also the running statistics after three
// training steps, and evaluation with them. Prints one line per case; exits
// 1 if any differs beyond parity::kTolerance.
//   pool_norm_parity FILE.safetensors
#include <functional>
#include <sstream>

#include "autograd/xg.h"
#include "tests/torch/parity.h"

using namespace xg;

namespace {

using Diffs = std::vector<std::pair<std::string, double>>;
using File = std::map<std::string, Tensor>;

// y = f(inputs) against `prefix`y, and the gradients of L + P against
// `prefix`grad.NAME, P = sum((dL/dx)^2) with x the first input.
void compare_loss(const std::string& prefix, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                  std::vector<Tensor> inputs, const std::vector<std::string>& names, File& file, Diffs& diffs) {
  for (Tensor& t : inputs) t = t.detach().requires_grad_();
  const Tensor y = f(inputs);
  GradOptions create;
  create.create_graph = true;
  const Tensor loss = sum(mul(tanh(y), file.at(prefix + "wy")));
  const Tensor gx = grad({loss}, {inputs[0]}, {}, create)[0];
  GradOptions unused;
  unused.allow_unused = true;
  const std::vector<Tensor> g = grad({add(loss, sum(mul(gx, gx)))}, inputs, {}, unused);
  diffs.push_back({prefix + "y", parity::rel_diff(y, file.at(prefix + "y"))});
  for (size_t i = 0; i < inputs.size(); ++i)
    diffs.push_back({prefix + "grad." + names[i],
                     parity::rel_diff(g[i].defined() ? g[i] : zeros(inputs[i].shape(), f64),
                                      file.at(prefix + "grad." + names[i]))});
}

void pool_case(const std::string& name, std::istringstream& in, File& file, Diffs& diffs) {
  std::string kind;
  in >> kind;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  if (kind == "max") {
    std::array<int64_t, 2> k, s, p, d;
    bool ceil_mode = false;
    in >> k[0] >> k[1] >> s[0] >> s[1] >> p[0] >> p[1] >> d[0] >> d[1] >> ceil_mode;
    const auto o = MaxPool2dOptions(k).stride(s).padding(p).dilation(d).ceil_mode(ceil_mode);
    f = [o](const std::vector<Tensor>& v) { return max_pool2d(v[0], o); };
    const Tensor idx = max_pool2d_with_indices(file.at(name + ".x"), o).indices;
    diffs.push_back({"indices", parity::rel_diff(idx.to(f64), file.at(name + ".indices").to(f64))});
  } else if (kind == "avg") {
    std::array<int64_t, 2> k, s, p;
    bool ceil_mode = false, count_include_pad = true;
    in >> k[0] >> k[1] >> s[0] >> s[1] >> p[0] >> p[1] >> ceil_mode >> count_include_pad;
    const auto o = AvgPool2dOptions(k).stride(s).padding(p).ceil_mode(ceil_mode).count_include_pad(count_include_pad);
    f = [o](const std::vector<Tensor>& v) { return avg_pool2d(v[0], o); };
  } else {
    std::array<int64_t, 2> size{};
    in >> size[0] >> size[1];
    f = [size](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], size); };
  }
  compare_loss(name + ".", f, {file.at(name + ".x")}, {"x"}, file, diffs);
}

// The inputs present in the file among x, w, b (weight and bias may be absent).
std::vector<std::string> present(const std::string& prefix, File& file) {
  std::vector<std::string> names{"x"};
  for (const char* n : {"w", "b"})
    if (file.count(prefix + n)) names.push_back(n);
  return names;
}

std::vector<Tensor> tensors_of(const std::string& prefix, const std::vector<std::string>& names, File& file) {
  std::vector<Tensor> r;
  for (const auto& n : names) r.push_back(file.at(prefix + n));
  return r;
}

void batch_norm_case(const std::string& name, std::istringstream& in, File& file, Diffs& diffs) {
  double momentum = 0, eps = 0;
  int affine = 0, stats = 0, relu = 0;
  in >> momentum >> eps >> affine >> stats >> relu;
  const std::vector<std::string> names = present(name + ".", file);
  std::vector<Tensor> params = tensors_of(name + ".", names, file);
  const int64_t c = params[0].size(1);
  Tensor rm = stats ? zeros({c}, f64) : Tensor(), rv = stats ? ones({c}, f64) : Tensor();
  auto f = [&](bool training) {
    return [&, training](const std::vector<Tensor>& v) {
      return (relu ? batch_norm_relu : batch_norm)(v[0], rm, rv, v.size() > 1 ? v[1] : Tensor(),
                                                   v.size() > 2 ? v[2] : Tensor(), training, momentum, eps, {});
    };
  };
  for (int step = 0; step < 2; ++step) {  // two steps that only move the running statistics
    std::vector<Tensor> inputs = params;
    inputs[0] = file.at(name + ".x" + std::to_string(step));
    f(true)(inputs);
  }
  compare_loss(name + ".", f(true), params, names, file, diffs);
  if (!stats) return;
  diffs.push_back({"running_mean", parity::rel_diff(rm, file.at(name + ".running_mean"))});
  diffs.push_back({"running_var", parity::rel_diff(rv, file.at(name + ".running_var"))});
  params[0] = file.at(name + ".eval.x");
  compare_loss(name + ".eval.", f(false), params, names, file, diffs);
}

void group_norm_case(const std::string& name, std::istringstream& in, File& file, Diffs& diffs) {
  int64_t groups = 0;
  double eps = 0;
  in >> groups >> eps;
  const std::vector<std::string> names = present(name + ".", file);
  auto f = [groups, eps](const std::vector<Tensor>& v) {
    return group_norm(v[0], groups, v.size() > 1 ? v[1] : Tensor(), v.size() > 2 ? v[2] : Tensor(), eps);
  };
  compare_loss(name + ".", f, tensors_of(name + ".", names, file), names, file, diffs);
}

bool run_case(const std::string& name, const std::string& config, File& file) {
  std::istringstream in(config);
  Diffs diffs;
  if (config.rfind("batch_norm ", 0) == 0) {
    in.ignore(11);
    batch_norm_case(name, in, file, diffs);
  } else if (config.rfind("group_norm ", 0) == 0) {
    in.ignore(11);
    group_norm_case(name, in, file, diffs);
  } else {
    pool_case(name, in, file, diffs);
  }
  return parity::report("pool_norm_parity", name, config, diffs);
}

}  // namespace

int main(int argc, char** argv) { return xg::parity::run_file("pool_norm_parity", argc, argv, run_case); }
