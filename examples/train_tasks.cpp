// Trains the Transformer on the copy or reverse task.
//
//   train_tasks [--task copy|reverse] [--steps N] [--checkpoint PATH [--resume]] ...
//   train_tasks --help
//
// Prints a progress line (in place on a terminal), an evaluation with greedy
// decoding every --eval-every steps, and finally one line for scripts:
//   final task=copy steps=N exact_match=0.998 token_acc=0.999 seconds=12.3
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "autograd/autograd.h"
#include "examples/seq2seq/tasks.h"

using namespace xg;
using seq2seq::TrainOptions;

namespace {

struct Flag {
  std::string help;
  std::function<void(const std::string&)> set;
  std::string default_value;
};

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

}  // namespace

int main(int argc, char** argv) {
  TrainOptions o;
  o.model.d_model = 64;
  o.model.heads = 4;
  o.model.layers = 2;
  o.model.d_ff = 256;
  o.model.dropout = 0.0;
  o.task.vocab = 16;
  o.task.min_len = 1;
  o.task.max_len = 10;
  o.steps = 3000;
  o.target_exact_match = 0.99;
  int threads = 1;
  std::string precision = "f32";
  int64_t log_every = 50;
  std::string metrics_path;
  bool quiet_samples = false;

  std::map<std::string, Flag> flags;
  // A finite number, and for integer targets a whole one in the target's
  // range: "1.5", "nan" and "1e30" are refused, never truncated or wrapped.
  auto num = [](const std::string& name, auto& target) {
    return [&target, name](const std::string& v) {
      using T = std::remove_reference_t<decltype(target)>;
      double d = 0;
      try {
        size_t used = 0;
        d = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw std::invalid_argument("--" + name + ": expected a number, got '" + v + "'");
      }
      if (!std::isfinite(d)) throw std::invalid_argument("--" + name + ": expected a finite number, got '" + v + "'");
      if constexpr (std::is_integral_v<T>) {
        constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
        if (d != std::floor(d) || d < double(lo) || d > double(hi))
          throw std::invalid_argument(fmt::format("--{}: expected a whole number from {} to {}, got '{}'", name, lo, hi, v));
      }
      target = static_cast<T>(d);
    };
  };
  // A switch: --name alone, or --name 0/1 (=false/true); anything else is refused
  // (`--resume=yes` used to mean "no").
  auto flag = [](const std::string& name, bool& target) {
    return [&target, name](const std::string& v) {
      if (v == "1" || v == "true") target = true;
      else if (v == "0" || v == "false") target = false;
      else throw std::invalid_argument("--" + name + ": expected 0 or 1 (or true/false), got '" + v + "'");
    };
  };
  auto add = [&](const std::string& name, const std::string& help, std::function<void(const std::string&)> set,
                 std::string def) { flags[name] = Flag{help, std::move(set), std::move(def)}; };
  add("task", "copy or reverse", [&](const std::string& v) { o.task.task = seq2seq::parse_task(v); }, "copy");
  add("vocab", "vocabulary size, with the 3 special tokens", num("vocab", o.task.vocab), "16");
  add("min-len", "shortest sequence", num("min-len", o.task.min_len), "1");
  add("max-len", "longest sequence", num("max-len", o.task.max_len), "10");
  add("layers", "encoder and decoder layers (N)", num("layers", o.model.layers), "2");
  add("d-model", "model width (C)", num("d-model", o.model.d_model), "64");
  add("heads", "attention heads (H)", num("heads", o.model.heads), "4");
  add("d-ff", "feed-forward width", num("d-ff", o.model.d_ff), "256");
  add("dropout", "dropout probability", num("dropout", o.model.dropout), "0");
  add("pre-norm", "1: pre-norm layers, 0: the paper's post-norm",
      flag("pre-norm", o.model.pre_norm), "0");
  add("batch", "sequences per step (B)", num("batch", o.batch_size), "64");
  add("steps", "most training steps", num("steps", o.steps), "3000");
  add("target", "stop at this held-out exact match (0: run all steps)", num("target", o.target_exact_match), "0.99");
  add("schedule", "noam, constant or warmup_linear", [&](const std::string& v) { o.schedule = v; }, "noam");
  add("lr", "noam: factor; otherwise the peak learning rate", num("lr", o.lr), "1");
  add("warmup", "warmup steps", num("warmup", o.warmup), "200");
  add("smoothing", "label smoothing", num("smoothing", o.label_smoothing), "0.1");
  add("clip", "gradient norm clip (0: off)", num("clip", o.clip_norm), "1");
  add("seed", "random seed", num("seed", o.seed), "1");
  add("threads",
      "threads of xgrad's pool, which runs every kernel and splits every matrix product (oneDNN and OpenBLAS run "
      "at 1 thread inside it); at most the cores this process may use",
      num("threads", threads), "1");
  add("precision", "f32, or bf16: matrix products in bf16 with float32 accumulation (needs AVX512_BF16)",
      [&](const std::string& v) { precision = v; }, "f32");
  add("eval-every", "steps between evaluations", num("eval-every", o.eval_every), "100");
  add("eval-size", "held-out sequences", num("eval-size", o.eval_size), "1000");
  add("log-every", "steps between progress lines when not on a terminal", num("log-every", log_every), "50");
  add("checkpoint", "checkpoint file (safetensors)", [&](const std::string& v) { o.checkpoint = v; }, "");
  add("checkpoint-every", "steps between checkpoints (0: at the end only)", num("checkpoint-every", o.checkpoint_every), "0");
  add("resume", "1: continue from --checkpoint if it exists",
      flag("resume", o.resume), "0");
  add("metrics", "CSV file of evaluation rows", [&](const std::string& v) { metrics_path = v; }, "");
  add("detect-anomaly",
      "1: check every op's output and every gradient for NaN/Inf and stop at the first, naming the op and module "
      "(slower; without it a non-finite loss or gradient norm still stops the run, naming the step)",
      flag("detect-anomaly", o.detect_anomaly), "0");
  add("no-samples", "1: do not print sample decodes",
      flag("no-samples", quiet_samples), "0");

  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::printf("usage: %s [--flag value ...]\n", argv[0]);
        for (auto& [name, f] : flags)
          std::printf("  --%-17s %s (default %s)\n", name.c_str(), f.help.c_str(),
                      f.default_value.empty() ? "none" : f.default_value.c_str());
        return 0;
      }
      if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "' (try --help)");
      std::string name = a.substr(2), value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (name == "resume" || name == "pre-norm" || name == "no-samples" || name == "detect-anomaly") {
        value = (i + 1 < argc && (std::string(argv[i + 1]) == "0" || std::string(argv[i + 1]) == "1")) ? argv[++i] : "1";
      } else {
        if (i + 1 >= argc) throw std::invalid_argument("--" + name + " needs a value");
        value = argv[++i];
      }
      auto it = flags.find(name);
      if (it == flags.end()) throw std::invalid_argument("unknown flag --" + name + " (try --help)");
      it->second.set(value);
    }
    if (o.resume && o.checkpoint.empty()) throw std::invalid_argument("--resume needs --checkpoint");
    for (const auto& [name, value] : {std::pair<const char*, int64_t>{"eval-every", o.eval_every}, {"log-every", log_every}})
      if (value < 1) throw std::invalid_argument(fmt::format("--{} {}: expected at least 1", name, value));
    if (threads < 1 || threads > available_cores())
      throw std::invalid_argument(fmt::format("--threads {}: expected 1..{} (the cores this process may use)", threads,
                                              available_cores()));
    set_num_threads(threads);
    o.precision = parse_precision(precision);
    if (o.precision == Precision::bf16 && !bf16_unsupported_reason().empty())
      throw std::invalid_argument("--precision bf16: " + bf16_unsupported_reason());

    seq2seq::Trainer trainer(o);
    if (o.resume && access(o.checkpoint.c_str(), R_OK) == 0) {
      trainer.load(o.checkpoint);
      std::printf("resumed from %s at step %lld\n", o.checkpoint.c_str(), static_cast<long long>(trainer.steps_done()));
    }
    const auto& cfg = trainer.options().model;
    std::printf("task=%s vocab=%lld len=%lld..%lld | Transformer N=%lld d_model=%lld heads=%lld d_ff=%lld dropout=%g "
                "%s | %lld parameters | batch %lld, %s schedule, %d thread%s, %s\n",
                seq2seq::task_name(o.task.task), (long long)o.task.vocab, (long long)o.task.min_len,
                (long long)o.task.max_len, (long long)cfg.layers, (long long)cfg.d_model, (long long)cfg.heads,
                (long long)cfg.d_ff, cfg.dropout, cfg.pre_norm ? "pre-norm" : "post-norm",
                (long long)trainer.model().num_parameters(), (long long)o.batch_size, o.schedule.c_str(), threads,
                threads == 1 ? "" : "s", precision_name(o.precision));
    std::fflush(stdout);

    std::FILE* metrics = nullptr;
    if (!metrics_path.empty()) {
      bool fresh = !(o.resume && access(metrics_path.c_str(), R_OK) == 0);
      metrics = std::fopen(metrics_path.c_str(), fresh ? "w" : "a");
      if (!metrics) throw std::runtime_error("cannot open metrics file " + metrics_path);
      if (fresh) std::fprintf(metrics, "step,loss,lr,exact_match,token_acc,tokens_per_s\n");
    }

    const bool tty = isatty(STDOUT_FILENO);
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    double train_seconds = 0, loss_sum = 0;
    int64_t tokens = 0, window_steps = 0;
    seq2seq::EvalResult last;
    bool evaluated = false;
    const int64_t first = trainer.steps_done();
    int64_t saved_at = -1;  // step of the last checkpoint this run wrote
    while (trainer.steps_done() < o.steps) {
      auto t0 = clock::now();
      double loss = 0;
      try {
        loss = trainer.step();
      } catch (const std::runtime_error& e) {  // NonFiniteError, AnomalyError: the parameters are those of the last step
        if (tty) std::printf("\n");
        if (metrics) std::fclose(metrics);
        std::fprintf(stderr, "train_tasks: %s\n", e.what());
        if (!o.checkpoint.empty())
          std::fprintf(stderr, "train_tasks: nothing saved at this step; %s\n",
                       saved_at >= 0 ? fmt::format("{} holds step {}", o.checkpoint, saved_at).c_str()
                                     : fmt::format("{} was not written by this run", o.checkpoint).c_str());
        return 1;
      }
      train_seconds += since(t0);
      tokens += trainer.last_batch_tokens();
      loss_sum += loss;
      ++window_steps;
      const int64_t step = trainer.steps_done();
      const double tps = tokens / std::max(train_seconds, 1e-9);
      const double elapsed = since(start);
      const double eta = elapsed / (step - first) * (o.steps - step);
      std::string line = fmt::format("step {}/{} loss {:.4f} lr {:.2e} {:.0f} tok/s elapsed {} ETA {}", step, o.steps,
                                     loss, trainer.current_lr(), tps, duration(elapsed), duration(eta));
      if (tty) {
        std::printf("\r%s\x1b[K", line.c_str());
        std::fflush(stdout);
      } else if (step % log_every == 0) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
      const bool at_end = step == o.steps;
      if (step % o.eval_every == 0 || at_end) {
        last = trainer.evaluate(quiet_samples ? 0 : 3);
        evaluated = true;
        if (tty) std::printf("\n");
        std::printf("eval step %lld: exact_match %.4f token_acc %.4f (%zu held-out sequences)\n", (long long)step,
                    last.exact_match, last.token_acc, trainer.eval_set().size());
        for (auto& [ex, out] : last.samples)
          std::printf("  %s -> %s%s\n", join(ex.src).c_str(), join(out).c_str(), out == ex.tgt ? "" : "  (wrong)");
        if (metrics) {
          std::fprintf(metrics, "%lld,%.6f,%.6g,%.6f,%.6f,%.1f\n", (long long)step, loss_sum / window_steps,
                       trainer.current_lr(), last.exact_match, last.token_acc, tps);
          std::fflush(metrics);
        }
        loss_sum = 0;
        window_steps = 0;
        std::fflush(stdout);
      }
      const bool reached = evaluated && o.target_exact_match > 0 && last.exact_match >= o.target_exact_match &&
                           step % o.eval_every == 0;
      if (!o.checkpoint.empty() && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || at_end || reached)) {
        trainer.save(o.checkpoint);
        saved_at = step;
      }
      if (reached) break;
    }
    if (!evaluated) last = trainer.evaluate(0);
    if (metrics) std::fclose(metrics);
    std::printf("final task=%s steps=%lld exact_match=%.3f token_acc=%.3f seconds=%.1f\n",
                seq2seq::task_name(o.task.task), (long long)trainer.steps_done(), last.exact_match, last.token_acc,
                since(start));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tasks: %s\n", e.what());
    return 2;
  }
}
