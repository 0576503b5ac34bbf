// Decodes sequences with a checkpoint written by train_tasks.
//
//   decode --checkpoint copy.safetensors [--beam K] [--alpha A] [--max-len N] ["3 4 5" ...]
//
// Each argument after the options is one source sequence of token ids; with
// none, one sequence per line of stdin. Exactly one output line per input
// line: an empty input gives an empty line, a bad one an empty line and an
// error on stderr naming the line (the exit code is then 1). A source longer
// than the training sequences is decoded with a warning on stderr.
#include <cstdio>

#include "apps/seq2seq/cli.h"
#include "apps/seq2seq/seq2seq.h"
#include "apps/common/program.h"

int main(int argc, char** argv) {
  xg::seq2seq::DecodeCommand cmd;
  const xg::cli::Parsed parsed = xg::seq2seq::parse_decode_command(argc, argv, cmd);
  return xg::cli::run_program("decode", argc, argv, parsed, cmd.threads, [&] {
    xg::seq2seq::Decoder decoder(cmd.checkpoint);
    return xg::cli::for_each_line("decode", cmd.inputs, [&](const std::string& line, int64_t number) {
      const std::vector<int64_t> src = decoder.parse(line);
      if (std::string w = decoder.length_warning(src); !w.empty())
        std::fprintf(stderr, "decode: line %lld: warning: %s\n", static_cast<long long>(number), w.c_str());
      std::string text;
      for (int64_t id : decoder.decode(src, cmd.beam, cmd.alpha, cmd.max_len))
        text += (text.empty() ? "" : " ") + std::to_string(id);
      return text;
    });
  });
}
