// The one training loop: runs a Trainer (any Job) to the end of its schedule
// with a progress line, evaluations, a metrics CSV, checkpoints and resume,
// and a clean stop at the first non-finite loss or gradient.
//
//   MyJob job(...);
//   xg::train::Trainer trainer(job, train_options);
//   xg::train::RunSummary r = xg::train::fit(trainer, loop_options);  // prints to stdout
#pragma once

#include <cstdio>
#include <string>

#include "train/trainer.h"

namespace xg::train {

// How fit() runs a Trainer: evaluation, logging and checkpoint cadence, resume,
// the metrics file, an early stop at a target, and where it prints.
struct LoopOptions {
  int64_t eval_every = 100;  // steps between periodic evaluations
  int64_t log_every = 50;    // steps between progress lines when `out` is not a terminal
  std::string checkpoint;    // "" = no checkpoints
  int64_t checkpoint_every = 0;  // 0 = at the end only
  bool resume = false;           // continue from `checkpoint` when the file exists
  std::string metrics;           // CSV of evaluation rows ("" = none); appended to on resume
  std::string target_metric;     // the metric `target` is for ("exact_match"); needed when target > 0
  // > 0: stop after a periodic evaluation whose `target_metric` reaches it (>=).
  double target = 0;
  std::FILE* out = stdout;       // progress, evaluations and the final line; in place on a terminal
  // Throws std::invalid_argument naming the bad field; with `option_names`,
  // as the programs' option (option_name: --eval-every).
  void validate(bool option_names = false) const;
};

// Runs until trainer.finished() (or the target). Before step 1 it checks
// the checkpoint and metrics paths (check_outputs: nothing is created on
// failure) and, with `resume`, loads the checkpoint if it exists. Prints, in order: the
// header line (the job's description, parameters, schedule, threads,
// precision), a progress line, "eval step N: NAME VALUE ... (ABOUT)" lines
// every eval_every steps, with checkpoint averaging a line comparing the
// last weights with their mean, "final eval step N: ...", and "final " +
// the job's final line. The metrics CSV has the columns step, loss (the mean
// since the last row), lr, the evaluation's metrics, tokens_per_s,
// elapsed_s. A non-finite loss or gradient rethrows optim::NonFiniteError
// (or AnomalyError) with which step the checkpoint holds.
//
// Under mpirun, rank 0 alone prints, evaluates, writes metrics and
// checkpoints; progress comes as lines, never redrawn; every process loads
// the checkpoint it resumes from.
RunSummary fit(Trainer& trainer, const LoopOptions& loop = {});
// The same with a Trainer of its own: what a program's main() runs.
RunSummary fit(Job& job, const TrainOptions& options, const LoopOptions& loop = {});

}  // namespace xg::train
