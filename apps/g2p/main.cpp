// Grapheme-to-phoneme on CMUdict with the encoder-decoder Transformer
// (apps/g2p/g2p.h is the job, train/ the loop).
//
//   g2p train [--steps N] [--time-limit S] [--checkpoint PATH [--resume]] [--metrics CSV] ...
//   mpirun -np 2 g2p train ...      data parallel: --batch is split across the processes
//   echo hello | g2p pronounce --checkpoint PATH        ->  hh ah l ow  (hh ah0 l ow1 with train --stress keep)
//   g2p attention --checkpoint PATH --input hello --out DIR
//
// pronounce prints one line per input line: a word outside the training
// alphabet gives an empty line and "g2p: line N: ..." on stderr (exit 1).
// Exit codes: 0 done, 1 a runtime error, 2 a usage error.
#include <algorithm>
#include <cstdio>

#include "apps/g2p/cli.h"
#include "models/attention_map.h"
#include "train/checkpoint.h"
#include "apps/common/program.h"

namespace {

int attention(const xg::g2p::G2PCommand& cmd) {
  xg::train::check_outputs({{"--out", cmd.out_dir, /*folder=*/true}});
  xg::g2p::Pronouncer p(cmd.checkpoint);
  const auto src = p.encode(cmd.input);
  const auto phones = p.pronounce(cmd.input, 1);
  std::vector<int64_t> out;
  for (const auto& ph : phones)
    out.push_back(xg::models::kFirstSymbol + (std::find(p.phones().begin(), p.phones().end(), ph) - p.phones().begin()));
  const auto maps = p.model().attention_maps(src, out);
  std::vector<std::string> src_labels, out_labels = phones;
  for (char c : cmd.input) src_labels.push_back(std::string(1, c));
  out_labels.push_back("EOS");
  xg::models::write_heatmaps(maps, src_labels, out_labels, cmd.out_dir);
  std::printf("%zu layers x %lld heads written to %s\n", maps.size(), static_cast<long long>(maps[0].size(0)),
              cmd.out_dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xg::g2p::G2PCommand cmd;
  const xg::cli::Parsed parsed = xg::g2p::parse_g2p_command(argc, argv, cmd);
  return xg::cli::run_program("g2p", argc, argv, parsed, cmd.threads, [&] {
    if (cmd.mode == "train") {
      xg::g2p::G2PJob job(cmd.job);
      xg::train::fit(job, cmd.train, cmd.loop);
      return 0;
    }
    if (cmd.mode == "attention") return attention(cmd);
    xg::g2p::Pronouncer pronouncer(cmd.checkpoint);
    return xg::cli::for_each_line("g2p", cmd.words, [&](std::string word, int64_t) {
      while (!word.empty() && word.back() == ' ') word.pop_back();
      std::string out;
      if (!word.empty())
        for (const std::string& p : pronouncer.pronounce(word, cmd.beam)) out += (out.empty() ? "" : " ") + p;
      return out;
    });
  });
}
