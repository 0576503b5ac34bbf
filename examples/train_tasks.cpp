// Trains the Transformer on the copy or reverse task (train/ does the work).
//
//   train_tasks [--task copy|reverse] [--steps N] [--checkpoint PATH [--resume]] ...
//   train_tasks --help
//
// Exit codes: 0 done, 1 a runtime error (a non-finite loss, an unwritable
// checkpoint), 2 a usage error.
#include <cstdio>

#include "autograd/autograd.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  xg::train::TrainCommand cmd;
  const xg::train::Parsed parsed = xg::train::parse_train_command(argc, argv, cmd);
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    xg::set_num_threads(cmd.threads);
    xg::train::Trainer trainer(cmd.train);
    xg::train::run(trainer, cmd.loop);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tasks: %s\n", e.what());
    return 1;
  }
}
