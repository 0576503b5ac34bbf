// The decoder-only GPT: a float64 gradient check of a tiny complete model,
// causality, the key/value cache against full reruns, generation, training.
#include <cmath>

#include "models/gpt.h"
#include "optim/optim.h"
#include "tests/helpers.h"

using namespace xg;
using models::Batch;
using models::GPT;
using models::GPTConfig;
using xgt::contains;

namespace {
GPTConfig tiny(bool learned = true) {
  GPTConfig c;
  c.vocab = 7;
  c.max_len = 8;
  c.layers = 2;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 16;
  c.learned_positions = learned;
  c.seed = 3;
  return c;
}
Batch ids() { return Batch{{1, 3, 4, 5, 6, 2, 0, 5, 4, 4}, 2, 5}; }
Batch targets() { return Batch{{3, 4, 5, 6, -1, 0, 5, 4, 4, 1}, 2, 5}; }  // -1: ignored
}  // namespace

TEST_CASE("gpt: float64 gradcheck of a tiny complete model (learned and sinusoidal positions)") {
  for (bool learned : {true, false}) {
    CAPTURE(learned);
    GPT m(tiny(learned));
    m.to(f64);
    GradcheckOptions o;
    o.max_samples_per_input = 6;
    auto r = gradcheck([&] { return m.loss(ids(), targets()); }, m.parameters(), o);
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 100);
  }
}

TEST_CASE("gpt: tied output projection, every parameter gets a gradient") {
  GPT m(tiny());
  const int64_t c = 8, v = 7, f = 16, n = 2, t = 8;
  const int64_t block = 2 * 2 * c + 4 * (c * c + c) + (c * f + f) + (f * c + c);
  CHECK(m.num_parameters() == v * c + t * c + n * block + 2 * c);  // no separate output matrix
  CHECK(!m.tok_embed->padding_idx());  // every token, the last one too, learns its row
  double last_row = 0;
  for (int64_t j = 0; j < c; ++j) last_row += std::fabs(m.tok_embed->weight().at({v - 1, j}));
  CHECK(last_row > 0);
  m.loss(ids(), targets()).backward();
  for (auto& [name, p] : m.named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    double norm = 0;
    for (double g : p.grad().to_vector()) norm += g * g;
    // The key bias's gradient is zero in exact arithmetic (softmax ignores it).
    if (name.find("w_k.bias") == std::string::npos) CHECK(norm > 0);
  }
}

TEST_CASE("gpt: position t's logits do not depend on later tokens (causal)") {
  GPT m(tiny());
  m.to(f64);
  Batch a = ids(), b = ids();
  b.ids[3] = 0;  // row 0, position 3
  const Tensor la = m.forward(a), lb = m.forward(b);
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t k = 0; k < 7; ++k) {
      if (t < 3) CHECK(la.at({0, t, k}) == lb.at({0, t, k}));
      CHECK(la.at({1, t, k}) == lb.at({1, t, k}));  // the other row is untouched
    }
  CHECK(la.at({0, 3, 0}) != lb.at({0, 3, 0}));
}

TEST_CASE("gpt: prefill and cached steps give the logits of a full rerun at every position") {
  for (bool learned : {true, false}) {
    CAPTURE(learned);
    GPT m(tiny(learned));
    m.to(f64);
    m.eval();
    NoGradGuard no_grad;
    const std::vector<int64_t> seq{1, 3, 4, 5, 6, 2, 0, 5};  // 2 rows x 4 prompt + 4 steps
    GPT::Cache cache = m.start_cache();
    Tensor logits = m.prefill(cache, Batch{{1, 3, 4, 5, 6, 2, 0, 5}, 2, 4});
    std::vector<int64_t> row0{1, 3, 4, 5}, row1{6, 2, 0, 5};
    for (int k = 0; k < 4; ++k) {
      Batch full{{}, 2, static_cast<int64_t>(row0.size())};
      full.ids = row0;
      full.ids.insert(full.ids.end(), row1.begin(), row1.end());
      const Tensor want = m.forward(full);
      const int64_t last = full.cols - 1;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t j = 0; j < 7; ++j) CHECK(logits.at({r, j}) == doctest::Approx(want.at({r, last, j})).epsilon(1e-12));
      const std::vector<int64_t> next{(k * 2) % 7, (k * 3 + 1) % 7};
      row0.push_back(next[0]);
      row1.push_back(next[1]);
      logits = m.step(cache, next);
    }
    CHECK(cache.pos == 8);
    CHECK(contains(XG_THROW_MESSAGE(m.step(cache, {1, 1}), std::invalid_argument), "exceed max_len 8"));
  }
}

TEST_CASE("gpt: greedy generation equals the argmax of full reruns, sampling is seeded") {
  GPT m(tiny());
  Generator g(1);
  nn::SamplingOptions greedy;
  greedy.temperature = 0;
  const auto out = m.generate({{1, 3}, {4, 4}}, 5, g, greedy);
  REQUIRE(out.size() == 2);
  REQUIRE(out[0].size() == 5);
  NoGradGuard no_grad;
  m.eval();
  std::vector<int64_t> seq{1, 3};
  for (int k = 0; k < 5; ++k) {
    Batch b{seq, 1, static_cast<int64_t>(seq.size())};
    const auto best = argmax(slice(m.forward(b), 1, b.cols - 1, b.cols));
    CHECK(out[0][k] == best[0]);
    seq.push_back(out[0][k]);
  }
  Generator g1(9), g2(9);
  CHECK(m.generate({{1}}, 6, g1) == m.generate({{1}}, 6, g2));
  CHECK(contains(XG_THROW_MESSAGE(m.generate({{1, 2}, {3}}, 2, g), std::invalid_argument), "different lengths"));
  CHECK(contains(XG_THROW_MESSAGE(m.generate({{1, 2}}, 7, g), std::invalid_argument), "exceeds max_len 8"));
}

