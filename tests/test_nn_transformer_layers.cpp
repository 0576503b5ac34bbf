// What torch.nn's Transformer layers do beyond PyTorch 1.13, checked against
// what they do within it: is_causal against the (L, S) mask of
// generate_square_subsequent_mask (whose parity with PyTorch the module table
// checks), the key/value cache against forward, stored attention weights
// against need_weights.
#include <memory>
#include <vector>

#include "nn/transformer.h"
#include "tests/helpers.h"

using namespace xg;

namespace {
constexpr int64_t E = 8, H = 2, N = 2, L = 5, S = 4;

std::shared_ptr<nn::TransformerDecoderLayer> decoder_layer(bool batch_first, bool norm_first) {
  Generator gen(5);
  auto layer = std::make_shared<nn::TransformerDecoderLayer>(
      nn::TransformerLayerOptions(E, H).dim_feedforward(12).dropout(0.0).batch_first(batch_first).norm_first(
          norm_first),
      gen);
  layer->to(f64);
  return layer;
}

// (N, len, E) or (len, N, E), float64.
Tensor sequence(int64_t len, bool batch_first, uint64_t seed) {
  return xgt::leaf(batch_first ? Shape{N, len, E} : Shape{len, N, E}, seed, -1.0, 1.0);
}

// The key padding mask (N, len): the last position of row 1 is padding.
Tensor padding(int64_t len) {
  Tensor m = zeros({N, len}, f64);
  m.set({1, len - 1}, 1.0);
  return m;
}
}  // namespace

TEST_CASE("MultiheadAttention: is_causal equals the causal mask tensor, values and gradients") {
  for (bool bf : {false, true}) {
    CAPTURE(bf);
    Generator gen(3);
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(E, H).batch_first(bf), gen);
    mha.to(f64);
    const Tensor x = sequence(L, bf, 1), pad = padding(L), causal = nn::generate_square_subsequent_mask(L, f64);
    std::vector<Tensor> inputs{x, mha.in_proj_weight()};
    auto run = [&](bool flag) {
      return xgt::values_and_grads(
          [&](const std::vector<Tensor>& in) {
            return mha.forward(in[0], in[0], in[0], pad, false, flag ? Tensor() : causal, true, flag).output;
          },
          inputs);
    };
    xgt::check_close(run(true), run(false), 1e-12);
    // the weights: zero above the diagonal, as the mask's
    const Tensor w = mha.forward(x, x, x, Tensor(), true, Tensor(), false, true).weights;  // (N,H,L,L)
    CHECK(w.shape() == Shape{N, H, L, L});
    CHECK(w.at({0, 1, 1, 2}) == 0.0);
    CHECK(w.at({1, 0, 3, 2}) > 0.0);
    CHECK(xgt::contains(XG_THROW_MESSAGE(mha.forward(x, sequence(S, bf, 2), sequence(S, bf, 2), Tensor(), false,
                                                     Tensor(), true, true),
                                         ShapeError),
                        "is_causal needs as many queries as keys, got L=5 and S=4"));
  }
}

TEST_CASE("TransformerDecoderLayer: tgt_is_causal equals tgt_mask = generate_square_subsequent_mask") {
  for (bool bf : {false, true})
    for (bool nf : {false, true}) {
      CAPTURE(bf);
      CAPTURE(nf);
      auto layer = decoder_layer(bf, nf);
      const Tensor tgt = sequence(L, bf, 1), memory = sequence(S, bf, 2);
      const Tensor causal = nn::generate_square_subsequent_mask(L, f64);
      std::vector<Tensor> inputs{tgt, memory, layer->linear1->weight()};
      auto run = [&](bool flag) {
        return xgt::values_and_grads(
            [&](const std::vector<Tensor>& in) {
              return layer->forward(in[0], in[1], flag ? Tensor() : causal, Tensor(), padding(L), padding(S), flag);
            },
            inputs);
      };
      xgt::check_close(run(true), run(false), 1e-12);
    }
}

TEST_CASE("TransformerDecoderLayer: forward_step over the caches equals forward with the causal mask") {
  for (bool bf : {false, true})
    for (bool nf : {false, true}) {
      CAPTURE(bf);
      CAPTURE(nf);
      auto layer = decoder_layer(bf, nf);
      layer->eval();
      NoGradGuard no_grad;
      const Tensor tgt = sequence(L, bf, 1).detach(), memory = sequence(S, bf, 2).detach();
      const Tensor whole = layer->forward(tgt, memory, nn::generate_square_subsequent_mask(L, f64), Tensor(), Tensor(),
                                          padding(S));
      nn::KVCache self_kv;
      self_kv.reserve = 2;  // grows past its first capacity on the way
      const nn::KVCache cross_kv = layer->multihead_attn->project_kv(memory, memory);
      const int64_t t_axis = bf ? 1 : 0;
      for (int64_t t = 0; t < L; ++t) {
        CAPTURE(t);
        const Tensor step = layer->forward_step(slice(tgt, t_axis, t, t + 1), self_kv, cross_kv, padding(S));
        const auto a = step.to_vector(), b = slice(whole, t_axis, t, t + 1).to_vector();
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
      }
      CHECK(self_kv.len == L);
    }
}

TEST_CASE("MultiheadAttention: stored weights are need_weights' (N, H, L, S), from forward and from attend") {
  Generator gen(4);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(E, H), gen);
  mha.to(f64);
  const Tensor q = sequence(L, false, 1), kv = sequence(S, false, 2);
  CHECK(xgt::contains(XG_THROW_MESSAGE(mha.attention_weights(), std::logic_error), "set_store_attention(true)"));
  mha.set_store_attention(true);
  const nn::MultiheadAttentionOutput out = mha.forward(q, kv, kv, padding(S), true, Tensor(), false);
  CHECK(mha.attention_weights(false).to_vector() == out.weights.to_vector());
  CHECK(mha.attention_weights().shape() == Shape{N, L, S});
  const Tensor by_cache = mha.attend(q, mha.project_kv(kv, kv), padding(S));
  CHECK(by_cache.to_vector() == out.output.to_vector());
  CHECK(mha.attention_weights(false).to_vector() == out.weights.to_vector());
}
