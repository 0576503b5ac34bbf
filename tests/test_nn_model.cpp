// A small composed model, built only from the public nn/ API, as a user would:
// Embedding -> PositionalEncoding -> MultiHeadAttention (causal, padded) ->
// LayerNorm -> PositionwiseFeedForward -> Linear to V logits.
#include <doctest/doctest.h>

#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

namespace {

struct TinyLM : nn::Module {
  static constexpr int64_t V = 7, C = 8, H = 2, F = 16;
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::PositionalEncoding> pos;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::PositionwiseFeedForward> ff;
  std::shared_ptr<nn::Linear> out;

  TinyLM(uint64_t seed, double dropout = 0.0) {
    Generator init(seed);
    auto drop = dropout > 0 ? std::make_shared<Generator>(seed + 1) : nullptr;
    embed = register_module("embed", std::make_shared<nn::Embedding>(V, C, init, /*padding_idx=*/0));
    pos = register_module("pos", std::make_shared<nn::PositionalEncoding>(C, 16, dropout, drop));
    attn = register_module("attn", std::make_shared<nn::MultiHeadAttention>(C, H, dropout, init, drop));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(C));
    ff = register_module("ff", std::make_shared<nn::PositionwiseFeedForward>(C, F, dropout, init, drop,
                                                                            nn::Activation::gelu));
    out = register_module("out", std::make_shared<nn::Linear>(C, V, init));
  }

  // ids (B,T) with 0 = padding -> logits (B,T,V).
  Tensor forward_ids(const std::vector<int64_t>& ids, int64_t B, int64_t T) {
    std::vector<double> pad(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) pad[i] = ids[i] == 0 ? 1.0 : 0.0;
    Tensor x = pos->forward(embed->forward(ids, {B, T}));                        // (B,T,C)
    Tensor mask = from_vector(pad, {B, T}, x.dtype());                           // (B,T)
    Tensor h = norm->forward(x + attn->forward(x, x, x, mask, /*causal=*/true));  // (B,T,C)
    h = h + ff->forward(h);                                                       // (B,T,C)
    return out->forward(h);                                                       // (B,T,V)
  }
  std::string type_name() const override { return "TinyLM"; }
};

const std::vector<int64_t> kIds = {3, 1, 4, 1, 5, 0,   // batch 0, last position padded
                                   2, 6, 5, 3, 0, 0};  // batch 1, two padded

}  // namespace

TEST_CASE("nn composed model: dotted names and parameter count") {
  TinyLM m(1);
  auto named = m.named_parameters();
  REQUIRE(named.size() == 1 + 8 + 2 + 4 + 2);
  CHECK(named[0].first == "embed.weight");
  CHECK(named[1].first == "attn.w_q.weight");
  CHECK(named[8].first == "attn.w_o.bias");
  CHECK(named[11].first == "ff.linear1.weight");
  CHECK(named.back().first == "out.bias");
  CHECK(m.num_parameters() == 7 * 8 + 4 * (64 + 8) + 16 + (8 * 16 + 16 + 16 * 8 + 8) + (8 * 7 + 7));
}

TEST_CASE("nn composed model: gradcheck of the whole model in float64") {
  TinyLM m(2);
  m.to(f64);
  // Padded positions are zeroed, as a loss would ignore them: the padding
  // row's value then reaches nothing, matching its suppressed gradient.
  std::vector<double> keep(kIds.size());
  for (size_t i = 0; i < kIds.size(); ++i) keep[i] = kIds[i] == 0 ? 0.0 : 1.0;
  Tensor keep_mask = from_vector(keep, {2, 6, 1}, f64);  // (B,T,1)
  xgnt::check_grad([&] { return m.forward_ids(kIds, 2, 6) * keep_mask; }, m.parameters());
}

TEST_CASE("nn composed model: after one backward every parameter has a gradient") {
  TinyLM m(3);
  Tensor logits = m.forward_ids(kIds, 2, 6);
  CHECK(logits.shape() == Shape{2, 6, TinyLM::V});
  xgnt::check_all_params_get_grad(m, logits, 7, {"attn.w_k.bias"});
}

TEST_CASE("nn composed model: two runs with one seed give one model, save/load is bit-identical") {
  TinyLM a(4), b(4), c(5);
  for (auto& [k, t] : a.state_dict()) {
    INFO(k);
    CHECK(bit_equal(t, b.state_dict().at(k)));
  }
  const std::string path = std::string(XG_TEST_TMPDIR) + "/nn_tiny_lm.safetensors";
  a.save(path);
  c.load(path);
  for (auto& [k, t] : a.state_dict()) {
    INFO(k);
    CHECK(bit_equal(t, c.state_dict().at(k)));
  }
  CHECK(a.state_dict().count("pos.pe") == 0);
  CHECK(bit_equal(a.forward_ids(kIds, 2, 6), c.forward_ids(kIds, 2, 6)));
}

TEST_CASE("nn composed model: a few SGD steps lower the loss, train/eval reaches every layer") {
  TinyLM m(6, /*dropout=*/0.1);
  m.eval();
  CHECK_FALSE(m.ff->dropout->is_training());
  CHECK_FALSE(m.pos->dropout->is_training());
  CHECK_FALSE(m.attn->is_training());
  m.train();
  // Next-token targets: position t predicts ids[t+1]; padded targets ignored.
  std::vector<int64_t> targets = {1, 4, 1, 5, -100, -100, 6, 5, 3, -100, -100, -100};
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    m.zero_grad();
    Tensor loss = cross_entropy(reshape(m.forward_ids(kIds, 2, 6), {12, -1}), targets);  // (B*T,V)
    loss.backward();
    if (step == 0) first = loss.item();
    last = loss.item();
    NoGradGuard ng;
    for (auto& p : m.parameters()) p.copy_(p.detach() - 0.1 * p.grad());
  }
  CAPTURE(first);
  CAPTURE(last);
  CHECK(last < 0.7 * first);
}
