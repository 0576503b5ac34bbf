// Writes the cross-attention weights of a model trained by train_tasks, one
// text file per decoder layer and head (DIR/layer<L>_head<H>.txt, gnuplot's
// "matrix rowheaders columnheaders"), for one input decoded by the model.
//
//   attention_map --checkpoint copy.safetensors --input "3 4 5 6 7 8" --out DIR
//
// (A G2P checkpoint's maps: g2p attention, in apps/g2p.) scripts/pictures.sh
// draws them. Exit codes: 0 done, 1 a runtime error, 2 usage.
#include <cstdio>

#include "apps/seq2seq/seq2seq.h"
#include "models/attention_map.h"  // write_heatmaps
#include "train/checkpoint.h"
#include "apps/common/cli.h"

int main(int argc, char** argv) {
  std::string checkpoint, g2p_checkpoint, input, out_dir;
  auto setup = [&](CLI::App& app) {
    app.description("Writes the cross-attention weights of a model trained by train_tasks for one input");
    xg::cli::add_path(app, "--checkpoint", checkpoint, "a checkpoint of train_tasks")->required();
    app.add_option("--g2p", g2p_checkpoint, "(moved: g2p attention --checkpoint PATH --input WORD --out DIR)")
        ->type_name("PATH");
    app.add_option("--input", input, "token ids (\"3 4 5\")")->required();
    xg::cli::add_path(app, "--out", out_dir, "directory for the files (must exist)", "DIR")->required();
  };
  auto check = [&] {
    if (!g2p_checkpoint.empty())
      throw std::invalid_argument("--g2p: a G2P checkpoint's maps are written by g2p attention --checkpoint " +
                                  g2p_checkpoint + " --input WORD --out DIR");
  };
  const xg::cli::Parsed parsed = xg::cli::parse_with("attention_map", argc, argv, setup, check);
  return xg::cli::run_program("attention_map", argc, argv, parsed, 1, [&] {
    xg::train::check_outputs({{"--out", out_dir, /*folder=*/true}});
    xg::seq2seq::Decoder decoder(checkpoint);
    const auto src = decoder.parse(input);
    const auto out = decoder.decode(src);
    const auto maps = decoder.model().attention_maps(src, out);
    std::vector<std::string> src_labels, out_labels;
    for (int64_t id : src) src_labels.push_back(std::to_string(id));
    for (int64_t id : out) out_labels.push_back(std::to_string(id));
    out_labels.push_back("EOS");
    xg::models::write_heatmaps(maps, src_labels, out_labels, out_dir);
    std::printf("%zu layers x %lld heads written to %s\n", maps.size(), static_cast<long long>(maps[0].size(0)),
                out_dir.c_str());
    return 0;
  });
}
