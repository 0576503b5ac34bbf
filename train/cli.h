// The command lines of train_tasks and decode (CLI11 inside): typed options,
// ranges checked, errors that name the option and the accepted range. Kept in
// the library so that the programs stay thin and the fuzzers and tests parse
// exactly what the programs parse.
#pragma once

#include <string>
#include <vector>

#include "train/char_lm.h"
#include "train/g2p.h"
#include "train/loop.h"

namespace xg::train {

// What parsing decided: run, or exit with `exit_code` after printing `message`
// (the --help text to stdout with 0; an error naming the option to stderr with 2).
struct Parsed {
  bool run = false;
  int exit_code = 0;
  std::string message;
};

struct TrainCommand {
  TrainOptions train;  // the program's defaults: the copy task, N=2, d_model 64
  LoopOptions loop;
  int threads = 0;  // 0: dist::cores_per_rank() (every core of one process; under mpirun, its share)
  TrainCommand();
};
Parsed parse_train_command(int argc, const char* const* argv, TrainCommand& cmd);

struct DecodeCommand {
  std::string checkpoint;
  int64_t beam = 1;        // 1: greedy
  double alpha = 0.6;      // beam search length penalty
  int64_t max_len = 0;     // 0: 2 * input length + 5, capped by the model's positions
  int threads = 1;
  std::vector<std::string> inputs;  // none: one sequence per line of stdin
};
Parsed parse_decode_command(int argc, const char* const* argv, DecodeCommand& cmd);

// char_lm train [options] | char_lm sample --checkpoint PATH [options]
struct CharLMCommand {
  std::string mode;  // "train" or "sample"
  CharLMOptions train;
  CharLMLoop loop;
  int threads = 0;  // 0: every core this process may use
  // sample
  std::string checkpoint;
  std::string prompt;
  int64_t chars = 300;
  nn::SamplingOptions sampling{0.8, 0, 1.0};
  uint64_t seed = 1;
};
Parsed parse_char_lm_command(int argc, const char* const* argv, CharLMCommand& cmd);

// g2p train [options] | g2p pronounce --checkpoint PATH [--beam K] [WORD...]
struct G2PCommand {
  std::string mode;  // "train" or "pronounce"
  G2POptions train;
  G2PLoop loop;
  int threads = 0;  // 0: every core this process may use
  std::string checkpoint;  // pronounce
  int64_t beam = 4;
  std::vector<std::string> words;  // none: one word per line of stdin
};
Parsed parse_g2p_command(int argc, const char* const* argv, G2PCommand& cmd);

// Limits of the programs' options (the parsers name them in their errors).
struct OptionLimits {
  static constexpr int64_t vocab = 1 << 16, length = 1024, layers = 64, d_model = 8192, heads = 256, d_ff = 1 << 16,
                           batch = 1 << 16, steps = 1'000'000'000, eval_size = 1'000'000, beam = 64;
};

}  // namespace xg::train
