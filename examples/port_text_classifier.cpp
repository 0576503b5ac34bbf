// examples/port_text_classifier.py's PyTorch model, ported line for line to
// xgrad's nn: the same classes, arguments and state-dict keys, so PyTorch's
// state dict loads as it is. Reads the file the script writes (the state
// dict, a batch of ids and PyTorch's logits) and prints the largest
// difference of xgrad's logits from PyTorch's.
//   port_text_classifier WEIGHTS.safetensors
#include "autograd/xg.h"
#include "examples/port_check.h"
#include "nn/nn.h"

using namespace xg;

// --- the model (the lines the port counts) ---
struct TextClassifier : nn::Module {
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::Sequential> head;
  explicit TextClassifier(int64_t vocab = 50, int64_t d_model = 32, int64_t nhead = 4, int64_t num_layers = 2,
                          int64_t classes = 3) {
    embed = register_module<nn::Embedding>("embed", vocab, d_model, /*padding_idx=*/0);
    auto layer = nn::TransformerLayerOptions(d_model, nhead).dim_feedforward(64).dropout(0.1).activation("gelu");
    layer.batch_first(true).norm_first(true);
    encoder =
        register_module<nn::TransformerEncoder>("encoder", layer, num_layers, std::make_shared<nn::LayerNorm>(d_model));
    head = register_module("head", nn::Sequential{nn::Linear(d_model, d_model), nn::GELU(), nn::Dropout(0.1),
                                                  nn::Linear(d_model, classes)});
  }
  Tensor forward(const Tensor& ids) override {  // (N, S) int64, 0 = padding
    const Tensor pad = eq(ids, 0.0);
    const Tensor h = encoder->forward(embed->forward(ids), Tensor(), pad);  // (N, S, C)
    const Tensor keep = unsqueeze(ne(ids, 0.0).to(f32), -1);
    return head->forward(sum(h * keep, {1}) / sum(keep, {1}));  // (N, classes)
  }
};
// --- end of the model ---

int main(int argc, char** argv) {
  return port::check(argc, argv, "port_text_classifier", 1e-5,
                     [](const port::Tensors& state, const port::Tensors& inputs) {
                       TextClassifier model;
                       model.load_state_dict(state);  // strict: PyTorch's keys, every one
                       model.eval();
                       return port::Tensors{{"logits", model.forward(inputs.at("ids"))}};
                     });
}
