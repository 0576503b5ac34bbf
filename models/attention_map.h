// Where the decoder looks: the cross-attention weights of an encoder-decoder
// Transformer for one source and its decoded output, per layer and head, and
// a text form gnuplot draws as a heatmap (scripts/pictures.sh).
//
//   auto maps = xg::models::cross_attention(model, src, out, kBos);  // one (H, T, S) tensor per decoder layer
#pragma once

#include <string>
#include <vector>

#include "models/transformer.h"

namespace xg::models {

// Runs the decoder teacher-forced on BOS + out (no gradient, eval mode) and
// returns, for each decoder layer, its cross-attention weights (H, T, S):
// row t is the output position that predicts out[t] (the last row, EOS).
std::vector<Tensor> cross_attention(models::Transformer& model, const std::vector<int64_t>& src,
                                    const std::vector<int64_t>& out, int64_t bos);

// One head's (T, S) weights as text: a first line "- label_1 ... label_S",
// then one line per output position "label_t w_1 ... w_S" (gnuplot's
// "matrix rowheaders columnheaders"). Labels must hold no spaces.
std::string heatmap_text(const Tensor& weights, int64_t head, const std::vector<std::string>& src_labels,
                         const std::vector<std::string>& out_labels);

// Writes heatmap_text of every layer and head of `maps` (cross_attention's)
// to DIR/layer<L>_head<H>.txt; `out_labels` name the rows (outputs, then
// EOS). Throws std::runtime_error naming a file it cannot write.
void write_heatmaps(const std::vector<Tensor>& maps, const std::vector<std::string>& src_labels,
                    const std::vector<std::string>& out_labels, const std::string& dir);

}  // namespace xg::models
