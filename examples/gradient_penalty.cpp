// examples/gradient_penalty.cpp: a WGAN-GP critic (Gulrajani et al., 2017).
// The critic D scores real points high and fake points low, and its gradient
// with respect to its input is held near norm 1 by the penalty
//   loss = mean D(fake) - mean D(real) + lambda * mean (|grad_x D(x_hat)| - 1)^2
// at points x_hat between real and fake. The penalty's own gradient needs the
// gradient of a gradient: xg::grad with create_graph = true.
#include <cstdio>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "optim/optim.h"
using namespace xg;

struct Critic : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  explicit Critic(Generator& gen)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(2, 64, gen))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(64, 64, gen))),
        fc3(register_module("fc3", std::make_shared<nn::Linear>(64, 1, gen))) {}
  Tensor forward(const Tensor& x) override {  // (N,2) -> (N,1)
    return fc3->forward(tanh(fc2->forward(tanh(fc1->forward(x)))));
  }
};

int main() {
  Generator gen(7);
  Critic critic(gen);
  optim::Adam adam(critic.parameters(), {1e-3});
  const double lambda = 10;
  const int64_t n = 128;
  double grad_norm = 0;
  for (int step = 1; step <= 300; ++step) {
    Tensor real = randn({n, 2}, gen, f32, 0.0, 0.5) + 2.0;  // real: around (2, 2)
    Tensor fake = randn({n, 2}, gen, f32, 0.0, 0.5);        // fake: around (0, 0)
    Tensor mix = rand({n, 1}, gen);
    Tensor x_hat = (real * mix + fake * (1.0 - mix)).requires_grad_();  // (N,2), a leaf
    // d sum(D(x_hat)) / d x_hat: each row's own gradient, as a differentiable tensor.
    GradOptions o;
    o.create_graph = true;
    Tensor g = grad({sum(critic.forward(x_hat))}, {x_hat}, {}, o)[0];  // (N,2)
    Tensor norm = sqrt(sum(g * g, {1}) + 1e-12);                        // (N)
    Tensor penalty = mean(pow(norm - 1.0, 2.0));
    Tensor wasserstein = mean(critic.forward(fake)) - mean(critic.forward(real));
    Tensor loss = wasserstein + penalty * lambda;
    grad_norm = mean(norm.detach()).item();
    adam.zero_grad();
    loss.backward();  // through the penalty's gradient too
    adam.step();
    if (step % 100 == 0)
      std::printf("step %d  critic loss %.3f  mean |grad D| %.3f  D(real) - D(fake) %.3f\n", step, loss.item(),
                  grad_norm, -wasserstein.item());
  }
  return grad_norm > 0.8 && grad_norm < 1.2 ? 0 : 1;  // 1: the penalty did not hold |grad D| near 1
}
