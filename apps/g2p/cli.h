// The command line of g2p (train, pronounce, attention).
#pragma once

#include <string>
#include <vector>

#include "apps/g2p/g2p.h"
#include "train/loop.h"

namespace xg::cli {
struct Parsed;
}

namespace xg::g2p {

// g2p train [options] | g2p pronounce --checkpoint PATH [--beam K] [WORD...]
// | g2p attention --checkpoint PATH --input WORD --out DIR
struct G2PCommand {
  std::string mode;  // "train", "pronounce" or "attention"
  G2POptions job;
  train::TrainOptions train;  // default_recipe()
  train::LoopOptions loop;    // evaluations every 2,000 steps, progress every 200
  int64_t threads = 0;        // 0: every core this process may use
  std::string checkpoint;     // pronounce, attention
  int64_t beam = 4;
  std::vector<std::string> words;  // pronounce; none: one word per line of stdin
  std::string input, out_dir;      // attention
  G2PCommand();
};
cli::Parsed parse_g2p_command(int argc, const char* const* argv, G2PCommand& cmd);

}  // namespace xg::g2p
