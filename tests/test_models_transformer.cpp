// The Transformer: a float64 gradient check of a tiny complete model, masks,
// decoding, and every parameter receiving a gradient.
#include <cmath>
#include <map>
#include <string>
#include <vector>
#include "models/transformer.h"
#include "tests/helpers.h"
#include "tests/transformer_layout.h"

using namespace xg;
using models::Batch;
using models::Transformer;
using models::TransformerConfig;

namespace {
TransformerConfig tiny(bool pre_norm = false, bool tie = true) {
  TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 7;
  c.layers = 2;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 12;
  c.dropout = 0.0;
  c.max_len = 16;
  c.pre_norm = pre_norm;
  c.tie_weights = tie;
  c.seed = 3;
  return c;
}
// Two rows; the second padded (pad = 0).
Batch src_batch() { return Batch{{3, 4, 5, 6, 5, 4, 0, 0}, 2, 4}; }
Batch tgt_in() { return Batch{{1, 3, 4, 5, 1, 5, 4, 0}, 2, 4}; }
Batch tgt_out() { return Batch{{3, 4, 5, 2, 5, 4, 2, 0}, 2, 4}; }
}  // namespace

TEST_CASE("transformer: float64 gradcheck of a tiny complete model (post-norm and pre-norm, tied and not)") {
  for (bool pre : {false, true})
    for (bool tie : {true, false}) {
      CAPTURE(pre);
      CAPTURE(tie);
      Transformer m(tiny(pre, tie));
      m.to(f64);
      m.eval();
      GradcheckOptions o;
      o.max_samples_per_input = 6;  // every parameter tensor, a sample of its elements
      auto r = gradcheck([&] { return m.loss(src_batch(), tgt_in(), tgt_out(), 0.1); }, m.parameters(), o);
      INFO(r.message);
      CHECK(r.ok);
      CHECK(r.checked > 100);
    }
}

TEST_CASE("transformer: one backward gives every parameter a non-zero gradient") {
  TransformerConfig c = tiny();
  c.dropout = 0.1;
  Transformer m(c);
  m.to(f64);  // so that "zero by construction" is zero up to float64 rounding
  m.loss(src_batch(), tgt_in(), tgt_out(), 0.1).backward();
  for (auto& [name, p] : m.named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    // A key bias adds the same amount to a whole softmax row: its gradient is
    // zero by construction (as in PyTorch): rows [C, 2C) of in_proj_bias.
    // Every other parameter must learn.
    const std::vector<double> g = p.grad().to_vector();
    const bool in_proj_bias = name.size() > 12 && name.compare(name.size() - 12, 12, "in_proj_bias") == 0;
    const size_t c = g.size() / 3;
    double norm = 0, key_norm = 0;
    for (size_t i = 0; i < g.size(); ++i) (in_proj_bias && i >= c && i < 2 * c ? key_norm : norm) += g[i] * g[i];
    CHECK(std::sqrt(key_norm) < 1e-12);
    CHECK(norm > 1e-20);
  }
}

TEST_CASE("transformer: tied weights share one tensor, names are dotted paths") {
  Transformer tied(tiny(false, true)), untied(tiny(false, false));
  CHECK(tied.num_parameters() < untied.num_parameters());
  bool found = false;
  for (auto& [name, p] : tied.named_parameters()) found = found || name == "decoder.layers.1.multihead_attn.in_proj_weight";
  CHECK(found);
}

TEST_CASE("transformer: the decoder cannot see future target positions") {
  Transformer m(tiny());
  m.eval();
  NoGradGuard ng;
  Batch src = src_batch();
  Batch a = tgt_in(), b = tgt_in();
  b.ids[2] = 6;  // change position 2 of row 0
  auto la = m.forward(src, a).to_vector(), lb = m.forward(src, b).to_vector();
  const int64_t v = 7, t = 4;
  for (int64_t pos = 0; pos < t; ++pos) {
    bool same = true;
    for (int64_t k = 0; k < v; ++k) same = same && la[pos * v + k] == lb[pos * v + k];
    CAPTURE(pos);
    if (pos < 2) CHECK(same);
    else CHECK_FALSE(same);
  }
}

TEST_CASE("transformer: padding in the source changes nothing for the other positions") {
  Transformer m(tiny());
  m.eval();
  NoGradGuard ng;
  Batch s1{{3, 4, 5, 0}, 1, 4}, s2{{3, 4, 5, 0, 0, 0}, 1, 6};
  Batch t{{1, 3, 4}, 1, 3};
  auto a = m.forward(s1, t).to_vector(), b = m.forward(s2, t).to_vector();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
}

