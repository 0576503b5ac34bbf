#include "apps/seq2seq/decoder.h"

#include <fmt/format.h>

#include <sstream>

#include "train/checkpoint.h"

namespace xg::seq2seq {

Decoder::Decoder(const std::string& checkpoint) {
  train::InferenceCheckpoint c = train::load_for_inference(checkpoint, "seq2seq", "train_tasks");
  info_ = read_checkpoint_info(c.metadata, checkpoint);
  double present = 0;
  for (auto& [k, v] : c.weights) present += static_cast<double>(v.numel());
  const double needed = info_.model.parameter_count();
  if (needed != present)
    throw FormatError(fmt::format(
        "checkpoint {}: its configuration (layers {}, d_model {}, d_ff {}, vocab {}) has {:.0f} parameters but the "
        "file holds {:.0f} model values",
        checkpoint, info_.model.layers, info_.model.d_model, info_.model.d_ff, info_.model.src_vocab, needed, present));
  model_ = std::make_unique<models::Transformer>(info_.model);
  model_->load_state_dict(c.weights);
  model_->eval();
}

std::vector<int64_t> Decoder::parse(const std::string& line) const {
  std::istringstream in(line);
  std::vector<int64_t> ids;
  std::string tok;
  const int64_t vocab = info_.model.src_vocab;
  while (in >> tok) {
    const int64_t v = parse_whole_number(tok).value_or(-1);
    if (v < kFirstSymbol || v >= vocab)
      throw std::invalid_argument(
          fmt::format("'{}' is not a symbol id: symbols are {}..{}", tok.substr(0, 40), kFirstSymbol, vocab - 1));
    ids.push_back(v);
  }
  if (static_cast<int64_t>(ids.size()) > info_.model.max_len)
    throw std::invalid_argument(fmt::format("{} tokens: the model has positions for at most {}", ids.size(),
                                            info_.model.max_len));
  return ids;
}

std::vector<int64_t> Decoder::decode(const std::vector<int64_t>& src, int64_t beam, double alpha, int64_t max_len) {
  if (src.empty()) return {};
  if (beam < 1) throw std::invalid_argument(fmt::format("beam {}: expected at least 1", beam));
  int64_t limit = max_len > 0 ? max_len : static_cast<int64_t>(src.size()) * 2 + 5;
  limit = std::min(limit, info_.model.max_len - 1);  // BOS takes the first position
  if (beam > 1) return models::beam_search(*model_, src, kBos, kEos, limit, beam, alpha);
  return models::greedy_decode(*model_, models::Batch{src, 1, static_cast<int64_t>(src.size())}, kBos, kEos, limit)[0];
}

std::string Decoder::length_warning(const std::vector<int64_t>& src) const {
  const int64_t n = static_cast<int64_t>(src.size());
  if (n <= info_.task.max_len) return "";
  return fmt::format("{} tokens, longer than the {}..{} the model was trained on: expect wrong output", n,
                     info_.task.min_len, info_.task.max_len);
}

}  // namespace xg::seq2seq
