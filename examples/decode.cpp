// Decodes sequences with a checkpoint written by train_tasks.
//
//   decode --checkpoint copy.safetensors [--beam K] [--alpha A] [--max-len N] ["3 4 5" ...]
//
// Each argument after the flags is one source sequence of token ids
// (symbols are 3 .. vocab-1); with none, one sequence per line of stdin.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "autograd/serialize.h"
#include "examples/seq2seq/tasks.h"

using namespace xg;

namespace {

std::vector<int64_t> parse_ids(const std::string& line, int64_t vocab) {
  std::istringstream in(line);
  std::vector<int64_t> ids;
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size()) throw std::invalid_argument("'" + tok + "' is not a token id");
    if (v < seq2seq::kFirstSymbol || v >= vocab)
      throw std::invalid_argument("token " + tok + " is outside the symbols " + std::to_string(seq2seq::kFirstSymbol) +
                                  ".." + std::to_string(vocab - 1));
    ids.push_back(v);
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string checkpoint;
  int64_t beam = 1, max_len = 0;
  double alpha = 0.6;
  std::vector<std::string> inputs;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--help" || a == "-h") {
        std::printf("usage: %s --checkpoint PATH [--beam K (1 = greedy)] [--alpha A (0.6)] [--max-len N] "
                    "[\"3 4 5\" ...]\nWith no sequences given, reads one per line from stdin.\n",
                    argv[0]);
        return 0;
      } else if (a == "--checkpoint") {
        checkpoint = value();
      } else if (a == "--beam") {
        beam = std::stoll(value());
      } else if (a == "--alpha") {
        alpha = std::stod(value());
      } else if (a == "--max-len") {
        max_len = std::stoll(value());
      } else if (a.rfind("--", 0) == 0) {
        throw std::invalid_argument("unknown flag " + a + " (try --help)");
      } else {
        inputs.push_back(a);
      }
    }
    if (checkpoint.empty()) throw std::invalid_argument("--checkpoint is required (try --help)");
    models::TransformerConfig cfg = seq2seq::checkpoint_config(checkpoint);
    models::Transformer model(cfg);
    std::map<std::string, Tensor> state;
    for (auto& [k, v] : load_tensors(checkpoint))
      if (k.rfind("model.", 0) == 0) state[k.substr(6)] = v;
    model.load_state_dict(state);
    model.eval();

    auto run = [&](const std::string& line) {
      std::vector<int64_t> src = parse_ids(line, cfg.src_vocab);
      if (src.empty()) return;
      const int64_t limit = max_len > 0 ? max_len : static_cast<int64_t>(src.size()) * 2 + 5;
      std::vector<int64_t> out =
          beam > 1 ? models::beam_search(model, src, seq2seq::kBos, seq2seq::kEos, limit, beam, alpha)
                   : models::greedy_decode(model, models::Batch{src, 1, static_cast<int64_t>(src.size())},
                                           seq2seq::kBos, seq2seq::kEos, limit)[0];
      for (size_t i = 0; i < out.size(); ++i) std::printf("%s%lld", i ? " " : "", static_cast<long long>(out[i]));
      std::printf("\n");
      std::fflush(stdout);
    };
    if (inputs.empty()) {
      std::string line;
      while (std::getline(std::cin, line)) run(line);
    } else {
      for (const auto& s : inputs) run(s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode: %s\n", e.what());
    return 2;
  }
}
