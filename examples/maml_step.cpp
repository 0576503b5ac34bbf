// examples/maml_step.cpp: one meta-learning step of MAML (Finn et al., 2017)
// on sine regression. Each task is a sine wave; the inner step adapts the
// weights to a task's few support points, w' = w - alpha dL_support/dw, and
// the meta-loss is the adapted model's loss on the task's query points. Its
// gradient with respect to w goes through the inner step's gradient: that
// gradient is taken with create_graph = true. The program prints the query
// loss after one inner step, before and after meta-training.
#include <cmath>
#include <cstdio>

#include "autograd/xg.h"
#include "optim/optim.h"
using namespace xg;

// A 1-40-40-1 MLP written as a function of its weights, so that adapted
// weights can be passed in (w1 (40,1), b1 (40), w2 (40,40), b2 (40), w3 (1,40), b3 (1)).
Tensor mlp(const std::vector<Tensor>& w, const Tensor& x) {
  return linear(relu(linear(relu(linear(x, w[0], w[1])), w[2], w[3])), w[4], w[5]);
}

// a sin(x + p) at every x: the targets (values, no gradient).
Tensor sin_of(const Tensor& x, double a, double p) {
  std::vector<float> v;
  for (double e : x.to_vector()) v.push_back(static_cast<float>(a * std::sin(e + p)));
  return from_vector(v, x.shape());
}

struct Task {
  Tensor xs, ys, xq, yq;  // support and query points, (K,1) each
};

Task sample_task(Generator& gen, int64_t k) {
  const double amplitude = gen.uniform(0.1, 5.0), phase = gen.uniform(0.0, 3.14159265);
  auto points = [&](Tensor& x, Tensor& y) {
    x = rand({k, 1}, gen, f32, -5.0, 5.0);
    y = sin_of(x, amplitude, phase);
  };
  Task t;
  points(t.xs, t.ys);
  points(t.xq, t.yq);
  return t;
}

int main() {
  Generator gen(3);
  std::vector<Tensor> w;
  for (auto [out, in] : {std::pair{40, 1}, {40, 40}, {1, 40}}) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    w.push_back(rand({out, in}, gen, f32, -bound, bound).requires_grad_());
    w.push_back(zeros({out}).requires_grad_());
  }
  const double alpha = 0.01;  // the inner step
  optim::Adam meta(w, {1e-3});
  auto adapted_query_loss = [&](const Task& t, bool create_graph) {
    Tensor support = mean(pow(mlp(w, t.xs) - t.ys, 2.0));
    GradOptions o;
    o.create_graph = create_graph;  // meta-training differentiates through this gradient
    const std::vector<Tensor> g = grad({support}, w, {}, o);
    std::vector<Tensor> fast;
    for (size_t i = 0; i < w.size(); ++i) fast.push_back(w[i] - g[i] * alpha);
    return mean(pow(mlp(fast, t.xq) - t.yq, 2.0));
  };
  auto evaluate = [&]() {  // mean query loss after one inner step, 100 fixed tasks
    Generator eval_gen(99);
    double total = 0;
    for (int i = 0; i < 100; ++i) total += adapted_query_loss(sample_task(eval_gen, 10), false).item();
    return total / 100;
  };
  const double before = evaluate();
  std::printf("before meta-training: query loss after one inner step %.3f\n", before);
  for (int step = 1; step <= 5000; ++step) {
    Tensor loss = scalar(0.0);
    for (int b = 0; b < 4; ++b) loss = loss + adapted_query_loss(sample_task(gen, 10), true) * 0.25;
    meta.zero_grad();
    loss.backward();  // the second-order MAML gradient
    meta.step();
  }
  const double after = evaluate();
  std::printf("after meta-training:  query loss after one inner step %.3f\n", after);
  return after < before / 2 ? 0 : 1;  // 1: meta-training did not halve the adapted loss
}
