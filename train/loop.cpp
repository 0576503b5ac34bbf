#include "train/loop.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
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

void LoopOptions::validate() const {
  auto range = [](const char* name, int64_t v, int64_t lo) {
    const int64_t hi = int64_t{1} << 40;
    if (v < lo || v > hi) throw std::invalid_argument(fmt::format("{} {}: expected {}..{}", name, v, lo, hi));
  };
  range("eval_every", eval_every, 1);
  range("log_every", log_every, 1);
  range("checkpoint_every", checkpoint_every, 0);
  if (resume && checkpoint.empty()) throw std::invalid_argument("resume needs a checkpoint path");
  if (!std::isfinite(target) || target < 0 || target > 1e30)
    throw std::invalid_argument(fmt::format("target {}: expected a finite number >= 0", target));
  if (target > 0 && target_metric.empty()) throw std::invalid_argument("a target needs the metric it is for");
  if (!out) throw std::invalid_argument("LoopOptions::out is null");
}

RunSummary fit(Trainer& trainer, const LoopOptions& loop) {
  loop.validate();
  const TrainOptions& o = trainer.options();
  Job& job = trainer.job();
  // Data parallel: rank 0 alone prints, evaluates, writes metrics and
  // checkpoints; every process loads the checkpoint it resumes from.
  const bool lead = dist::rank() == 0, many = dist::world_size() > 1;
  File devnull;
  if (!lead && !(devnull.f = std::fopen("/dev/null", "w"))) throw std::runtime_error("cannot open /dev/null");
  std::FILE* out = lead ? loop.out : devnull.f;

  if (!loop.checkpoint.empty()) {
    if (lead) check_writable(loop.checkpoint);
    if (loop.resume && ::access(loop.checkpoint.c_str(), F_OK) == 0) {
      trainer.load(loop.checkpoint);
      fmt::print(out, "resumed from {} at step {}\n", loop.checkpoint, trainer.steps_done());
    } else if (loop.resume) {
      fmt::print(out, "no checkpoint at {} yet: starting from step 0\n", loop.checkpoint);
    }
  }
  const int threads = num_threads();
  std::string schedule = fmt::format("{} lr {:g}", o.schedule, o.lr);
  if (o.time_limit > 0)
    schedule += o.clock_schedule ? fmt::format(" over {} steps or {:g} s of training", o.steps, o.time_limit)
                                 : fmt::format(", {} steps or {:g} s of training", o.steps, o.time_limit);
  if (o.average > 0) schedule += fmt::format(", averaging the last {:g}%", 100 * o.average);
  fmt::print(out, "{} | {} parameters | {}, {} thread{}{}, {}\n", job.describe(), job.model().num_parameters(),
             schedule, threads, threads == 1 ? "" : "s",
             many ? fmt::format(" x {} processes", dist::world_size()) : "", precision_name(o.precision));
  std::fflush(out);

  // The metrics CSV, opened at the first evaluation (its columns are the evaluation's).
  File metrics;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  // Under mpirun the output is a pseudo-terminal even when redirected: lines, not \r.
  const bool tty = !many && ::isatty(::fileno(out));
  double loss_sum = 0, session_seconds = 0;
  int64_t window = 0, items = 0, saved_at = -1;
  const int64_t first = trainer.steps_done();
  auto tokens_per_s = [&] { return static_cast<double>(items) / std::max(session_seconds, 1e-9); };

  // One evaluation: its line, its lines below, its metrics row.
  auto report = [&](const char* what, EvalStage stage) {
    const int64_t step = trainer.steps_done();
    Evaluation e;
    {
      Autocast cast(o.precision);  // evaluations in the run's precision
      e = job.evaluate(stage, step);
    }
    job.model().train();
    if (tty) fmt::print(out, "\n");
    fmt::print(out, "{} step {}: {}{}{}\n", what, step, values(e.metrics), e.about.empty() ? "" : " ", e.about);
    for (const auto& line : e.lines) fmt::print(out, "{}\n", line);
    if (!loop.metrics.empty()) {
      if (!metrics.f) {
        const bool append = first > 0 && ::access(loop.metrics.c_str(), F_OK) == 0;  // a resumed run adds rows
        metrics.f = std::fopen(loop.metrics.c_str(), append ? "a" : "w");
        if (!metrics.f) throw std::runtime_error("cannot open the metrics file " + loop.metrics);
        if (!append) {
          std::string header = "step,loss,lr";
          for (const auto& [name, v] : e.metrics) header += "," + name;
          std::fprintf(metrics.f, "%s,tokens_per_s,elapsed_s,train_s\n", header.c_str());
        }
      }
      std::string row = fmt::format("{},{:.6f},{:.6g}", step, window ? loss_sum / static_cast<double>(window) : NAN,
                                    trainer.current_lr());
      for (const auto& [name, v] : e.metrics) row += fmt::format(",{:.6f}", v);
      std::fprintf(metrics.f, "%s,%.1f,%.1f,%.1f\n", row.c_str(), tokens_per_s(), since(start),
                   trainer.train_seconds());
      std::fflush(metrics.f);
    }
    loss_sum = 0;
    window = 0;
    std::fflush(out);
    return e;
  };

  while (!trainer.finished()) {
    const auto t0 = clock::now();
    double loss = 0;
    try {
      loss = trainer.step();
    } catch (const std::runtime_error& e) {  // NonFiniteError, AnomalyError: the parameters are those of the last step
      if (!dynamic_cast<const optim::NonFiniteError*>(&e) && !dynamic_cast<const AnomalyError*>(&e)) throw;
      if (tty) fmt::print(out, "\n");
      std::fflush(out);
      if (loop.checkpoint.empty()) throw;
      const std::string held = saved_at >= 0 ? fmt::format("{} holds step {}", loop.checkpoint, saved_at)
                                             : fmt::format("{} was not written by this run", loop.checkpoint);
      const std::string what = std::string(e.what()) + "; nothing saved at this step; " + held;
      if (dynamic_cast<const AnomalyError*>(&e)) throw AnomalyError(what);
      throw optim::NonFiniteError(what);
    }
    session_seconds += since(t0);
    items += trainer.last_global_count();
    loss_sum += loss;
    ++window;
    const int64_t step = trainer.steps_done();
    const double elapsed = since(start);
    // Whichever ends first: the steps left at this session's pace, or the time limit.
    double eta = elapsed / static_cast<double>(step - first) * static_cast<double>(o.steps - step);
    if (o.time_limit > 0) eta = std::min(eta, std::max(0.0, o.time_limit - trainer.train_seconds()));
    const std::string where =
        o.time_limit > 0 && o.clock_schedule
            ? fmt::format(" ({:.1f}% of the schedule)",
                          100.0 * static_cast<double>(trainer.schedule_position()) / static_cast<double>(o.steps))
            : "";
    const std::string note = job.loss_note(loss);
    const std::string line =
        fmt::format("step {}/{}{} loss {:.4f}{}{} lr {:.2e} {:.0f} tok/s elapsed {} ETA {}", step, o.steps, where, loss,
                    note.empty() ? "" : " ", note, trainer.current_lr(), tokens_per_s(), duration(elapsed), duration(eta));
    if (tty) fmt::print(out, "\r{}\x1b[K", line);
    else if (step % loop.log_every == 0) fmt::print(out, "{}\n", line);
    std::fflush(out);

    const bool at_end = trainer.finished();
    bool reached = false;
    if (step % loop.eval_every == 0 && !at_end) {
      if (lead) {
        const Evaluation e = report("eval", EvalStage::periodic);
        reached = loop.target > 0 && e.metric(loop.target_metric) >= loop.target;
      }
      if (many && loop.target > 0) reached = dist::allreduce(reached ? 1.0 : 0.0) > 0;  // rank 0 decides for all
    }
    if (lead && !loop.checkpoint.empty() &&
        ((loop.checkpoint_every > 0 && step % loop.checkpoint_every == 0) || at_end || reached)) {
      trainer.save(loop.checkpoint);
      saved_at = step;
    }
    if (reached) break;
  }

  RunSummary r;
  r.steps = trainer.steps_done();
  r.train_seconds = trainer.train_seconds();
  r.session_train_seconds = session_seconds;
  r.timed_out = trainer.timed_out();
  if (lead) {
    if (trainer.averaged() > 0) {  // what averaging changed, on all held-out data
      Autocast cast(o.precision);
      const Evaluation last = job.evaluate(EvalStage::check, r.steps);
      trainer.use_average();
      const Evaluation mean = job.evaluate(EvalStage::check, r.steps);
      job.model().train();
      if (tty) fmt::print(out, "\n");
      fmt::print(out, "averaging {} snapshot{} of the last {:g}% of the schedule: {} (last step) -> {} (the mean, scored from here on) {}\n",
                 trainer.averaged(), trainer.averaged() == 1 ? "" : "s", 100 * o.average, values(last.metrics),
                 values(mean.metrics), mean.about);
    }
    r.final = report("final eval", EvalStage::final);
  }
  r.seconds = since(start);
  if (lead) fmt::print(out, "final {}\n", job.final_line(r));
  std::fflush(out);
  return r;
}

}  // namespace xg::train
