// Grapheme-to-phoneme on CMUdict with the encoder-decoder Transformer
// (train/g2p.h does the work).
//
//   g2p train [--steps N] [--time-limit S] [--checkpoint PATH [--resume]] [--metrics CSV] ...
//   echo hello | g2p pronounce --checkpoint PATH        ->  hh ah l ow  (hh ah0 l ow1 with train --stress keep)
//
// pronounce prints one line per input line: a word outside the training
// alphabet gives an empty line and "g2p: line N: ..." on stderr (exit 1).
// Exit codes: 0 done, 1 a runtime error, 2 a usage error.
#include <cstdio>
#include <iostream>
#include <string>

#include "autograd/autograd.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  xg::train::G2PCommand cmd;
  const xg::train::Parsed parsed = xg::train::parse_g2p_command(argc, argv, cmd);
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    if (cmd.threads > 0) xg::set_num_threads(cmd.threads);
    if (cmd.mode == "train") {
      xg::train::G2P g2p(cmd.train);
      xg::train::run_g2p(g2p, cmd.loop);
      return 0;
    }
    xg::train::Pronouncer pronouncer(cmd.checkpoint);
    int status = 0;
    int64_t line_no = 0;
    auto one = [&](const std::string& word) {
      ++line_no;
      std::string out;
      if (!word.empty()) {
        try {
          for (const std::string& p : pronouncer.pronounce(word, cmd.beam)) out += (out.empty() ? "" : " ") + p;
        } catch (const std::invalid_argument& e) {
          std::fprintf(stderr, "g2p: line %lld: %s\n", static_cast<long long>(line_no), e.what());
          status = 1;
        }
      }
      std::printf("%s\n", out.c_str());
      std::fflush(stdout);
    };
    if (!cmd.words.empty()) {
      for (const std::string& w : cmd.words) one(w);
    } else {
      for (std::string w; std::getline(std::cin, w);) {
        while (!w.empty() && (w.back() == '\r' || w.back() == ' ')) w.pop_back();
        one(w);
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "g2p: %s\n", e.what());
    return 1;
  }
}