TEST_CASE("transformer: incremental decoding with cached keys/values equals re-running the decoder") {
  for (bool pre : {false, true}) {
    CAPTURE(pre);
    Transformer m(tiny(pre));
    m.to(f64);
    m.eval();
    NoGradGuard ng;
    Batch src = src_batch();
    models::DecodeState st = m.start_decode(src);
    Tensor memory = m.encode(src), src_pad = m.padding_mask(src);
    const std::vector<std::vector<int64_t>> feed = {{1, 1}, {3, 5}, {4, 6}, {6, 3}};
    Batch prefix{{}, 2, 0};
    for (size_t t = 0; t < feed.size(); ++t) {
      Tensor step = m.decode_step(st, feed[t]);  // (2,V)
      Batch grown{{}, 2, prefix.cols + 1};
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t c = 0; c < prefix.cols; ++c) grown.ids.push_back(prefix.at(r, c));
        grown.ids.push_back(feed[t][r]);
      }
      prefix = grown;
      Tensor full = m.decode(prefix, memory, src_pad);  // (2,t+1,V)
      Tensor last = reshape(slice(full, 1, prefix.cols - 1, prefix.cols), {2, -1});
      auto a = step.to_vector(), b = last.to_vector();
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-10));
    }
  }
}

TEST_CASE("transformer: beam search with beam 1 equals greedy decoding") {
  Transformer m(tiny());
  for (const auto& src : std::vector<std::vector<int64_t>>{{3, 4, 5}, {6, 6, 3, 4}, {5}}) {
    Batch b{src, 1, static_cast<int64_t>(src.size())};
    auto greedy = models::greedy_decode(m, b, 1, 2, 8);
    auto beam = models::beam_search(m, src, 1, 2, 8, 1);
    CHECK(greedy[0] == beam);
    auto wide = models::beam_search(m, src, 1, 2, 8, 4);
    CHECK(wide.size() <= 8);
  }
  CHECK(m.is_training());  // decoding restores the mode it found
}

namespace {
// A token sequence of the brute force below, with its log-probability.
struct Scored {
  std::vector<int64_t> tokens;  // without EOS
  bool finished = false;        // ended by EOS (counted in the length)
  int64_t length = 0;
  double logp = 0;
};
// Every sequence of at most max_len tokens that beam search may return
// (EOS only last; unfinished only at max_len), its log-probability summed
// by decoding it alone, one row fed token after token: no beams, no row
// selection. The scores under a length penalty are a function of these.
std::vector<Scored> every_sequence(Transformer& m, const Batch& sb, int64_t max_len, int64_t bos, int64_t eos,
                                   int64_t V) {
  NoGradGuard ng;
  std::vector<Scored> all;
  for (int64_t len = 1; len <= max_len; ++len) {
    int64_t total = 1;
    for (int64_t i = 0; i < len; ++i) total *= V;
    for (int64_t code = 0; code < total; ++code) {  // counting in base V
      std::vector<int64_t> seq;
      for (int64_t i = 0, c = code; i < len; ++i, c /= V) seq.push_back(c % V);
      bool ok = true;
      for (int64_t i = 0; i + 1 < len; ++i) ok = ok && seq[i] != eos;
      const bool done = seq.back() == eos;
      if (!ok || (!done && len < max_len)) continue;
      models::DecodeState st = m.start_decode(sb);
      double logp = 0;
      for (int64_t i = 0; i < len; ++i) {
        std::vector<double> lp = log_softmax(m.decode_step(st, {i == 0 ? bos : seq[i - 1]}), -1).to_vector();
        logp += lp[seq[i]];
      }
      all.push_back({std::vector<int64_t>(seq.begin(), done ? seq.end() - 1 : seq.end()), done, len, logp});
    }
  }
  return all;
}
}  // namespace

