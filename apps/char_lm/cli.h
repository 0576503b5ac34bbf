// The command line of char_lm (train and sample).
#pragma once

#include <string>

#include "apps/char_lm/char_lm.h"
#include "train/loop.h"

namespace xg::cli {
struct Parsed;
}

namespace xg::char_lm {

// char_lm train [options] | char_lm sample --checkpoint PATH [options]
struct CharLMCommand {
  std::string mode;  // "train" or "sample"
  CharLMOptions job;
  train::TrainOptions train;  // default_recipe()
  train::LoopOptions loop;    // evaluations every 500 steps, progress every 100
  int64_t threads = 0;        // 0: every core this process may use
  // sample
  std::string checkpoint;
  std::string prompt;
  int64_t chars = 300;
  nn::SamplingOptions sampling{0.8, 0, 1.0};
  uint64_t seed = 1;
  CharLMCommand();
};
cli::Parsed parse_char_lm_command(int argc, const char* const* argv, CharLMCommand& cmd);

}  // namespace xg::char_lm
