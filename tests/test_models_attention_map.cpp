// Cross-attention maps of the encoder-decoder Transformer, and their text form.
#include <algorithm>

#include "models/attention_map.h"
#include "models/seq2seq.h"
#include "tests/helpers.h"

using namespace xg;
using namespace xg::models;

TEST_CASE("attention map: one (H,T,S) map per decoder layer, rows are distributions, text for gnuplot") {
  models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 10;
  c.layers = 2;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 16;
  c.seed = 4;
  models::Transformer m(c);
  m.train();
  const auto maps = cross_attention(m, {3, 4, 5}, {6, 7}, kBos);
  CHECK(m.is_training());  // restored
  REQUIRE(maps.size() == 2);
  CHECK(maps[1].shape() == Shape{2, 3, 3});  // heads, BOS + 2 outputs, 3 source tokens
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 3; ++t) {
      double row = 0;
      for (int64_t s = 0; s < 3; ++s) row += maps[0].at({h, t, s});
      CHECK(row == doctest::Approx(1.0).epsilon(1e-6));
    }
  const std::string text = heatmap_text(maps[0], 1, {"a", "b", "c"}, {"x", "y", "EOS"});
  CHECK(text.rfind("- a b c\nx ", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);
  CHECK(XG_THROW_MESSAGE(heatmap_text(maps[0], 2, {"a", "b", "c"}, {"x", "y", "EOS"}), std::invalid_argument) ==
        "heatmap_text: head 2 of weights (2,3,3)");
  CHECK(XG_THROW_MESSAGE(heatmap_text(maps[0], 0, {"a"}, {"x", "y", "EOS"}), std::invalid_argument) ==
        "heatmap_text: 1 source and 3 output labels for weights (T,S) = (3,3)");
}
