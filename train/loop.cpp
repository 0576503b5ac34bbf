#include "train/loop.h"

#include "train/detail/checkpoint_io.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "autograd/autograd.h"
#include "distributed/dist.h"

namespace xg::train {

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

using detail::duration;

struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

}  // namespace

RunResult run(Trainer& trainer, const LoopOptions& loop) {
  const TrainOptions& o = trainer.options();
  if (loop.log_every < 1) throw std::invalid_argument(fmt::format("log_every {}: expected at least 1", loop.log_every));
  // Data parallel: rank 0 alone prints, evaluates, writes metrics and
  // checkpoints; every process loads the checkpoint it resumes from.
  const bool lead = dist::rank() == 0, many = dist::world_size() > 1;
  File devnull;
  if (!lead) {
    devnull.f = std::fopen("/dev/null", "w");
    if (!devnull.f) throw std::runtime_error("cannot open /dev/null");
  }
  std::FILE* out = lead ? loop.out : devnull.f;
  detail::resume_if_asked(trainer, o.checkpoint, o.resume, lead, out);
  const auto& cfg = trainer.model().config();
  const int threads = num_threads();
  fmt::print(out,
             "task={} vocab={} len={}..{} | Transformer N={} d_model={} heads={} d_ff={} dropout={:g} {} | {} "
             "parameters | batch {}, {} schedule, {} thread{}{}, {}\n",
             task_name(o.task.task), o.task.vocab, o.task.min_len, o.task.max_len, cfg.layers, cfg.d_model, cfg.heads,
             cfg.d_ff, cfg.dropout, cfg.pre_norm ? "pre-norm" : "post-norm", trainer.model().num_parameters(),
             o.batch_size, o.schedule, threads, threads == 1 ? "" : "s",
             many ? fmt::format(" x {} processes", dist::world_size()) : "", precision_name(o.precision));
  std::fflush(out);

  const detail::MetricsFile metrics_file(lead ? loop.metrics : std::string(),
                                         "step,loss,lr,exact_match,token_acc,tokens_per_s", trainer.steps_done() > 0);
  std::FILE* metrics = metrics_file.get();

  // Under mpirun the output is a pseudo-terminal even when redirected: lines, not \r.
  const bool tty = !many && ::isatty(::fileno(out));
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  double train_seconds = 0, loss_sum = 0;
  int64_t tokens = 0, window_steps = 0;
  RunResult r;
  bool evaluated = false;
  const int64_t first = trainer.steps_done();
  while (trainer.steps_done() < o.steps) {
    auto t0 = clock::now();
    double loss = 0;
    try {
      loss = trainer.step();
    } catch (const std::runtime_error& e) {  // NonFiniteError, AnomalyError: the parameters are those of the last step
      if (tty) fmt::print(out, "\n");
      std::fflush(out);
      if (o.checkpoint.empty()) throw;
      const std::string held = r.saved_at >= 0 ? fmt::format("{} holds step {}", o.checkpoint, r.saved_at)
                                               : fmt::format("{} was not written by this run", o.checkpoint);
      if (dynamic_cast<const AnomalyError*>(&e)) throw AnomalyError(std::string(e.what()) + "; nothing saved at this step; " + held);
      throw optim::NonFiniteError(std::string(e.what()) + "; nothing saved at this step; " + held);
    }
    train_seconds += since(t0);
    tokens += trainer.last_batch_tokens();
    loss_sum += loss;
    ++window_steps;
    const int64_t step = trainer.steps_done();
    const double tps = tokens / std::max(train_seconds, 1e-9);
    const double elapsed = since(start);
    const double eta = elapsed / static_cast<double>(step - first) * static_cast<double>(o.steps - step);
    const std::string line = fmt::format("step {}/{} loss {:.4f} lr {:.2e} {:.0f} tok/s elapsed {} ETA {}", step,
                                         o.steps, loss, trainer.current_lr(), tps, duration(elapsed), duration(eta));
    if (tty) {
      fmt::print(out, "\r{}\x1b[K", line);
      std::fflush(out);
    } else if (step % loop.log_every == 0) {
      fmt::print(out, "{}\n", line);
      std::fflush(out);
    }
    const bool at_end = step == o.steps;
    if ((step % o.eval_every == 0 || at_end) && lead) {
      r.last = trainer.evaluate(loop.samples);
      evaluated = true;
      if (tty) fmt::print(out, "\n");
      fmt::print(out, "eval step {}: exact_match {:.4f} token_acc {:.4f} ({} held-out sequences)\n", step,
                 r.last.exact_match, r.last.token_acc, trainer.eval_set().size());
      for (auto& [ex, got] : r.last.samples)
        fmt::print(out, "  {} -> {}{}\n", join(ex.src), join(got), got == ex.tgt ? "" : "  (wrong)");
      if (metrics) {
        std::fprintf(metrics, "%lld,%.6f,%.6g,%.6f,%.6f,%.1f\n", static_cast<long long>(step),
                     loss_sum / static_cast<double>(window_steps), trainer.current_lr(), r.last.exact_match,
                     r.last.token_acc, tps);
        std::fflush(metrics);
      }
      loss_sum = 0;
      window_steps = 0;
      std::fflush(out);
    }
    bool reached = evaluated && o.target_exact_match > 0 && r.last.exact_match >= o.target_exact_match &&
                   step % o.eval_every == 0;
    if (many && o.target_exact_match > 0 && step % o.eval_every == 0)  // rank 0 decides for all
      reached = dist::allreduce(reached ? 1.0 : 0.0) > 0;
    if (lead && !o.checkpoint.empty() && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || at_end || reached)) {
      trainer.save(o.checkpoint);
      r.saved_at = step;
    }
    if (reached) break;
  }
  if (!evaluated && lead) r.last = trainer.evaluate(0);
  r.steps = trainer.steps_done();
  r.seconds = since(start);
  fmt::print(out, "final task={} steps={} exact_match={:.3f} token_acc={:.3f} seconds={:.1f}\n", task_name(o.task.task),
             r.steps, r.last.exact_match, r.last.token_acc, r.seconds);
  std::fflush(out);
  return r;
}

}  // namespace xg::train
