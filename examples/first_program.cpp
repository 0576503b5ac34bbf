// examples/first_program.cpp: a two-layer MLP learns which coordinate is larger.
#include <cstdio>
#include "autograd/xg.h"
#include "nn/nn.h"
#include "optim/optim.h"
using namespace xg;

struct MLP : nn::Module {                      // parameters fc1.weight, fc1.bias, fc2.weight, fc2.bias
  std::shared_ptr<nn::Linear> fc1, fc2;
  explicit MLP(Generator& gen)
      : fc1(register_module("fc1", nn::Linear(2, 32, gen))),
        fc2(register_module("fc2", nn::Linear(32, 2, gen))) {}
  Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
};

int main() {
  Generator gen(42);                           // every random draw is seeded
  Tensor x = randn({256, 2}, gen);             // (N,2) float32
  std::vector<int64_t> y = argmax(x, -1);      // the class: the larger coordinate
  MLP model(gen);
  optim::Adam adam(model.parameters(), {0.01});  // learning rate 0.01
  for (int step = 1; step <= 200; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), y);  // (N,2) logits -> scalar
    loss.backward();                           // fills every parameter's grad()
    adam.step();
    if (step % 50 == 0) std::printf("step %d loss %.4f\n", step, loss.item());
  }
}
