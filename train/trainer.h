// The training state of any Job: optimiser, learning-rate schedule, step and
// time, checkpoint averaging, data parallel under mpirun, and its
// checkpoints. train/loop.h runs it with progress, evaluations and metrics.
//
//   MyJob job(...);
//   xg::train::TrainOptions o;  o.steps = 2000;  o.lr = 1e-3;
//   xg::train::Trainer trainer(job, o);
//   double loss = trainer.step();       // one optimisation step
//   trainer.save("run.safetensors");    // atomic; load() checks the run's identity
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "distributed/data_parallel.h"
#include "optim/optim.h"
#include "train/job.h"

namespace xg::train {

struct SplitState;  // train/checkpoint.h

// The recipe of a run: everything that decides its trajectory besides the
// job's own data and model. The programs expose each field as an option,
// with their own defaults.
struct TrainOptions {
  // The schedule's length and the most steps run.
  int64_t steps = 1000;
  // > 0: seconds of training (step() alone, evaluations excluded, summed
  // over resumed sessions). With clock_schedule false the run stops there;
  // with it true the schedule runs over whichever ends first, `steps` or
  // these seconds: the warm-up counts steps, and after it a step's place in
  // the schedule (its position) is the larger of its number and warmup +
  // (steps - warmup) x seconds / time_limit, so a run the clock ends still
  // ends its schedule (budgeted training). A clock that ends within the
  // warm-up ends the run there (timed out).
  double time_limit = 0;
  bool clock_schedule = false;  // true: the schedule spans `steps` or time_limit, whichever ends first
  std::string schedule = "warmup_cosine";  // noam | constant | warmup_linear | warmup_cosine
  double lr = 1e-3;                        // noam: the factor; otherwise the peak (cosine: down to lr x min_lr_ratio)
  static constexpr double kMinLrRatio = 0.1;  // nanoGPT's tenth; also what a checkpoint without the key ran
  double min_lr_ratio = kMinLrRatio;          // warmup_cosine: the rate at its end as a fraction of lr
  int64_t warmup = 100;                    // positions of the linear rise from 0 to lr (noam: where it peaks; constant: unused)
  // Adam (weight_decay 0) or AdamW with decay on matrices only
  // (optim::weight_decay_groups).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double clip_norm = 1.0;  // <= 0: no clipping
  // Under mpirun: each process keeps Adam's state for its shard of the
  // parameters only (ZeRO stage 1, dist::ZeroRedundancyOptimizer); the
  // weights are the same as without. Not part of a run's identity: a
  // checkpoint holds the whole state and resumes either way.
  bool zero = false;
  // Under mpirun: float32 gradients exchanged as bf16 (half the bytes;
  // DataParallelOptions::bf16_exchange). Changes the trajectory by bf16
  // rounding of the gradients; not part of a run's identity.
  bool bf16_exchange = false;
  // Under mpirun: MB of gradients a bucket exchanges (DataParallelOptions::
  // bucket_bytes; PyTorch DDP's bucket_cap_mb and its default). Smaller
  // buckets hide more of a slow link (docs/distributed.md); the result is
  // the same to float32 rounding.
  double bucket_mb = 25;
  uint64_t seed = 1;       // the dropout seeds of ranks > 0
  Precision precision = Precision::f32;  // bf16: the job's loss under Autocast(bf16)
  bool detect_anomaly = false;           // each step under DetectAnomalyGuard
  // > 0: the mean of the weights at kAverageSnapshots points spread evenly
  // over this last fraction of the schedule (checkpoint averaging), the last
  // at its end; the loop scores the mean at the end. 0: off.
  double average = 0;
  static constexpr int64_t kAverageSnapshots = 8;  // snapshots in the mean
  // Throws std::invalid_argument naming the first bad field and its range;
  // with `option_names`, the field as the programs' option (--warmup, --clip).
  void validate(bool option_names = false) const;
};

// A field of TrainOptions or LoopOptions as the programs' option names it:
// "warmup" -> "--warmup", "clip_norm" -> "--clip".
std::string option_name(const std::string& field);

// Under `mpirun -np N` (dist::Environment alive, N > 1) a Trainer trains
// data parallel (dist::DataParallel): every process draws the same global
// batch and computes its Shard; each process's loss is weighted by its share
// of the batch's items, so the update equals one process's on the whole
// batch. Rank 0's dropout draws are those of a single process; rank r > 0
// draws from rank_seed(seed, r, step at start or resume). Checkpoints hold
// no rank-specific state: a run resumes at any process count.
class Trainer {
 public:
  Trainer(Job& job, const TrainOptions& options);  // validates the options
  // One optimisation step on the job's next batch; returns the loss of the
  // whole global batch. A non-finite loss or gradient norm throws
  // optim::NonFiniteError (AnomalyError under detect_anomaly) before any
  // update: the parameters stay those after the last step.
  double step();
  int64_t steps_done() const { return step_; }              // steps done, resumed ones included
  double train_seconds() const { return train_seconds_; }  // time in step(), resumed sessions included
  // The step's place in the schedule (TrainOptions::time_limit): at least
  // steps_done().
  int64_t schedule_position() const;
  // The schedule's end, or the time limit of a run it stops.
  bool finished() const;
  bool timed_out() const;  // finished by the time limit before `steps`
  double current_lr() const;  // the schedule's rate at schedule_position(), clamped to 1..steps
  int64_t last_global_count() const { return last_count_; }  // items of the last step's global batch

