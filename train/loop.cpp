#include "train/loop.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "autograd/autograd.h"
#include "distributed/dist.h"
#include "train/checkpoint.h"

namespace xg::train {

namespace {

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

struct File {
  std::FILE* f = nullptr;
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (f) std::fclose(f);
  }
};

// A stop's message with what the checkpoint holds.
std::string with_checkpoint(const std::string& what, const LoopOptions& loop, int64_t saved_at) {
  if (loop.checkpoint.empty()) return what;
  const std::string held = saved_at >= 0 ? fmt::format("{} holds step {}", loop.checkpoint, saved_at)
                                         : fmt::format("{} was not written by this run", loop.checkpoint);
  return what + "; nothing saved at this step; " + held;
}

// "exact_match 0.9900 token_acc 0.9950"
std::string values(const Metrics& m) {
  std::string s;
  for (const auto& [name, v] : m) s += fmt::format("{}{} {:.4f}", s.empty() ? "" : " ", name, v);
  return s;
}

}  // namespace

double Evaluation::metric(const std::string& name) const {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  throw std::invalid_argument("the metric '" + name + "' is not one of the evaluation's: " + values(metrics));
}

void check_batch_per_process(int64_t batch_size, const std::string& item) {
  if (batch_size < dist::world_size())
    throw std::invalid_argument(fmt::format("batch_size {}: expected at least one {} per process ({} processes)",
                                            batch_size, item, dist::world_size()));
}

RunSummary fit(Job& job, const TrainOptions& options, const LoopOptions& loop) {
  Trainer trainer(job, options);
  return fit(trainer, loop);
}

void LoopOptions::validate(bool option_names) const {
  auto n = [option_names](const char* field) { return option_names ? option_name(field) : std::string(field); };
  auto range = [&](const char* name, int64_t v, int64_t lo) {
    const int64_t hi = int64_t{1} << 40;
    if (v < lo || v > hi) throw std::invalid_argument(fmt::format("{} {}: expected {}..{}", n(name), v, lo, hi));
  };
  range("eval_every", eval_every, 1);
  range("log_every", log_every, 1);
  range("checkpoint_every", checkpoint_every, 0);
  if (resume && checkpoint.empty()) throw std::invalid_argument(n("resume") + " needs " + n("checkpoint") + " PATH");
  if (!std::isfinite(target) || target < 0 || target > 1e30)
    throw std::invalid_argument(fmt::format("{} {}: expected a finite number >= 0", n("target"), target));
  if (target > 0 && target_metric.empty()) throw std::invalid_argument("a target needs the metric it is for");
  if (!out) throw std::invalid_argument("LoopOptions::out is null");
}

namespace {

// Where the run prints: the caller's stream on rank 0, /dev/null on the
// others; in place (\r) on a terminal of a single process, lines otherwise
// (under mpirun the output is a pseudo-terminal even when redirected).
class Console {
 public:
  explicit Console(std::FILE* lead_out) {
    if (dist::rank() == 0) {
      out_ = lead_out;
    } else {
      if (!(devnull_.f = std::fopen("/dev/null", "w"))) throw std::runtime_error("cannot open /dev/null");
      out_ = devnull_.f;
    }
    tty_ = dist::world_size() == 1 && ::isatty(::fileno(out_));
  }
  std::FILE* out() const { return out_; }
  bool tty() const { return tty_; }
  // Ends a line drawn in place before a full line is printed below it.
  void end_progress() const {
    if (tty_) fmt::print(out_, "\n");
  }