TEST_CASE("gpt: learns a repeating pattern") {
  GPTConfig c = tiny();
  c.vocab = 5;
  GPT m(c);
  optim::AdamW opt(optim::weight_decay_groups(m.named_parameters(), 0.01), {1e-2});
  Batch x{{}, 4, 7}, y{{}, 4, 7};
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t t = 0; t < 7; ++t) {
      x.ids.push_back((r + t) % 5);
      y.ids.push_back((r + t + 1) % 5);
    }
  double first = 0, last = 0;
  for (int s = 0; s < 150; ++s) {
    opt.zero_grad();
    Tensor loss = m.loss(x, y);
    loss.backward();
    opt.step();
    (s == 0 ? first : last) = loss.item();
  }
  CHECK(first > 1.2);
  CHECK(last < 0.05);
}

TEST_CASE("gpt: bad configurations and batches are clear errors") {
  GPTConfig c = tiny();
  c.d_model = 9;
  CHECK(contains(XG_THROW_MESSAGE(GPT{c}, std::invalid_argument), "d_model 9 must be a positive multiple of heads 2"));
  GPT m(tiny());
  CHECK(contains(XG_THROW_MESSAGE(m.forward(Batch{std::vector<int64_t>(9, 1), 1, 9}), std::invalid_argument),
                 "positions 0..8 exceed max_len 8"));
  CHECK(contains(XG_THROW_MESSAGE(m.forward(Batch{{1, 9}, 1, 2}), ShapeError), "id 9"));
  CHECK(contains(XG_THROW_MESSAGE(m.loss(ids(), Batch{{1}, 1, 1}), std::invalid_argument), "differ in shape"));
  NoGradGuard no_grad;
  GPT::Cache cache = m.start_cache();
  CHECK(contains(XG_THROW_MESSAGE(m.step(cache, {1}), std::invalid_argument), "the cache is empty (prefill a prompt first)"));
  CHECK(contains(XG_THROW_MESSAGE(m.prefill(cache, Batch{{}, 1, 0}), std::invalid_argument), "an empty prompt"));
  m.prefill(cache, Batch{{1, 2}, 1, 2});
  CHECK(contains(XG_THROW_MESSAGE(m.prefill(cache, Batch{{1}, 1, 1}), std::invalid_argument),
                 "the cache already holds 2 positions"));
  CHECK(contains(XG_THROW_MESSAGE(m.step(cache, {1, 2}), std::invalid_argument), "2 tokens for a cache of 1 rows"));
  Tensor x = zeros({1, 2, 8});
  CHECK(contains(XG_THROW_MESSAGE(m.blocks->at<models::GPTBlock>(0)->forward_step(x, cache.kv[0]), std::invalid_argument),
                 "2 positions after a non-empty cache"));
  Generator g(1);
  CHECK(contains(XG_THROW_MESSAGE(m.generate({{1}}, -1, g), std::invalid_argument), "new_tokens -1 < 0"));
}

TEST_CASE("gpt: ids and targets as int64 tensors give the batch form's loss, floats are refused") {
  GPT m(tiny());
  const Batch x = ids(), y = targets();
  Tensor tx = from_ints(x.ids, {x.rows, x.cols}), ty = from_ints(y.ids, {y.rows, y.cols});
  CHECK(bit_equal(m.loss(tx, ty), m.loss(x, y)));
  CHECK(bit_equal(m.forward(tx), m.forward(x)));
  CHECK(XG_THROW_MESSAGE(m.forward(tx.to(f32)), std::invalid_argument) ==
        "GPT: ids must be a 2-D int64 tensor (B,T), got float32 (2,5)");
  CHECK(XG_THROW_MESSAGE(m.loss(tx, ty.reshape({10})), std::invalid_argument) ==
        "GPT::loss: targets must be a 2-D int64 tensor (B,T), got int64 (10,)");
}

TEST_CASE("gpt: backward()'s gradients, added into waiting ones inside products and layer norms, equal xg::grad's bit for bit") {
  // backward() lets linear and layer_norm add their input gradient into the
  // one already waiting (a beta-1 product, a row added after rounding);
  // xg::grad's walk adds every gradient itself. On a model this small every
  // product's reduction is one block of the matrix library, which adds the
  // waiting sum after it, so the two must agree exactly, in both dtypes: q,
  // k and v's projections of one normalised input, residual streams, tied
  // embeddings. (Over longer reductions a library may add it between
  // blocks: docs/autograd.md.)
  for (const Dtype dt : {f32, f64}) {
    CAPTURE(dtype_name(dt));
    GPTConfig c = tiny();
    c.d_model = 16, c.d_ff = 32, c.max_len = 16;
    GPT m(c);
    m.to(dt);
    Batch xs{std::vector<int64_t>(24), 2, 12}, ys = xs;
    for (int64_t i = 0; i < 24; ++i) xs.ids[i] = (i * 5 + 1) % c.vocab, ys.ids[i] = (i * 3 + 2) % c.vocab;
    const std::vector<Tensor> params = m.parameters();
    const std::vector<Tensor> want = grad({m.loss(xs, ys)}, params);
    m.zero_grad();
    m.loss(xs, ys).backward();
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      REQUIRE(params[i].grad().defined());
      CHECK(params[i].grad().to_vector() == want[i].to_vector());
    }
  }
}
