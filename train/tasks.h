// The copy and reverse tasks: random sequences, padded batches and
// exact-match evaluation by greedy decoding.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/transformer.h"

namespace xg::train {

// Token ids: 0 padding, 1 begin, 2 end; symbols are 3 .. vocab-1.
constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kFirstSymbol = 3;

enum class Task { copy, reverse };
Task parse_task(const std::string& s);  // "copy" | "reverse"
const char* task_name(Task t);

struct Example {
  std::vector<int64_t> src, tgt;  // symbols only (no BOS/EOS)
};

struct TaskConfig {
  Task task = Task::copy;
  int64_t vocab = 16;  // including the three special tokens
  int64_t min_len = 1, max_len = 10;
  void validate() const;  // throws std::invalid_argument naming the field
};

// A random sequence with a uniform length in [min_len, max_len], and its target.
Example sample(const TaskConfig& cfg, Generator& gen);

// Padded batch: src (B,S); tgt_in = BOS + tgt (B,T); tgt_out = tgt + EOS (B,T).
struct TrainBatch {
  models::Batch src, tgt_in, tgt_out;
  int64_t target_tokens = 0;  // non-padding positions of tgt_out
};
TrainBatch make_batch(const std::vector<Example>& examples);

struct EvalResult {
  double exact_match = 0;  // whole output sequence equals the target
  double token_acc = 0;    // target positions (with the final EOS) predicted right
  std::vector<std::pair<Example, std::vector<int64_t>>> samples;  // a few (input, output) pairs
};
// Greedy decoding of every example, in batches.
EvalResult evaluate(models::Transformer& model, const std::vector<Example>& set, int64_t batch_size,
                    int64_t n_samples = 3);

}  // namespace xg::train
