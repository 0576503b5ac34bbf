#include "models/attention_map.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "autograd/autograd.h"

namespace xg::models {

std::vector<Tensor> cross_attention(Transformer& model, const std::vector<int64_t>& src,
                                    const std::vector<int64_t>& out, int64_t bos) {
  if (src.empty()) throw std::invalid_argument("cross_attention: an empty source");
  NoGradGuard no_grad;
  nn::EvalGuard eval(model);
  std::vector<int64_t> tgt_in{bos};
  tgt_in.insert(tgt_in.end(), out.begin(), out.end());
  const size_t layers = model.decoder->layers->size();
  for (size_t i = 0; i < layers; ++i) model.decoder_layer(i).multihead_attn->set_store_attention(true);
  model.forward(Batch{src, 1, static_cast<int64_t>(src.size())},
                Batch{tgt_in, 1, static_cast<int64_t>(tgt_in.size())});
  std::vector<Tensor> maps;
  for (size_t i = 0; i < layers; ++i) {
    auto& attn = *model.decoder_layer(i).multihead_attn;
    Tensor w = attn.attention_weights(false);  // (1, H, T, S)
    maps.push_back(w.reshape({w.size(1), w.size(2), w.size(3)}));
    attn.set_store_attention(false);
  }
  return maps;
}

std::string heatmap_text(const Tensor& weights, int64_t head, const std::vector<std::string>& src_labels,
                         const std::vector<std::string>& out_labels) {
  if (weights.dim() != 3 || head < 0 || head >= weights.size(0))
    throw std::invalid_argument(fmt::format("heatmap_text: head {} of weights {}", head, shape_str(weights.shape())));
  const int64_t t = weights.size(1), s = weights.size(2);
  if (static_cast<int64_t>(src_labels.size()) != s || static_cast<int64_t>(out_labels.size()) != t)
    throw std::invalid_argument(fmt::format("heatmap_text: {} source and {} output labels for weights (T,S) = ({},{})",
                                            src_labels.size(), out_labels.size(), t, s));
  std::string text = "-";
  for (const auto& l : src_labels) text += " " + l;
  text += "\n";
  for (int64_t i = 0; i < t; ++i) {
    text += out_labels[static_cast<size_t>(i)];
    for (int64_t j = 0; j < s; ++j) text += fmt::format(" {:.4f}", weights.at({head, i, j}));
    text += "\n";
  }
  return text;
}

void write_heatmaps(const std::vector<Tensor>& maps, const std::vector<std::string>& src_labels,
                    const std::vector<std::string>& out_labels, const std::string& dir) {
  for (size_t layer = 0; layer < maps.size(); ++layer)
    for (int64_t h = 0; h < maps[layer].size(0); ++h) {
      const std::string path = fmt::format("{}/layer{}_head{}.txt", dir, layer, h);
      std::ofstream f(path);
      f << heatmap_text(maps[layer], h, src_labels, out_labels);
      if (!f) throw std::runtime_error("cannot write " + path);
    }
}

}  // namespace xg::models
