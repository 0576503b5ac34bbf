// Decoding with a checkpoint of TaskJob (train_tasks): the checkpoint is
// validated (configuration limits, parameter count against the file) before
// any model is built, and each input line gives exactly one output line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/seq2seq/job.h"

namespace xg::seq2seq {

class Decoder {
 public:
  // Throws FormatError naming the file and the bad field.
  explicit Decoder(const std::string& checkpoint);
  const CheckpointInfo& info() const { return info_; }
  models::Seq2SeqModel& model() { return *model_; }  // the checkpoint's model, of either family

  // Token ids of one line ("3 4 5"); throws std::invalid_argument naming the
  // token and the symbol range, or a length past the model's positions.
  std::vector<int64_t> parse(const std::string& line) const;
  // Decodes one source: beam 1 is greedy. max_len 0: 2 * |src| + 5; any
  // limit is capped by the model's positions.
  std::vector<int64_t> decode(const std::vector<int64_t>& src, int64_t beam = 1, double alpha = 0.6,
                              int64_t max_len = 0);
  // "" or a warning when src is longer than the sequences the model was trained on.
  std::string length_warning(const std::vector<int64_t>& src) const;

 private:
  CheckpointInfo info_;
  std::unique_ptr<models::Seq2SeqModel> model_;
};

}  // namespace xg::seq2seq