TEST_CASE("transformer: a beam wide enough to keep every hypothesis finds the brute-force best") {
  // Every sequence of at most max_len tokens is scored (every_sequence; the
  // cache itself is checked against full decoder runs above):
  // log-probability / ((5 + |Y|) / 6)^alpha, |Y| counting EOS for finished
  // ones. A beam of 3000 never prunes (at most 7^4 + 400 candidates), so beam
  // search must return the same argmax, and every final hypothesis its
  // brute-force score: a wrong length penalty, a wrong log-probability or a
  // KV cache row mixed up across beams changes it.
  Transformer m(tiny());
  m.to(f64);
  m.eval();
  const int64_t bos = 1, eos = 2, V = 7;
  for (int64_t max_len : {3, 4})
    for (const auto& src : std::vector<std::vector<int64_t>>{{3, 4, 5}, {6, 3}, {5, 5, 5, 4}, {4}, {6, 6, 3}}) {
      CAPTURE(max_len);
      const std::vector<Scored> all = every_sequence(m, Batch{src, 1, static_cast<int64_t>(src.size())}, max_len, bos,
                                                     eos, V);
      for (double alpha : {0.0, 0.6, 2.0}) {
        CAPTURE(alpha);
        std::vector<int64_t> best;
        double best_score = -1e300;
        std::map<std::pair<std::vector<int64_t>, bool>, double> scores;  // (tokens, finished) -> score
        for (const Scored& c : all) {
          const double score = c.logp / std::pow((5.0 + c.length) / 6.0, alpha);
          scores[{c.tokens, c.finished}] = score;
          if (score > best_score) {
            best_score = score;
            best = c.tokens;
          }
        }
        CHECK(models::beam_search(m, src, bos, eos, max_len, 3000, alpha) == best);
        // Every final hypothesis, not only the best, has the brute-force score.
        const auto nbest = models::beam_search_nbest(m, src, bos, eos, max_len, 3000, alpha);
        CHECK(nbest.size() == scores.size());
        for (const auto& h : nbest) {
          auto it = scores.find({h.tokens, h.finished});
          REQUIRE(it != scores.end());
          CHECK(h.score == doctest::Approx(it->second).epsilon(1e-9));
        }
      }
    }
}

TEST_CASE("transformer: beams of 2, 3 and 4 prune exactly as a brute force that scores each hypothesis alone") {
  // The reference keeps, step after step, the k best of (finished beams + every
  // extension of the live ones), each scored by decoding its tokens alone in a
  // fresh state: no beam rows, no cache shared between hypotheses. Beam search
  // must end with the same hypotheses, in the same order, with the same scores;
  // a wrong selection, a row mixed up across beams or a finished beam dropped
  // or extended changes that.
  Transformer m(tiny());
  m.to(f64);
  m.eval();
  NoGradGuard ng;
  const int64_t bos = 1, eos = 2, V = 7, max_len = 4;
  for (const auto& src : std::vector<std::vector<int64_t>>{{3, 4, 5}, {6, 3}, {5, 5, 5, 4}})
    for (double alpha : {0.0, 0.6})
      for (int64_t k : {2, 3, 4}) {
        CAPTURE(k);
        CAPTURE(alpha);
        const Batch sb{src, 1, static_cast<int64_t>(src.size())};
        struct Ref {
          std::vector<int64_t> toks;
          bool done = false;
          double logp = 0;
        };
        auto alone = [&](const Ref& h) {  // log-probability of h decoded by itself
          models::DecodeState st = m.start_decode(sb);
          double lp = 0;
          std::vector<int64_t> seq = h.toks;
          if (h.done) seq.push_back(eos);
          for (size_t i = 0; i < seq.size(); ++i)
            lp += log_softmax(m.decode_step(st, {i == 0 ? bos : seq[i - 1]}), -1).to_vector()[seq[i]];
          return lp;
        };
        auto score = [&](const Ref& h) {
          return h.logp / std::pow((5.0 + static_cast<double>(h.toks.size() + (h.done ? 1 : 0))) / 6.0, alpha);
        };
        std::vector<Ref> beams{Ref{}};
        for (int64_t step = 0; step < max_len; ++step) {
          std::vector<Ref> cand;
          bool any_live = false;
          for (const Ref& h : beams) {
            if (h.done) {
              cand.push_back(h);
              continue;
            }
            any_live = true;
            for (int64_t t = 0; t < V; ++t) {
              Ref e = h;
              if (t == eos) e.done = true;
              else e.toks.push_back(t);
              e.logp = alone(e);
              cand.push_back(e);
            }
          }
          if (!any_live) break;
          std::stable_sort(cand.begin(), cand.end(), [&](const Ref& a, const Ref& b) { return score(a) > score(b); });
          cand.resize(std::min<size_t>(cand.size(), static_cast<size_t>(k)));
          beams = cand;
        }
        const auto got = models::beam_search_nbest(m, src, bos, eos, max_len, k, alpha);
        REQUIRE(got.size() == beams.size());
        for (size_t i = 0; i < got.size(); ++i) {
          CAPTURE(i);
          CHECK(got[i].tokens == beams[i].toks);
          CHECK(got[i].finished == beams[i].done);
          CHECK(got[i].score == doctest::Approx(score(beams[i])).epsilon(1e-9));
        }
        CHECK(models::beam_search(m, src, bos, eos, max_len, k, alpha) == beams[0].toks);
      }
}

