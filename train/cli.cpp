#include "train/cli.h"

#include "train/detail/cli_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "autograd/autograd.h"

namespace xg::train {

using namespace cli_detail;

TrainCommand::TrainCommand() {
  TrainOptions& o = train;
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
}

Parsed parse_train_command(int argc, const char* const* argv, TrainCommand& cmd) {
  using L = OptionLimits;
  TrainOptions& o = cmd.train;
  std::string task = task_name(o.task.task), precision = precision_name(o.precision);
  bool no_samples = false;
  int64_t threads = cmd.threads;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Trains the Transformer on the copy or reverse task. Prints a progress line, an evaluation by greedy decoding "
        "every --eval-every steps, and a last line for scripts: final task=copy steps=N exact_match=... seconds=...");
    add_word(app, "--task", task, {"copy", "reverse"}, "the task");
    add_int(app, "--vocab", o.task.vocab, kFirstSymbol + 1, L::vocab, "vocabulary size, with the 3 special tokens");
    add_int(app, "--min-len", o.task.min_len, 1, L::length, "shortest sequence");
    add_int(app, "--max-len", o.task.max_len, 1, L::length, "longest sequence");
    add_model_options(app, o.model, "encoder and decoder layers (N)");
    app.add_flag("--pre-norm", o.model.pre_norm, "pre-norm layers (default: the paper's post-norm)");
    add_int(app, "--batch", o.batch_size, 1, L::batch, "sequences per step (B)");
    add_int(app, "--steps", o.steps, 1, L::steps, "most training steps");
    add_real(app, "--target", o.target_exact_match, 0, 1, "stop at this held-out exact match (0: run all steps)");
    add_word(app, "--schedule", o.schedule, {"noam", "constant", "warmup_linear", "warmup_cosine"},
             "learning-rate schedule (warmup_cosine: linear warm-up, then a cosine down to --lr / 10 at --steps)");
    add_real(app, "--lr", o.lr, 0, 1e30, "noam: the factor; otherwise the peak learning rate");
    add_int(app, "--warmup", o.warmup, 0, L::steps, "warmup steps");
    add_real(app, "--smoothing", o.label_smoothing, 0, 0.999, "label smoothing");
    add_real(app, "--clip", o.clip_norm, 0, 1e6, "gradient norm clip (0: off)");
    add_int(app, "--seed", o.seed, 0, std::numeric_limits<int64_t>::max() / 2, "random seed");
    add_int(app, "--threads", threads, 1, available_cores(),
            "threads of xgrad's pool, which runs every kernel and splits every matrix product; at most the cores "
            "this process may use (default: all of them; under mpirun, this process's share of the host's cores)")
        ->default_str("cores per process");
    add_precision(app, precision);
    add_int(app, "--eval-every", o.eval_every, 1, L::steps, "steps between evaluations");
    add_int(app, "--eval-size", o.eval_size, 1, L::eval_size, "held-out sequences");
    add_int(app, "--log-every", cmd.loop.log_every, 1, L::steps, "steps between progress lines when not on a terminal");
    add_checkpoint_options(app, o.checkpoint, o.checkpoint_every, o.resume, cmd.loop.metrics,
                           "continue from --checkpoint when that file exists (same task and model, else an error "
                           "listing what differs); without it, an existing checkpoint is overwritten");
    app.add_flag("--detect-anomaly", o.detect_anomaly,
                 "check every op's output and gradient for NaN/Inf and stop at the first, naming the op and module "
                 "(slower; without it a non-finite loss or gradient norm still stops the run, naming the step)");
    app.add_flag("--no-samples", no_samples, "do not print sample decodes");
  };
  auto check = [&] {
    o.task.task = parse_task(task);
    o.precision = parse_precision(precision);
    cmd.threads = static_cast<int>(threads);
    cmd.loop.samples = no_samples ? 0 : 3;
    check_common(o.resume, o.checkpoint, o.model, o.precision);
    if (o.task.max_len < o.task.min_len)
      throw std::invalid_argument(fmt::format("--max-len {} is below --min-len {}", o.task.max_len, o.task.min_len));
    o.validate();
  };
  return parse_with("train_tasks", argc, argv, setup, check);
}

Parsed parse_decode_command(int argc, const char* const* argv, DecodeCommand& cmd) {
  int64_t threads = cmd.threads;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Decodes sequences with a checkpoint written by train_tasks: one output line per input line. Each argument "
        "after the options is one source sequence of token ids (\"3 4 5\"); with none, one sequence per line of "
        "stdin.");
    app.add_option("--checkpoint", cmd.checkpoint, "checkpoint file written by train_tasks")
        ->required()
        ->type_name("PATH");
    add_int(app, "--beam", cmd.beam, 1, OptionLimits::beam, "beam size (1: greedy)");
    add_real(app, "--alpha", cmd.alpha, 0, 10, "beam search length penalty ((5 + |Y|) / 6)^alpha");
    add_int(app, "--max-len", cmd.max_len, 0, ModelLimits::max_len,
            "most output tokens (0: twice the input plus 5; never past the model's positions)");
    add_int(app, "--threads", threads, 1, available_cores(), "threads of xgrad's pool");
    app.add_option("sequences", cmd.inputs, "source sequences (default: read stdin)")->type_name("IDS");
  };
  auto check = [&] { cmd.threads = static_cast<int>(threads); };
  return parse_with("decode", argc, argv, setup, check);
}

}  // namespace xg::train
