// Private to train/*.cpp: what the three trainers (tasks, char_lm, g2p) and
// their loops share about checkpoints and metrics files.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "autograd/tensor.h"
#include "train/trainer.h"  // check_writable

namespace xg::train::detail {

// Throws std::invalid_argument "checkpoint PATH was written by a different
// run: KEY THERE in the file, HERE here; ..." listing only the keys of `mine`
// whose value differs in `meta`; a key in `summarised` (long values, such as
// a vocabulary) is written "KEY differs" / "KEY differ" as `summarised` says.
void check_same_run(const std::map<std::string, std::string>& mine, const std::map<std::string, std::string>& meta,
                    const std::string& path, const std::map<std::string, std::string>& summarised = {});

// A checkpoint's tensors: "model.*" and "optim.*" with the prefix removed;
// any other name is a FormatError naming it.
struct SplitState {
  std::map<std::string, Tensor> model, optim;
};
SplitState split_state(const std::map<std::string, Tensor>& all, const std::string& path);

// A metrics CSV: written afresh with `header`, or appended to when `resumed`
// and the file exists; closed on destruction. An empty path opens nothing.
class MetricsFile {
 public:
  MetricsFile(const std::string& path, const char* header, bool resumed);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  std::FILE* get() const { return f_; }

 private:
  std::FILE* f_ = nullptr;
};

std::string duration(double seconds);  // "12.3s", "4m05s"

// Before step 1 of a loop: the checkpoint path checked writable (when
// `check`; a data-parallel run checks on rank 0 only) and, with `resume`,
// run.load(checkpoint) if the file exists, saying so on `out`.
template <class Run>
void resume_if_asked(Run& run, const std::string& checkpoint, bool resume, bool check, std::FILE* out) {
  if (checkpoint.empty()) return;
  if (check) check_writable(checkpoint);
  if (resume && ::access(checkpoint.c_str(), F_OK) == 0) {
    run.load(checkpoint);
    fmt::print(out, "resumed from {} at step {}\n", checkpoint, run.steps_done());
  } else if (resume) {
    fmt::print(out, "no checkpoint at {} yet: starting from step 0\n", checkpoint);
  }
}

}  // namespace xg::train::detail
