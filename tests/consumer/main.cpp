// A user's program built against an installed xgrad: one Linear layer, a
// loss, its gradient, and a step of Adam. Prints the loss before and after.
#include <cstdio>
#include <memory>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "optim/adam.h"

int main() {
  xg::Generator gen(7);
  auto layer = std::make_shared<xg::nn::Linear>(4, 2, gen);
  xg::Tensor x = xg::randn({8, 4}, gen);
  xg::Tensor target = xg::randn({8, 2}, gen);
  xg::optim::AdamOptions opts;
  opts.lr = 0.1;
  xg::optim::Adam adam(layer->parameters(), opts);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    adam.zero_grad();
    xg::Tensor diff = layer->forward(x) - target;
    xg::Tensor loss = xg::mean(diff * diff);
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("consumer: loss %.4f -> %.4f\n", first, last);
  return last < first ? 0 : 1;
}
