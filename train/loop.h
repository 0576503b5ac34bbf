// The training loop around a Trainer, as train_tasks runs it: resume, a
// progress line, evaluations with sample decodes, a metrics CSV, checkpoints,
// and a clean stop at the first non-finite loss or gradient.
//
//   xg::train::Trainer trainer(opts);
//   xg::train::RunResult r = xg::train::run(trainer);   // prints to stdout
//   fmt::print("{:.3f}\n", r.last.exact_match);
#pragma once

#include <cstdio>
#include <string>

#include "train/trainer.h"

namespace xg::train {

struct LoopOptions {
  int64_t log_every = 50;    // steps between progress lines when `out` is not a terminal
  std::string metrics;       // CSV of evaluation rows ("" = none); appended to on resume
  int64_t samples = 3;       // sample decodes printed at each evaluation
  std::FILE* out = stdout;   // progress, evaluations and the final line; in place when a terminal
};

struct RunResult {
  EvalResult last;        // the last evaluation
  int64_t steps = 0;      // steps done, resumed ones included
  int64_t saved_at = -1;  // step of the last checkpoint this run wrote (-1: none)
  double seconds = 0;
};

// Runs trainer.options().steps steps (fewer when the target exact match is
// reached). Before step 1 it checks the checkpoint path is writable (nothing
// is created on failure) and, with options().resume, loads the checkpoint if
// it exists. Prints, in order: one line with the task and model, a progress
// line, "eval step N: ..." lines and "final task=... steps=N exact_match=..."
// A non-finite loss or gradient throws optim::NonFiniteError (or AnomalyError
// under detect_anomaly) whose message says which step the checkpoint holds.
RunResult run(Trainer& trainer, const LoopOptions& loop = {});

}  // namespace xg::train
