// What an application gives the training loop: a model, the loss of the next
// batch, evaluations, and what identifies its run in a checkpoint. Everything
// else (optimiser, schedule, clipping, the non-finite stop, progress,
// evaluation and checkpoint cadence, metrics CSV, resume, checkpoint
// averaging, data parallel under mpirun) is the loop's: train/trainer.h and
// train/loop.h. docs/applications.md walks through a whole application.
//
//   class Sorting : public xg::train::Job {
//     nn::Module& model() override { return *model_; }
//     StepLoss loss(const Shard& shard) override;        // the rows of the next batch this process computes
//     Evaluation evaluate(EvalStage stage, int64_t step) override;
//     Metadata identity() const override;              // what a resumed run must share
//     ...
//   };
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/serialize.h"
#include "nn/module.h"

namespace xg::train {

// Named values of an evaluation, in the order they are printed and written
// to the metrics CSV ("exact_match", "wer", "val_bpc", ...).
using Metrics = std::vector<std::pair<std::string, double>>;

// This process's share of a global batch: rows [begin(B), end(B)) of B. One
// process (no mpirun) computes every row. `step` is the step the batch is
// for, from 1 (a job whose data order is a function of the step reads it).
struct Shard {
  // This process's rank and the number of processes (dist::rank(), dist::world_size()).
  int rank = 0, world = 1;
  int64_t step = 1;                                                      // the step the batch is for, from 1
  int64_t begin(int64_t rows) const { return rows * rank / world; }      // first row of this process's share
  int64_t end(int64_t rows) const { return rows * (rank + 1) / world; }  // one past its last row
};
// What every job checks of its global batch: at least one row per process.
// Throws std::invalid_argument "batch_size B: expected at least one ITEM per
// process (N processes)".
void check_batch_per_process(int64_t batch_size, const std::string& item);

// The loss of one step on this process: a mean over `count` items (target
// tokens, characters) out of `global_count` in the whole global batch. The
// loop weights it by count * world / global_count, so that the averaged
// gradient of every process equals one process's on the whole batch.
struct StepLoss {
  Tensor loss;               // 0-d, recorded on the tape
  int64_t count = 0;         // items this process's mean is over
  int64_t global_count = 0;  // items of the global batch; also the progress line's tok/s
};

// periodic: every eval_every steps (may be a sample of the held-out data);
// check: all held-out data, cheaply (before and after checkpoint averaging);
// final: the run's reported result, once at the end.
enum class EvalStage { periodic, check, final };

// What Job::evaluate returns: the values and what to print with them.
struct Evaluation {
  Metrics metrics;                 // the values, printed and written in this order
  std::string about;               // printed after the values: "(1000 held-out sequences)"
  std::vector<std::string> lines;  // printed below the evaluation line (sample outputs, ...)
  // The value of metric `name`; throws std::invalid_argument listing the
  // evaluation's metrics when it has none of that name.
  double metric(const std::string& name) const;
};

// What the loop knows of a finished run, for the job's final line.
struct RunSummary {
  int64_t steps = 0;           // steps done, resumed ones included
  double seconds = 0;          // wall-clock time of this session
  double train_seconds = 0;    // time in steps, resumed sessions included
  double session_train_seconds = 0;  // time in steps of this session
  bool timed_out = false;      // ended by the time limit before the last step
  Evaluation final;            // the final evaluation
};

// An application as the training loop sees it: a model, the loss of each
// batch, evaluations, and what identifies its run in a checkpoint.
class Job {
 public:
  virtual ~Job() = default;

  // The model the loop trains, clips, saves, averages and (under mpirun)
  // wraps in DataParallel.
  virtual nn::Module& model() = 0;
  // The generator of the model's dropout, saved in checkpoints and reseeded
  // per rank under mpirun; null when the model has none.
  virtual Generator* dropout_generator() { return nullptr; }
  // The model width of the noam schedule (0: that schedule is refused).
  virtual int64_t model_width() const { return 0; }

  // The first part of the run's header line: data and model ("task=copy
  // vocab=16 ... | Transformer N=2 d_model=64 ..."); the loop adds the
  // parameter count, the schedule, threads and precision.
  virtual std::string describe() = 0;
  // The loss of this process's rows of the next global batch. Every process
  // draws the same global batch (its generators advance alike) and computes
  // only its shard. Called in train mode, under the run's Autocast.
  virtual StepLoss loss(const Shard& shard) = 0;
  // Evaluates the model on held-out data; called on rank 0 only, after
  // `step` steps. The loop restores train mode afterwards.
  virtual Evaluation evaluate(EvalStage stage, int64_t step) = 0;
  // Shown after the loss on the progress line ("(2.345 bpc)"), or "".
  virtual std::string loss_note(double /*loss*/) const { return ""; }
  // What the progress line counts per second (global_count's items): "tok"
  // for sequences, "img" for images.
  virtual std::string item_unit() const { return "tok"; }
  // The last line of the run, after "final " (scripts read it); called on
  // rank 0 only, like evaluate().
  virtual std::string final_line(const RunSummary& run) const = 0;

  // Checkpoints. `kind` names the application in the metadata ("seq2seq").
  virtual std::string kind() const = 0;
  // Keys that must be equal for a run to continue from a checkpoint: the
  // model configuration (models' to_metadata()) and what decides the data.
  virtual Metadata identity() const = 0;
  // Keys of identity() too long to print when they differ, each with what
  // to say instead ("vocab" -> "vocab differs").
  virtual Metadata summarised() const { return {}; }
  // Keys identity() gained after checkpoints were first written, each with
  // the value a file without it stands for ("erase" -> "0"), so that older
  // runs still resume and a run that differs in it still does not.
  virtual Metadata identity_defaults() const { return {}; }
  // The job's own state (a data generator), restored by set_state, which
  // throws FormatError naming `path` before changing anything.
  virtual Metadata state() const { return {}; }
  virtual void set_state(const Metadata& /*metadata*/, const std::string& /*path*/) {}
};

}  // namespace xg::train
