// examples/transformer_hvp.cpp: the curvature of a Transformer's loss. A
// Hessian-vector product H v costs about two backward passes (xg::hvp:
// the gradient with create_graph, then the gradient of <gradient, v>), and
// never forms H. Power iteration with it finds H's eigenvalue of largest
// magnitude, the "sharpness" of the loss at the current weights when it is
// positive: plain gradient descent is stable there only below lr = 2 / lambda.
#include <cmath>
#include <cstdio>

#include "autograd/xg.h"
#include "models/transformer.h"
#include "optim/optim.h"
using namespace xg;

int main() {
  models::TransformerConfig cfg;  // a small copy-task model: 2+2 layers, C=64
  cfg.src_vocab = cfg.tgt_vocab = 12;
  cfg.dropout = 0;  // the loss must be one function of the weights
  models::Transformer model(cfg);
  // A fixed batch of the copy task: ids 3..11, BOS 1, EOS 2, no padding.
  Generator gen(5);
  const int64_t rows = 16, len = 8;
  models::Batch src{{}, rows, len}, tgt_in{{}, rows, len + 1}, tgt_out{{}, rows, len + 1};
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> s;
    for (int64_t i = 0; i < len; ++i) s.push_back(3 + static_cast<int64_t>(gen.uniform() * 9));
    src.ids.insert(src.ids.end(), s.begin(), s.end());
    tgt_in.ids.push_back(1);
    tgt_in.ids.insert(tgt_in.ids.end(), s.begin(), s.end());
    tgt_out.ids.insert(tgt_out.ids.end(), s.begin(), s.end());
    tgt_out.ids.push_back(2);
  }
  auto loss = [&] { return model.loss(src, tgt_in, tgt_out, 0.0); };
  std::vector<Tensor> params = model.parameters();
  optim::Adam adam(params, {1e-3});
  for (int step = 1; step <= 100; ++step) {  // a little training first
    adam.zero_grad();
    loss().backward();
    adam.step();
  }
  // Power iteration: v <- H v / |H v|; lambda = <v, H v> for a unit v.
  std::vector<Tensor> v;
  for (const Tensor& p : params) v.push_back(randn(p.shape(), gen));
  auto norm = [](const std::vector<Tensor>& t) {
    double s = 0;
    for (const Tensor& x : t) s += sum(x * x).item();
    return std::sqrt(s);
  };
  double lambda = 0, previous = 0;
  Tensor value;
  for (int it = 1; it <= 30; ++it) {
    const double n = norm(v);
    for (Tensor& x : v) x = x / n;
    const std::vector<Tensor> hv = hvp(loss, params, v, &value);
    double dot = 0;
    for (size_t i = 0; i < v.size(); ++i) dot += sum(v[i] * hv[i]).item();
    previous = lambda;
    lambda = dot;
    v = hv;
    if (it % 5 == 0) std::printf("iteration %2d  lambda_max %.4f\n", it, lambda);
  }
  std::printf("loss %.4f, %zu parameter tensors: Hessian eigenvalue of largest magnitude %.4f (last change %.1e relative)\n",
              value.item(), params.size(), lambda, std::abs(lambda - previous) / std::abs(lambda));
  return std::abs(lambda - previous) <= 1e-2 * std::abs(lambda) ? 0 : 1;  // 1: the iteration did not settle
}
