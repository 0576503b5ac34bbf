// Writes the cross-attention weights of a trained encoder-decoder, one text
// file per decoder layer and head (DIR/layer<L>_head<H>.txt, gnuplot's
// "matrix rowheaders columnheaders"), for one input decoded by the model.
//
//   attention_map --checkpoint copy.safetensors --input "3 4 5 6 7 8" --out DIR    (train_tasks)
//   attention_map --g2p g2p.safetensors --input hello --out DIR                     (g2p train)
//
// scripts/pictures.sh draws them. Exit codes: 0 done, 1 a runtime error, 2 usage.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "train/attention_map.h"
#include "train/decode.h"
#include "train/g2p.h"

int main(int argc, char** argv) {
  CLI::App app("Writes the cross-attention weights of a trained encoder-decoder for one input");
  std::string checkpoint, g2p_checkpoint, input, out_dir;
  app.add_option("--checkpoint", checkpoint, "a checkpoint of train_tasks")->type_name("PATH");
  app.add_option("--g2p", g2p_checkpoint, "a checkpoint of g2p train")->type_name("PATH");
  app.add_option("--input", input, "token ids (\"3 4 5\") for --checkpoint, a word for --g2p")->required();
  app.add_option("--out", out_dir, "directory for the files (must exist)")->required()->type_name("DIR");
  try {
    app.parse(argc, argv);
    if (checkpoint.empty() == g2p_checkpoint.empty()) throw CLI::ValidationError("give one of --checkpoint and --g2p");
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "attention_map: %s (try --help)\n", e.what());
    return 2;
  }
  try {
    std::vector<xg::Tensor> maps;
    std::vector<std::string> src_labels, out_labels;
    if (!checkpoint.empty()) {
      xg::train::Decoder decoder(checkpoint);
      const auto src = decoder.parse(input);
      const auto out = decoder.decode(src);
      maps = xg::train::cross_attention(decoder.model(), src, out, xg::train::kBos);
      for (int64_t id : src) src_labels.push_back(std::to_string(id));
      for (int64_t id : out) out_labels.push_back(std::to_string(id));
    } else {
      xg::train::Pronouncer p(g2p_checkpoint);
      const auto src = p.encode(input);
      const auto phones = p.pronounce(input, 1);
      std::vector<int64_t> out;
      for (const auto& ph : phones)
        out.push_back(xg::train::kFirstSymbol +
                      (std::find(p.phones().begin(), p.phones().end(), ph) - p.phones().begin()));
      maps = xg::train::cross_attention(p.model(), src, out, xg::train::kBos);
      for (char c : input) src_labels.push_back(std::string(1, c));
      out_labels = phones;
    }
    out_labels.push_back("EOS");
    for (size_t layer = 0; layer < maps.size(); ++layer)
      for (int64_t h = 0; h < maps[layer].size(0); ++h) {
        const std::string path = fmt::format("{}/layer{}_head{}.txt", out_dir, layer, h);
        std::ofstream f(path);
        f << xg::train::heatmap_text(maps[layer], h, src_labels, out_labels);
        if (!f) throw std::runtime_error("cannot write " + path);
      }
    std::printf("%zu layers x %lld heads written to %s\n", maps.size(), static_cast<long long>(maps[0].size(0)),
                out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_map: %s\n", e.what());
    return 1;
  }
}
