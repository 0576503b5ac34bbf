// The training state of a Transformer on a sequence task (model, optimiser,
// schedule, data generator, step) and its checkpoints.
//
//   xg::train::TrainOptions o;            // sane defaults: the copy task, a small model
//   o.steps = 2000;
//   xg::train::Trainer trainer(o);
//   double loss = trainer.step();         // one optimisation step on a fresh batch
//   trainer.save("copy.safetensors");     // atomic; load() checks task and config
//
// train/loop.h runs the whole loop (progress, evaluation, metrics, checkpoints).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "distributed/data_parallel.h"
#include "optim/optim.h"
#include "train/tasks.h"

namespace xg::train {

struct TrainOptions {
  TaskConfig task;
  models::TransformerConfig model;  // vocab sizes are taken from `task`
  int64_t batch_size = 64;
  int64_t steps = 1500;             // an upper bound: training stops early at the target
  double target_exact_match = 0.0;  // > 0: stop after an evaluation reaching it
  std::string schedule = "noam";    // noam | constant | warmup_linear | warmup_cosine
  double lr = 1.0;                  // noam: factor; otherwise the peak rate
  int64_t warmup = 200;
  double label_smoothing = 0.1;
  double clip_norm = 1.0;           // <= 0: no clipping
  uint64_t seed = 1;
  int64_t eval_every = 100;
  int64_t eval_size = 1000;
  std::string checkpoint;           // "" = no checkpoints
  int64_t checkpoint_every = 0;     // 0 = only at the end
  bool resume = false;              // continue from `checkpoint` when the file exists
  Precision precision = Precision::f32;  // bf16: forward and loss under Autocast(bf16)
  bool detect_anomaly = false;           // step() under DetectAnomalyGuard
  // Throws std::invalid_argument naming the first bad field and its accepted range.
  void validate() const;
};

// The whole training state: model, optimiser, step and data generator.
//
// Under `mpirun -np N` (dist::Environment alive, N > 1) a Trainer trains data
// parallel (dist::DataParallel): every process draws the same global batch of
// batch_size examples and keeps its own slice, rows [r*B/N, (r+1)*B/N); each
// process's loss is weighted by its share of the batch's target tokens, so the
// update equals one process's on the whole batch. Rank 0's dropout draws are
// those of a single process; rank r > 0 draws from a generator seeded with
// rank_seed(seed, r, step at start or resume). Checkpoints hold no rank-specific state:
// a run resumes at any process count.
class Trainer {
 public:
  explicit Trainer(const TrainOptions& opts);  // validates opts
  // One optimisation step on a fresh batch; returns its loss. A non-finite
  // loss or gradient norm throws optim::NonFiniteError before any update.
  double step();
  int64_t steps_done() const { return step_; }
  double current_lr() const;
  const std::vector<Example>& eval_set() const { return eval_set_; }
  EvalResult evaluate(int64_t n_samples = 3);
  // Atomic save (see save_tensors). The metadata holds the task, the model
  // configuration and the training lengths (decode warns past them).
  void save(const std::string& path) const;
  // Restores model, optimiser, step and generators. Throws std::invalid_argument
  // listing only the task and configuration keys that differ from this run's.
  void load(const std::string& path);

  models::Transformer& model() { return *model_; }
  const TrainOptions& options() const { return opts_; }
  int64_t last_batch_tokens() const { return last_tokens_; }  // target tokens of the last step's (global) batch
  const dist::DataParallel* data_parallel() const { return ddp_.get(); }  // null in one process

 private:
  TrainOptions opts_;
  std::shared_ptr<models::Transformer> model_;
  std::unique_ptr<optim::Adam> opt_;
  std::unique_ptr<optim::Schedule> schedule_;
  std::unique_ptr<dist::DataParallel> ddp_;
  Generator data_gen_;
  std::vector<Example> eval_set_;
  int64_t step_ = 0;
  int64_t last_tokens_ = 0;
};

// The dropout seed of rank r > 0 (splitmix64 of seed, rank and step).
uint64_t rank_seed(uint64_t seed, int rank, int64_t step);

// A whole number written as decimal digits with an optional leading '-' (at
// most 18 digits, so it fits in int64): the one reading of integers in
// command lines, checkpoint metadata and decode's input. "1.5", "1e3",
// "0x10", "+1", " 1", "nan" and "" give nullopt: nothing is truncated or
// reinterpreted.
std::optional<int64_t> parse_whole_number(const std::string& s);

// A checkpoint metadata integer (parse_whole_number) within [lo, hi]; throws
// FormatError naming the file, the key and the range.
int64_t meta_int(const std::map<std::string, std::string>& metadata, const std::string& key, const std::string& path,
                 int64_t lo, int64_t hi);

// What a checkpoint says about its model and task, read from its metadata and
// checked against limits (every size from 1 to its bound below) before anything
// is built from it. Throws FormatError naming the file, the key and the range.
struct CheckpointInfo {
  models::TransformerConfig model;
  TaskConfig task;  // vocab, task and the training lengths min_len..max_len
  int64_t step = 0;
};
CheckpointInfo read_checkpoint_info(const std::map<std::string, std::string>& metadata, const std::string& path);

// Bounds on a checkpoint's configuration: far above any model this library
// trains on a CPU, far below what would overflow or exhaust memory on reading.
struct ModelLimits {
  static constexpr int64_t vocab = 1 << 24, layers = 1024, d_model = 1 << 16, heads = 1024, d_ff = 1 << 18,
                           max_len = 1 << 20;
};

// Refuses (std::invalid_argument) a model whose parameters, gradients and
// Adam moments (16 bytes a parameter) exceed this machine's memory: allocation
// would otherwise succeed and the machine page until it runs out.
void check_fits_in_memory(const models::TransformerConfig& config);

// Fails early when training could not save: `path` must not be a directory,
// and its directory must exist and accept a new file (a probe file is created
// and removed). Throws std::runtime_error naming the path and the reason.
void check_writable(const std::string& path);

}  // namespace xg::train
