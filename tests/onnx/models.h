// The models the ONNX tests export (tests/onnx/export_models.cpp and
// test_onnx_export.cpp): built from library layers as a user's would be.
#pragma once

#include <memory>

#include "autograd/xg.h"
#include "nn/nn.h"

namespace xg::onnx_test {

// (a) An MLP on rows (B, 8) -> (B, 4): Linear, tanh, LayerNorm, a GELU
// feed-forward with dropout (gone in eval mode), a residual, Linear.
class Mlp : public nn::Module {
 public:
  explicit Mlp(Generator& gen) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 16, gen));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(16));
    ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(16, 32, 0.25, gen,
                                                                              std::make_shared<Generator>(7),
                                                                              nn::Activation::gelu));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5, std::make_shared<Generator>(8)));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 4, gen));
  }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    Tensor h = norm->forward(tanh(fc1->forward(x)));  // (B, 16)
    h = drop->forward(ff->forward(h)) + h;
    return fc2->forward(relu(h) - sigmoid(h));  // (B, 4)
  }
  std::string type_name() const override { return "Mlp"; }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::PositionwiseFeedForward> ff;
  std::shared_ptr<nn::Dropout> drop;
};

// (b) Ids (B, T) -> log-probabilities (B, T, V): Embedding, LayerNorm, a
// feed-forward added back through add_layer_norm, token mixing by the mean
// over T, a per-head gate (reshape to (B, T, H, D), permute, softmax over
// D), and the output projection. No attention.
class Block : public nn::Module {
 public:
  static constexpr int64_t V = 11, C = 16, H = 4, D = 4;
  explicit Block(Generator& gen) {
    emb = register_module("emb", std::make_shared<nn::Embedding>(V, C, gen));
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(C));
    ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(C, 24, 0.1, gen,
                                                                              std::make_shared<Generator>(9),
                                                                              nn::Activation::gelu));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(C));
    head = register_module("head", std::make_shared<nn::Linear>(C, V, gen));
  }
  Tensor forward(const Tensor& ids) override {
    const auto named = scope();
    Tensor h = ln1->forward(emb->forward(ids));         // (B, T, C)
    h = ln2->forward(ff->forward(h), h);                // (B, T, C)
    h = h + mean(h, {1}, true) * 0.5;                   // (B, T, C)
    const int64_t b = h.size(0), t = h.size(1);
    Tensor g = permute(reshape(h, {b, t, H, D}), {0, 2, 1, 3});  // (B, H, T, D)
    g = permute(softmax(g, -1), {0, 2, 1, 3});                  // (B, T, H, D)
    h = h * reshape(g, {b, t, C}) * double(D);
    return log_softmax(head->forward(h), -1);  // (B, T, V)
  }
  std::string type_name() const override { return "Block"; }
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::PositionwiseFeedForward> ff;
  std::shared_ptr<nn::Linear> head;
};

// (c) Every other mapped op on (B, T, 6) with fixed-width parameters:
// arithmetic, exp/log/sqrt/abs/pow, matmul, slices from either end, concat,
// sum, where against a constant mask, clone.
class OpsZoo : public nn::Module {
 public:
  explicit OpsZoo(Generator& gen) {
    w = register_parameter("w", randn({6, 6}, gen, f32, 0.0, 0.4));
    scale = register_parameter("scale", rand({6}, gen, f32, 0.5, 1.5));
  }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    Tensor a = matmul(x, w);                                          // (B, T, 6)
    Tensor pos = sqrt(exp(a * 0.3) + 1.0) / scale;                    // > 0
    Tensor b = log(pos) - neg(abs(a)) * pow(pos, 0.5);                // (B, T, 6)
    Tensor first = slice(b, 1, 0, 1), last = slice(b, 1, -1, 1000000);  // (B, 1, 6) each
    Tensor ends = concat({first, last}, 1);                             // (B, 2, 6)
    Tensor inner = slice(b, 2, 1, 5, 2);                                // (B, T, 2)
    Tensor mask = from_vector(std::vector<float>{1, 0, 1, 0, 1, 1}, {6});
    Tensor picked = where(mask, b, a);                                  // (B, T, 6)
    Tensor s = sum(ends, {1}, true) + sum(inner, {2}, true) * 0.25;     // (B, T, 6)
    return concat({picked.clone() + s, sum(picked, {1, 2}, true) / (pos + 2.0)}, 2);  // (B, T, 12)
  }
  std::string type_name() const override { return "OpsZoo"; }
  Tensor w, scale;
};

// (d) The torch.nn activations, comparisons and norms, each applied to
// (B, T, 6) and concatenated along the last axis: every op of
// onnx/emit_activation.cpp, and the activations composed of other ops, with
// options off their defaults where they have any.
class ActivationZoo : public nn::Module {
 public:
  explicit ActivationZoo(Generator& gen) {
    w = register_parameter("w", randn({6, 6}, gen, f32, 0.0, 0.8));
    prelu = register_module("prelu", std::make_shared<nn::PReLU>(1, 0.3));
  }
  Tensor forward(const Tensor& x) override {
    const auto named = scope();
    const Tensor a = matmul(x, w) * 2.0;  // (B, T, 6), values on both sides of every kink
    std::vector<Tensor> parts = {
        leaky_relu(a, 0.2), hardtanh(a, -0.7, 1.2), relu6(a), elu(a, 0.7), selu(a), celu(a, 1.5),
        silu(a), mish(a), hardswish(a), hardsigmoid(a), gelu(a, "tanh"), softplus(a), softplus(a, 2.0, 1.0),
        softsign(a), tanhshrink(a), logsigmoid(a), softshrink(a, 0.4), hardshrink(a, 0.6), threshold(a, 0.1, -3.0),
        log1p(abs(a)), expm1(a * 0.3), softmin(a, -1), glu(concat({a, a * 0.5}, -1), -1), prelu->forward(a),
        gt(a, 0.2) + ge(a, x) * 2.0 + lt(a, -0.3) * 4.0 + le(a, x) * 8.0 + eq(a, a) * 16.0 + ne(a, x) * 32.0,
        vector_norm(a, 2.0, {-1}, true) + vector_norm(a, 3.0, {-1}, true) * a};
    return concat(parts, -1);  // (B, T, 6 * 26)
  }
  std::string type_name() const override { return "ActivationZoo"; }
  Tensor w;
  std::shared_ptr<nn::PReLU> prelu;
};

// Gives every parameter random values (LayerNorm's ones and zeros would
// hide a scale and a bias swapped).
inline void randomise(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  for (auto& [name, p] : m.named_parameters()) p.copy_(randn(p.shape(), g, p.dtype(), 0.0, 0.5));
}

}  // namespace xg::onnx_test
