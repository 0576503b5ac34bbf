// The command lines of train_tasks and decode: typed options, ranges checked,
// errors that name the option and the accepted range. Kept out of the
// programs so that the fuzzers and tests parse exactly what they parse.
#pragma once

#include <string>
#include <vector>

#include "apps/seq2seq/seq2seq.h"
#include "train/loop.h"

namespace xg::cli {
struct Parsed;
}

namespace xg::seq2seq {

struct TrainCommand {
  Seq2SeqOptions job;         // the program's defaults: the copy task, N=2, d_model 64
  train::TrainOptions train;  // default_recipe(), 3000 steps
  train::LoopOptions loop;    // a target exact match of 0.99
  int64_t threads = 0;        // 0: every core of this process (under mpirun, its share)
  TrainCommand();
};
cli::Parsed parse_train_command(int argc, const char* const* argv, TrainCommand& cmd);

struct DecodeCommand {
  std::string checkpoint;
  int64_t beam = 1;        // 1: greedy
  double alpha = 0.6;      // beam search length penalty
  int64_t max_len = 0;     // 0: 2 * input length + 5, capped by the model's positions
  int64_t threads = 1;
  std::vector<std::string> inputs;  // none: one sequence per line of stdin
};
cli::Parsed parse_decode_command(int argc, const char* const* argv, DecodeCommand& cmd);

}  // namespace xg::seq2seq
