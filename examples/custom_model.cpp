// A user's own model with the nn API: an MLP that classifies points of a
// 4-arm spiral it generates itself, trained with Adam. Seeded; runs in well
// under a second.
//
//   ./custom_model [--steps 200] [--hidden 64] [--seed 2024]
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "optim/adam.h"

using namespace xg;

// (N, 2) points -> (N, K) logits.
class SpiralClassifier : public nn::Module {
 public:
  SpiralClassifier(int64_t hidden, int64_t classes, Generator& gen) {
    fc1 = register_module("fc1", nn::Linear(2, hidden, gen));
    fc2 = register_module("fc2", nn::Linear(hidden, hidden, gen));
    norm = register_module("norm", nn::LayerNorm(hidden));
    head = register_module("head", nn::Linear(hidden, classes, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(fc1->forward(x));        // (N, hidden)
    h = relu(norm->forward(fc2->forward(h)));  // (N, hidden)
    return head->forward(h);                 // (N, K)
  }
  std::string type_name() const override { return "SpiralClassifier"; }

 private:
  std::shared_ptr<nn::Linear> fc1, fc2, head;
  std::shared_ptr<nn::LayerNorm> norm;
};

// Arm k of a K-arm spiral: radius r in [0, 1), angle k * 2pi/K + 4r, plus noise.
// Appends (N, 2) points and their labels.
void make_spiral(int64_t K, int64_t per_class, Generator& gen, std::vector<float>& points,
                 std::vector<int64_t>& labels) {
  const double pi = std::acos(-1.0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < per_class; ++i) {
      const double r = gen.uniform();
      const double angle = k * 2.0 * pi / K + 4.0 * r + gen.normal(0.0, 0.15);
      points.push_back(static_cast<float>(r * std::cos(angle)));
      points.push_back(static_cast<float>(r * std::sin(angle)));
      labels.push_back(k);
    }
}

double accuracy(nn::Module& model, const Tensor& x, const std::vector<int64_t>& labels) {
  std::vector<int64_t> predicted = argmax(model.forward(x), -1);
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
  return 100.0 * static_cast<double>(correct) / static_cast<double>(labels.size());
}

int main(int argc, char** argv) {
  CLI::App app("Trains a 3-layer MLP on a 4-arm spiral with Adam and prints its accuracy.");
  app.name("custom_model");
  int64_t steps = 200, hidden = 64;
  uint64_t seed = 2024;
  app.add_option("--steps", steps, "full-batch Adam steps")->check(CLI::Range(int64_t{1}, int64_t{100000}))->capture_default_str();
  app.add_option("--hidden", hidden, "hidden width")->check(CLI::Range(int64_t{1}, int64_t{4096}))->capture_default_str();
  app.add_option("--seed", seed, "data and initialisation seed")->check(CLI::Range(int64_t{0}, int64_t{1} << 62))->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "custom_model: %s (try --help)\n", e.what());
    return 2;
  }
  const int64_t K = 4, per_class = 150;
  Generator gen(seed);
  std::vector<float> train_pts, test_pts;
  std::vector<int64_t> train_labels, test_labels;
  make_spiral(K, per_class, gen, train_pts, train_labels);
  make_spiral(K, per_class, gen, test_pts, test_labels);
  Tensor x = from_vector(train_pts, {K * per_class, 2});      // (N, 2)
  Tensor x_test = from_vector(test_pts, {K * per_class, 2});  // (N, 2)

  SpiralClassifier model(hidden, K, gen);
  std::printf("SpiralClassifier: %lld parameters\n", static_cast<long long>(model.num_parameters()));
  for (auto& [name, p] : model.named_parameters())
    std::printf("  %-12s %s\n", name.c_str(), shape_str(p.shape()).c_str());

  // Full-batch Adam.
  optim::AdamOptions opts;
  opts.lr = 0.003;
  optim::Adam adam(model.parameters(), opts);
  for (int64_t step = 0; step <= steps; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), train_labels);
    loss.backward();
    adam.step();
    if (step % 20 == 0 || step == steps) std::printf("step %3lld  loss %.4f\n", static_cast<long long>(step), loss.item());
  }

  model.eval();
  std::printf("accuracy: train %.1f%%, held-out %.1f%%\n", accuracy(model, x, train_labels),
              accuracy(model, x_test, test_labels));
  return 0;
}
