// A user's own model, trained a little and written as ONNX: a bag-of-tokens
// classifier (Embedding, LayerNorm, a GELU feed-forward, the mean over the
// sequence, a Linear head) that learns which of 3 classes the first token
// names, exported with the batch and the length left to the runtime. Any ONNX
// runtime can then serve it; tests/onnx/run_ort.js shows ONNX Runtime's side.
//
//   ./onnx_export [OUT.onnx]   (default: classifier.onnx)
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "onnx/export.h"
#include "optim/adam.h"

using namespace xg;

// ids (B, T) -> class logits (B, 3).
class TokenClassifier : public nn::Module {
 public:
  TokenClassifier(int64_t vocab, int64_t width, Generator& gen) {
    emb = register_module("emb", std::make_shared<nn::Embedding>(vocab, width, gen, std::nullopt, 0.5));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(width));
    ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(width, 2 * width, 0.1, gen,
                                                                              std::make_shared<Generator>(1),
                                                                              nn::Activation::gelu));
    head = register_module("head", std::make_shared<nn::Linear>(width, 3, gen));
  }
  Tensor forward(const Tensor& ids) override {
    const auto named = scope();
    Tensor h = norm->forward(emb->forward(ids));     // (B, T, C)
    h = h + ff->forward(h);                           // (B, T, C)
    Tensor first = slice(h, 1, 0, 1);                 // (B, 1, C): the token that names the class
    Tensor pooled = mean(h, {1}) + mean(first, {1});  // (B, C)
    return head->forward(pooled);                     // (B, 3)
  }
  std::string type_name() const override { return "TokenClassifier"; }

 private:
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::PositionwiseFeedForward> ff;
  std::shared_ptr<nn::Linear> head;
};

// B random sequences of length T over `vocab` ids; the class is the first id mod 3.
Tensor batch(int64_t b, int64_t t, int64_t vocab, Generator& gen, std::vector<int64_t>& labels) {
  std::vector<int64_t> ids(static_cast<size_t>(b * t));
  for (auto& id : ids) id = static_cast<int64_t>(gen.uniform() * vocab) % vocab;
  labels.clear();
  for (int64_t r = 0; r < b; ++r) labels.push_back(ids[r * t] % 3);
  return from_ints(ids, {b, t});
}

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "classifier.onnx";
  const int64_t vocab = 12;
  Generator gen(2024);
  TokenClassifier model(vocab, 16, gen);
  std::printf("TokenClassifier: %lld parameters\n", static_cast<long long>(model.num_parameters()));
  optim::AdamOptions opts;
  opts.lr = 0.01;
  optim::Adam adam(model.parameters(), opts);
  std::vector<int64_t> labels;
  for (int step = 0; step <= 100; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy(model.forward(batch(32, 6, vocab, gen, labels)), labels);
    loss.backward();
    adam.step();
    if (step % 25 == 0) std::printf("step %3d  loss %.4f\n", step, loss.item());
  }
  // The example's sizes fix nothing: B and T are named, so the model runs on
  // any batch and length. Its parameters keep their names (emb.weight, ...).
  onnx::export_model(model, {"ids", batch(2, 5, vocab, gen, labels), {"B", "T"}}, out,
                     {{"logits"}, "token_classifier"});
  std::printf("wrote %s: input ids (B, T) int64, output logits (B, 3)\n", out.c_str());
  return 0;
}
