#include "apps/seq2seq/decoder.h"

#include <fmt/format.h>

#include <sstream>

#include "train/checkpoint.h"

namespace xg::seq2seq {

namespace {

// "layers 2, d_model 64, d_ff 256, vocab 16", or the RNN's "rnn lstm layers 1, embed ..., hidden ..., vocab ...".
std::string summary(const models::Seq2SeqConfig& c) {
  if (c.kind == "rnn")
    return fmt::format("rnn {} layers {}, embed {}, hidden {}, vocab {}", c.rnn.cell, c.rnn.layers, c.rnn.embed, c.rnn.hidden,
                       c.rnn.src_vocab);
  return fmt::format("layers {}, d_model {}, d_ff {}, vocab {}", c.transformer.layers, c.transformer.d_model,
                     c.transformer.d_ff, c.transformer.src_vocab);
}

}  // namespace

Decoder::Decoder(const std::string& checkpoint) {
  train::InferenceCheckpoint c = train::load_for_inference(checkpoint, "seq2seq", "train_tasks");
  info_ = read_checkpoint_info(c.metadata, checkpoint);
  double present = 0;
  for (auto& [k, v] : c.weights) present += static_cast<double>(v.numel());
  const double needed = info_.model.parameter_count();
  if (needed != present)
    throw FormatError(fmt::format("checkpoint {}: its configuration ({}) has {:.0f} parameters but the file holds "
                                  "{:.0f} model values",
                                  checkpoint, summary(info_.model), needed, present));
  model_ = models::make_seq2seq(info_.model);
  model_->module().load_state_dict(c.weights);
  model_->module().eval();
}

std::vector<int64_t> Decoder::parse(const std::string& line) const {
  std::istringstream in(line);
  std::vector<int64_t> ids;
  std::string tok;
  const int64_t vocab = info_.model.src_vocab();
  while (in >> tok) {
    const int64_t v = parse_whole_number(tok).value_or(-1);
    if (v < kFirstSymbol || v >= vocab)
      throw std::invalid_argument(
          fmt::format("{} is not a symbol id: symbols are {}..{}", quote_text(tok), kFirstSymbol, vocab - 1));
    ids.push_back(v);
  }
  if (static_cast<int64_t>(ids.size()) > info_.model.max_positions())
    throw std::invalid_argument(fmt::format("{} tokens: the model has positions for at most {}", ids.size(),
                                            info_.model.max_positions()));
  return ids;
}

std::vector<int64_t> Decoder::decode(const std::vector<int64_t>& src, int64_t beam, double alpha, int64_t max_len) {
  if (src.empty()) return {};
  if (beam < 1) throw std::invalid_argument(fmt::format("beam {}: expected at least 1", beam));
  int64_t limit = max_len > 0 ? max_len : static_cast<int64_t>(src.size()) * 2 + 5;
  limit = std::min(limit, info_.model.max_positions() - 1);  // BOS takes the first position
  if (beam > 1) return model_->beam(src, limit, beam, alpha);
  return model_->greedy(models::Batch{src, 1, static_cast<int64_t>(src.size())}, limit)[0];
}

std::string Decoder::length_warning(const std::vector<int64_t>& src) const {
  const int64_t n = static_cast<int64_t>(src.size());
  if (n <= info_.task.max_len) return "";
  return fmt::format("{} tokens, longer than the {}..{} the model was trained on: expect wrong output", n,
                     info_.task.min_len, info_.task.max_len);
}

}  // namespace xg::seq2seq
