// Decodes sequences with a checkpoint written by train_tasks (train/ does the work).
//
//   decode --checkpoint copy.safetensors [--beam K] [--alpha A] [--max-len N] ["3 4 5" ...]
//
// Each argument after the options is one source sequence of token ids; with
// none, one sequence per line of stdin. Exactly one output line per input
// line: an empty input gives an empty line, a bad one an empty line and an
// error on stderr naming the line (the exit code is then 1). A source longer
// than the training sequences is decoded with a warning on stderr.
#include <cstdio>
#include <iostream>

#include "autograd/autograd.h"
#include "train/cli.h"
#include "train/decode.h"

int main(int argc, char** argv) {
  xg::train::DecodeCommand cmd;
  const xg::train::Parsed parsed = xg::train::parse_decode_command(argc, argv, cmd);
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    xg::set_num_threads(cmd.threads);
    xg::train::Decoder decoder(cmd.checkpoint);
    int failed = 0;
    int64_t line_no = 0;
    auto run = [&](const std::string& line) {
      ++line_no;
      std::string text;
      try {
        const std::vector<int64_t> src = decoder.parse(line);
        if (std::string w = decoder.length_warning(src); !w.empty())
          std::fprintf(stderr, "decode: line %lld: warning: %s\n", static_cast<long long>(line_no), w.c_str());
        for (int64_t id : decoder.decode(src, cmd.beam, cmd.alpha, cmd.max_len))
          text += (text.empty() ? "" : " ") + std::to_string(id);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "decode: line %lld: %s\n", static_cast<long long>(line_no), e.what());
        failed = 1;
      }
      std::printf("%s\n", text.c_str());
      std::fflush(stdout);
    };
    if (cmd.inputs.empty()) {
      std::string line;
      while (std::getline(std::cin, line)) run(line);
    } else {
      for (const auto& s : cmd.inputs) run(s);
    }
    return failed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode: %s\n", e.what());
    return 1;
  }
}
