// A character-level GPT on Debian's fortunes (train/char_lm.h does the work).
//
//   char_lm train [--steps N] [--time-limit S] [--checkpoint PATH [--resume]] [--metrics CSV] ...
//   char_lm sample --checkpoint PATH [--prompt TEXT] [--chars N] [--temperature T] [--top-k K]
//   char_lm --help | char_lm train --help
//
// Exit codes: 0 done, 1 a runtime error (missing data, a bad checkpoint, a
// non-finite loss), 2 a usage error.
#include <cstdio>
#include <cstdlib>

#include "autograd/autograd.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  xg::train::CharLMCommand cmd;
  const xg::train::Parsed parsed = xg::train::parse_char_lm_command(argc, argv, cmd);
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    if (cmd.threads > 0) xg::set_num_threads(cmd.threads);
    if (cmd.mode == "sample") {
      xg::train::CharSampler sampler(cmd.checkpoint);
      std::printf("%s%s\n", cmd.prompt.c_str(), sampler.sample(cmd.prompt, cmd.chars, cmd.sampling, cmd.seed).c_str());
      return 0;
    }
    xg::train::CharLM lm(cmd.train);
    xg::train::run_char_lm(lm, cmd.loop);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 1;
  }
}
