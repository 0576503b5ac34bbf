// The copy and reverse tasks: random sequences, and exact-match evaluation
// by greedy decoding.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/seq2seq_model.h"

namespace xg::seq2seq {

using models::Example;
using models::kBos;
using models::kEos;
using models::kFirstSymbol;
using models::kPad;
using models::make_batch;
using models::TrainBatch;

enum class Task { copy, reverse };
Task parse_task(const std::string& s);  // "copy" | "reverse"
const char* task_name(Task t);

struct TaskConfig {
  Task task = Task::copy;
  int64_t vocab = 16;  // including the three special tokens
  int64_t min_len = 1, max_len = 10;
  void validate() const;  // throws std::invalid_argument naming the field
};

// A random sequence with a uniform length in [min_len, max_len], and its target.
Example sample(const TaskConfig& cfg, Generator& gen);

struct EvalResult {
  double exact_match = 0;  // whole output sequence equals the target
  double token_acc = 0;    // target positions (with the final EOS) predicted right
  std::vector<std::pair<Example, std::vector<int64_t>>> samples;  // a few (input, output) pairs
};
// Greedy decoding of every example, in batches.
EvalResult evaluate(models::Seq2SeqModel& model, const std::vector<Example>& set, int64_t batch_size,
                    int64_t n_samples = 3);

}  // namespace xg::seq2seq
