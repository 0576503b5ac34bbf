// The copy and reverse tasks, and the training loop shared by the training
// program, the decode program and the tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "models/transformer.h"
#include "optim/optim.h"

namespace xg::seq2seq {

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
  void validate() const;
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

struct TrainOptions {
  TaskConfig task;
  models::TransformerConfig model;  // vocab sizes are taken from `task`
  int64_t batch_size = 64;
  int64_t steps = 1500;             // an upper bound: training stops early at the target
  double target_exact_match = 0.0;  // > 0: stop after an evaluation reaching it
  std::string schedule = "noam";    // noam | constant | warmup_linear
  double lr = 1.0;                  // noam: factor; otherwise the peak rate
  int64_t warmup = 200;
  double label_smoothing = 0.1;
  double clip_norm = 1.0;           // <= 0: no clipping
  uint64_t seed = 1;
  int64_t eval_every = 100;
  int64_t eval_size = 1000;
  std::string checkpoint;           // "" = no checkpoints
  int64_t checkpoint_every = 0;     // 0 = only at the end
  bool resume = false;
  Precision precision = Precision::f32;  // bf16: forward and loss under Autocast(bf16)
  bool detect_anomaly = false;           // step() under DetectAnomalyGuard
};

struct StepLog {
  int64_t step;
  double loss, lr, tokens_per_s, elapsed_s;
};

// The whole training state: model, optimiser, step and data generator.
class Trainer {
 public:
  explicit Trainer(const TrainOptions& opts);
  // One optimisation step on a fresh batch; returns its loss.
  double step();
  int64_t steps_done() const { return step_; }
  double current_lr() const;
  const std::vector<Example>& eval_set() const { return eval_set_; }
  EvalResult evaluate(int64_t n_samples = 3);
  // Atomic save; load checks the model configuration matches.
  void save(const std::string& path) const;
  void load(const std::string& path);

  models::Transformer& model() { return *model_; }
  const TrainOptions& options() const { return opts_; }
  int64_t last_batch_tokens() const { return last_tokens_; }  // target tokens of the last step's batch

 private:
  TrainOptions opts_;
  std::shared_ptr<models::Transformer> model_;
  std::unique_ptr<optim::Adam> opt_;
  std::unique_ptr<optim::Schedule> schedule_;
  Generator data_gen_;
  std::vector<Example> eval_set_;
  int64_t step_ = 0;
  int64_t last_tokens_ = 0;
};

// Reads a checkpoint's model configuration (for the decode program).
models::TransformerConfig checkpoint_config(const std::string& path);

}  // namespace xg::seq2seq