 private:
  File devnull_;
  std::FILE* out_ = nullptr;
  bool tty_ = false;
};

// The checks before step 1: the outputs can be written and are distinct
// files (rank 0 writes them); with --resume, the checkpoint, if there is one.
void prepare(Trainer& trainer, const LoopOptions& loop, const Console& console) {
  if (dist::rank() == 0) check_outputs({{"checkpoint", loop.checkpoint}, {"metrics", loop.metrics}});
  if (!loop.resume) return;
  const bool exists = ::access(loop.checkpoint.c_str(), F_OK) == 0;
  // Every process must take the same path: one that resumed and one that
  // started afresh would train different models (and a sharded load is a
  // collective that the others would never join).
  if (!dist::all_equal(exists ? 1 : 0))
    throw std::runtime_error(fmt::format(
        "--resume: rank {} {} {}, and some other process does {}: every host must see the checkpoint at that path "
        "(a shared file system, or a copy)",
        dist::rank(), exists ? "sees" : "does not see", loop.checkpoint, exists ? "not" : "see it"));
  if (exists) {
    trainer.load(loop.checkpoint);
    fmt::print(console.out(), "resumed from {} at step {}\n", loop.checkpoint, trainer.steps_done());
  } else {
    fmt::print(console.out(), "no checkpoint at {} yet: starting from step 0\n", loop.checkpoint);
  }
}

// "copy task ... | 1234 parameters | warmup_cosine lr 0.001 to 0.0001, weight decay 0.01 on 1200 parameters,
// 2 threads, f32"
void print_header(Trainer& trainer, const Console& console) {
  const TrainOptions& o = trainer.options();
  const int threads = num_threads();
  std::string schedule = fmt::format("{} lr {:g}", o.schedule, o.lr);
  if (o.schedule == "warmup_cosine") schedule += fmt::format(" to {:g}", o.lr * o.min_lr_ratio);
  if (o.time_limit > 0)
    schedule += o.clock_schedule ? fmt::format(" over {} steps or {:g} s of training", o.steps, o.time_limit)
                                 : fmt::format(", {} steps or {:g} s of training", o.steps, o.time_limit);
  if (o.average > 0) schedule += fmt::format(", averaging the last {:g}%", 100 * o.average);
  if (o.weight_decay > 0) {
    // Which parameters the decay reaches is part of the recipe
    // (optim::weight_decay_groups leaves out embeddings): a twin in another
    // framework must decay the same ones, and this count shows whether it does.
    int64_t decayed = 0;
    for (const optim::ParamGroup& g : trainer.optimizer().groups())
      if (g.weight_decay.value_or(o.weight_decay) > 0)
        for (const Tensor& p : g.params) decayed += p.numel();
    schedule += fmt::format(", weight decay {:g} on {} parameters", o.weight_decay, decayed);
  }
  const int world = dist::world_size();
  fmt::print(console.out(), "{} | {} parameters | {}, {} thread{}{}, {}\n", trainer.job().describe(),
             trainer.job().model().num_parameters(), schedule, threads, threads == 1 ? "" : "s",
             world > 1 ? fmt::format(" x {} processes", world) : "", precision_name(o.precision));
  std::fflush(console.out());
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The progress line after each step, and the counts it and the metrics rows
// report: the mean loss since the last evaluation, this session's speed.
class Progress {
 public:
  Progress(Trainer& trainer, const LoopOptions& loop, const Console& console)
      : trainer_(trainer), loop_(loop), console_(console), first_(trainer.steps_done()) {}

  void after_step(double loss, double step_seconds) {
    session_seconds_ += step_seconds;
    items_ += trainer_.last_global_count();
    loss_sum_ += loss;
    ++window_;
    const TrainOptions& o = trainer_.options();
    const int64_t step = trainer_.steps_done();
    const double elapsed = seconds_since(start_);
    // Whichever ends first: the steps left at this session's pace, or the time limit.
    double eta = elapsed / static_cast<double>(step - first_) * static_cast<double>(o.steps - step);
    if (o.time_limit > 0) eta = std::min(eta, std::max(0.0, o.time_limit - trainer_.train_seconds()));
    const std::string where =
        o.time_limit > 0 && o.clock_schedule
            ? fmt::format(" ({:.1f}% of the schedule)", 100.0 * static_cast<double>(trainer_.schedule_position()) /
                                                            static_cast<double>(o.steps))
            : "";
    const std::string note = trainer_.job().loss_note(loss);
    const std::string line = fmt::format("step {}/{}{} loss {:.4f}{}{} lr {:.2e} {:.0f} {}/s elapsed {} ETA {}", step,
                                         o.steps, where, loss, note.empty() ? "" : " ", note, trainer_.current_lr(),
                                         tokens_per_s(), trainer_.job().item_unit(), duration(elapsed), duration(eta));
    if (console_.tty()) fmt::print(console_.out(), "\r{}\x1b[K", line);
    else if (step % loop_.log_every == 0) fmt::print(console_.out(), "{}\n", line);
    std::fflush(console_.out());
  }
  // The mean loss since the last call (NaN when no step ran), and a new window.
  double take_mean_loss() {
    const double mean = window_ ? loss_sum_ / static_cast<double>(window_) : NAN;
    loss_sum_ = 0;
    window_ = 0;
    return mean;
  }
  double tokens_per_s() const { return static_cast<double>(items_) / std::max(session_seconds_, 1e-9); }
  double elapsed() const { return seconds_since(start_); }
  double session_seconds() const { return session_seconds_; }
  bool resumed() const { return first_ > 0; }

 private:
  Trainer& trainer_;
  const LoopOptions& loop_;
  const Console& console_;
  const int64_t first_;  // steps done before this session
  const Clock::time_point start_ = Clock::now();
  double loss_sum_ = 0, session_seconds_ = 0;
  int64_t window_ = 0, items_ = 0;
};

// The metrics CSV: its header at the first evaluation (the columns are the
// evaluation's), a row at each. A resumed run appends to the file it finds.
class MetricsFile {
 public:
  explicit MetricsFile(const std::string& path) : path_(path) {}
  void row(const Trainer& trainer, const Evaluation& e, Progress& progress) {
    const double mean_loss = progress.take_mean_loss();
    if (path_.empty()) return;
    if (!file_.f) open(e, progress.resumed());
    std::string row = fmt::format("{},{:.6f},{:.6g}", trainer.steps_done(), mean_loss, trainer.current_lr());
    for (const auto& [name, v] : e.metrics) row += fmt::format(",{:.6f}", v);
    std::fprintf(file_.f, "%s,%.1f,%.1f,%.1f\n", row.c_str(), progress.tokens_per_s(), progress.elapsed(),
                 trainer.train_seconds());
    std::fflush(file_.f);
  }

 private:
  void open(const Evaluation& e, bool resumed) {
    const bool append = resumed && ::access(path_.c_str(), F_OK) == 0;
    file_.f = std::fopen(path_.c_str(), append ? "a" : "w");
    if (!file_.f) throw std::runtime_error("cannot open the metrics file " + path_ + ": " + std::strerror(errno));
    if (append) return;
    std::string header = "step,loss,lr";
    for (const auto& [name, v] : e.metrics) header += "," + name;
    std::fprintf(file_.f, "%s,tokens_per_s,elapsed_s,train_s\n", header.c_str());
  }
  std::string path_;
  File file_;
};

// One evaluation in the run's precision: its line, the lines below it, its metrics row.
Evaluation evaluate(Trainer& trainer, EvalStage stage, const char* what, const Console& console, MetricsFile& metrics,
                    Progress& progress) {
  const int64_t step = trainer.steps_done();
  Evaluation e;
  {
    Autocast cast(trainer.options().precision);
    e = trainer.job().evaluate(stage, step);
  }
  trainer.job().model().train();
  console.end_progress();
  fmt::print(console.out(), "{} step {}: {}{}{}\n", what, step, values(e.metrics), e.about.empty() ? "" : " ", e.about);
  for (const auto& line : e.lines) fmt::print(console.out(), "{}\n", line);
  metrics.row(trainer, e, progress);
  std::fflush(console.out());
  return e;
}

// trainer.step(), or the stop at a non-finite loss or gradient
// (optim::NonFiniteError, AnomalyError): the parameters are still those
// after the last step, and the error says which step the checkpoint holds.
double step_or_stop(Trainer& trainer, const LoopOptions& loop, const Console& console, int64_t saved_at) {
  try {
    return trainer.step();
  } catch (const optim::NonFiniteError& e) {
    console.end_progress();
    throw optim::NonFiniteError(with_checkpoint(e.what(), loop, saved_at));
  } catch (const AnomalyError& e) {
    console.end_progress();
    throw AnomalyError(with_checkpoint(e.what(), loop, saved_at));
  }
}

// After a periodic evaluation's score: whether it reached the target (rank 0 decides for all).
bool reached_target(const Evaluation* e, const LoopOptions& loop) {
  bool reached = e && loop.target > 0 && e->metric(loop.target_metric) >= loop.target;
  if (dist::world_size() > 1 && loop.target > 0) reached = dist::allreduce(reached ? 1.0 : 0.0) > 0;
  return reached;
}

// With checkpoint averaging: the last weights and their mean scored on all
// held-out data, and the switch to the mean, which the final evaluation scores.
void switch_to_average(Trainer& trainer, const Console& console) {
  const TrainOptions& o = trainer.options();
  const int64_t step = trainer.steps_done();
  Autocast cast(o.precision);
  const Evaluation last = trainer.job().evaluate(EvalStage::check, step);
  trainer.use_average();
  const Evaluation mean = trainer.job().evaluate(EvalStage::check, step);
  trainer.job().model().train();
  console.end_progress();
  fmt::print(console.out(),
             "averaging {} snapshot{} of the last {:g}% of the schedule: {} (last step) -> {} (the mean, scored from "
             "here on) {}\n",
             trainer.averaged(), trainer.averaged() == 1 ? "" : "s", 100 * o.average, values(last.metrics),
             values(mean.metrics), mean.about);
}

}  // namespace

RunSummary fit(Trainer& trainer, const LoopOptions& loop) {
  loop.validate();
  const bool lead = dist::rank() == 0;  // rank 0 alone evaluates, writes metrics and checkpoints
  const Console console(loop.out);
  prepare(trainer, loop, console);
  print_header(trainer, console);
  Progress progress(trainer, loop, console);
  MetricsFile metrics(loop.metrics);
  int64_t saved_at = -1;  // the step the checkpoint holds
  while (!trainer.finished()) {
    const auto t0 = Clock::now();
    const double loss = step_or_stop(trainer, loop, console, saved_at);
    progress.after_step(loss, seconds_since(t0));
    const int64_t step = trainer.steps_done();
    const bool at_end = trainer.finished();
    bool reached = false;
    if (step % loop.eval_every == 0 && !at_end) {
      std::optional<Evaluation> e;
      if (lead) e = evaluate(trainer, EvalStage::periodic, "eval", console, metrics, progress);
      reached = reached_target(e ? &*e : nullptr, loop);
    }
    const bool checkpoint_due = (loop.checkpoint_every > 0 && step % loop.checkpoint_every == 0) || at_end || reached;
    if ((lead || trainer.sharded()) && !loop.checkpoint.empty() && checkpoint_due) {  // sharded: a collective
      trainer.save(loop.checkpoint);
      saved_at = step;
    }
    if (reached) break;
  }

  RunSummary r;
  r.steps = trainer.steps_done();
  r.train_seconds = trainer.train_seconds();
  r.session_train_seconds = progress.session_seconds();
  r.timed_out = trainer.timed_out();
  if (lead) {
    if (trainer.averaged() > 0) switch_to_average(trainer, console);
    r.final = evaluate(trainer, EvalStage::final, "final eval", console, metrics, progress);
  }
  r.seconds = progress.elapsed();
  if (lead) fmt::print(console.out(), "final {}\n", trainer.job().final_line(r));
  std::fflush(console.out());
  return r;
}

}  // namespace xg::train