TEST_CASE("transformer: configuration and input errors are clear") {
  TransformerConfig c = tiny();
  c.heads = 3;
  CHECK(xgt::contains(XG_THROW_MESSAGE(Transformer{c}, std::invalid_argument), "heads"));
  c = tiny();
  c.tgt_vocab = 9;
  CHECK(xgt::contains(XG_THROW_MESSAGE(Transformer{c}, std::invalid_argument), "tie_weights"));
  Transformer m(tiny());
  Batch bad{{3, 9, 5, 6}, 1, 4};  // id 9 >= vocab 7
  std::string msg = XG_THROW_MESSAGE(m.forward(bad, Batch{{1}, 1, 1}), std::invalid_argument);
  CHECK(xgt::contains(msg, "9"));
  models::DecodeState st = m.start_decode(src_batch());
  CHECK(xgt::contains(XG_THROW_MESSAGE(m.decode_step(st, {1}), std::invalid_argument), "1 tokens for a state of 2 rows"));
  nn::MultiheadAttention& cross = *m.decoder_layer(0).multihead_attn;
  nn::KVCache other = cross.project_kv(ones({3, 4, 8}), ones({3, 4, 8}));
  CHECK(xgt::contains(XG_THROW_MESSAGE(cross.attend(ones({2, 1, 8}), other), ShapeError), "(2,1,8)"));
  CHECK(xgt::contains(XG_THROW_MESSAGE(cross.project_kv(ones({2, 4, 5}), ones({2, 4, 5})), ShapeError), "(2,4,5)"));
  Batch toolong{std::vector<int64_t>(20, 3), 1, 20};
  CHECK(xgt::contains(XG_THROW_MESSAGE(m.forward(toolong, Batch{{1}, 1, 1}), std::invalid_argument), "max_len"));
}

TEST_CASE("transformer: parameter_count() equals the built model's count, tied or not, pre- or post-norm") {
  for (bool tie : {true, false})
    for (bool pre : {false, true}) {
      models::TransformerConfig c;
      c.src_vocab = 11;
      c.tgt_vocab = tie ? 11 : 13;
      c.layers = 2;
      c.d_model = 12;
      c.heads = 3;
      c.d_ff = 20;
      c.tie_weights = tie;
      c.pre_norm = pre;
      CAPTURE(tie);
      CAPTURE(pre);
      CHECK(c.parameter_count() == static_cast<double>(models::Transformer(c).num_parameters()));
    }
}

TEST_CASE("transformer: a state dict of the earlier layout (w_q, ff.linear1, cross_attn, enc_norm) loads unchanged") {
  for (bool pre : {false, true})
    for (bool tie : {true, false}) {
      CAPTURE(pre);
      CAPTURE(tie);
      TransformerConfig c = tiny(pre, tie);
      Transformer a(c);
      c.seed = 11;
      Transformer b(c);  // other weights
      const auto old = xgt::earlier_layout(a.state_dict(), c.d_model);
      CHECK(old.count("decoder.1.cross_attn.w_v.bias"));
      CHECK(old.count("encoder.0.ff.linear2.weight"));
      CHECK(old.count("enc_norm.weight") == (pre ? 1u : 0u));
      CHECK(b.upgrade(old).size() == a.state_dict().size());
      const nn::LoadResult r = b.load_state_dict(old);  // strict
      CHECK(r.missing_keys.empty());
      a.eval(), b.eval();
      NoGradGuard ng;
      CHECK(b.forward(src_batch(), tgt_in()).to_vector() == a.forward(src_batch(), tgt_in()).to_vector());
      // today's layout comes back unchanged
      CHECK(b.upgrade(a.state_dict()).size() == a.state_dict().size());
      // a piece missing is named, not loaded half
      auto broken = old;
      broken.erase("encoder.1.self_attn.w_k.weight");
      const std::string msg = XG_THROW_MESSAGE(b.load_state_dict(broken), std::invalid_argument);
      CHECK(xgt::contains(msg, "missing key 'encoder.layers.1.self_attn.in_proj_weight'"));
      CHECK(xgt::contains(msg, "unexpected key 'encoder.1.self_attn.w_q.weight'"));
    }
}
