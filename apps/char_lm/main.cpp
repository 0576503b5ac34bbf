// A character-level GPT on Debian's fortunes (apps/char_lm/char_lm.h is the
// job, train/ the loop).
//
//   char_lm train [--steps N] [--time-limit S] [--checkpoint PATH [--resume]] [--metrics CSV] ...
//   mpirun -np 2 char_lm train ...     data parallel: --batch is split across the processes
//   char_lm sample --checkpoint PATH [--prompt TEXT] [--chars N] [--temperature T] [--top-k K]
//   char_lm --help | char_lm train --help
//
// Exit codes: 0 done, 1 a runtime error (missing data, a bad checkpoint, a
// non-finite loss), 2 a usage error.
#include <cstdio>

#include "apps/char_lm/cli.h"
#include "apps/common/program.h"

int main(int argc, char** argv) {
  xg::char_lm::CharLMCommand cmd;
  const xg::cli::Parsed parsed = xg::char_lm::parse_char_lm_command(argc, argv, cmd);
  return xg::cli::run_program("char_lm", argc, argv, parsed, cmd.threads, [&] {
    if (cmd.mode == "sample") {
      xg::char_lm::CharSampler sampler(cmd.checkpoint);
      std::printf("%s%s\n", cmd.prompt.c_str(), sampler.sample(cmd.prompt, cmd.chars, cmd.sampling, cmd.seed).c_str());
      return 0;
    }
    xg::char_lm::CharLMJob job(cmd.job);
    xg::train::fit(job, cmd.train, cmd.loop);
    return 0;
  });
}