  // Snapshots in the mean of the weights so far, and a switch of the model's
  // parameters to that mean. After use_average() save() still writes the
  // last step's weights as the training state (model.NAME; the mean as
  // average.NAME), and step() refuses to train the mean.
  int64_t averaged() const { return averaged_; }
  void use_average();

  // Atomic (save_tensors): model.NAME, optim.NAME, average.NAME tensors; the
  // job's identity() and state(), the recipe's keys, step, train_seconds and
  // the generators in the metadata, "kind" the job's. With `zero` it gathers
  // the optimiser's shards first: every process calls it, and rank 0 writes.
  void save(const std::string& path) const;
  bool sharded() const { return opts_.zero && dist::world_size() > 1; }  // save() is then a collective
  // Restores everything save() wrote, read by load_checkpoint (checksums; a
  // non-finite tensor refused unless `allow_non_finite`). Throws
  // std::invalid_argument listing only the keys of the run's identity that
  // differ, FormatError for a malformed or damaged file; nothing changes
  // unless everything loads.
  void load(const std::string& path, bool allow_non_finite = false);

  Job& job() { return job_; }                             // the job it trains
  const TrainOptions& options() const { return opts_; }  // as given
  optim::Optimizer& optimizer() { return *opt_; }         // Adam, or AdamW with weight_decay > 0
  const dist::DataParallel* data_parallel() const { return ddp_.get(); }  // null in one process

 private:
  Metadata identity() const;  // the job's and the recipe's
  // load()'s steps: the average.NAME tensors taken out of `all` (checked
  // against the parameters and `averaged`), and the change of the job's
  // state, the model and the optimiser, all or none.
  std::vector<Tensor> take_average(std::map<std::string, Tensor>& all, int64_t averaged, const std::string& path) const;
  void commit(const Metadata& meta, const SplitState& state, const std::string& path);
  int64_t position_at(int64_t step, double seconds) const;
  int64_t snapshots_due(int64_t position) const;
  void snapshot_if_due();
  Job& job_;
  TrainOptions opts_;
  std::vector<std::pair<std::string, Tensor>> params_;  // the model's, named
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::Schedule> schedule_;
  std::unique_ptr<dist::DataParallel> ddp_;
  int64_t step_ = 0, last_count_ = 0;
  double train_seconds_ = 0;
  std::vector<Tensor> average_;  // the mean of the snapshots, one per parameter
  int64_t averaged_ = 0;         // snapshots in it
  std::vector<Tensor> last_;     // after use_average(): the last step's weights
};

// The dropout seed of rank r > 0 (splitmix64 of seed, rank and step).
uint64_t rank_seed(uint64_t seed, int rank, int64_t step);

}  // namespace xg::train
