#include "apps/seq2seq/cli.h"

#include "apps/common/cli.h"

namespace xg::seq2seq {

using namespace train;
using namespace cli;

TrainCommand::TrainCommand() : train(default_recipe()) {
  job.model.d_model = 64;
  job.model.heads = 4;
  job.model.layers = 2;
  job.model.d_ff = 256;
  job.model.dropout = 0.0;
  job.rnn.embed = 64;
  job.rnn.hidden = 64;
  job.rnn.layers = 1;
  job.task.vocab = 16;
  job.task.min_len = 1;
  job.task.max_len = 10;
  train.steps = 3000;
  loop.target_metric = "exact_match";
  loop.target = 0.99;
}

Parsed parse_train_command(int argc, const char* const* argv, TrainCommand& cmd) {
  using L = OptionLimits;
  Seq2SeqOptions& o = cmd.job;
  std::string task = task_name(o.task.task);
  TrainWords words;
  bool no_samples = false;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Trains the Transformer (or, with --model rnn, a recurrent encoder-decoder) on the copy or reverse task. Prints a progress line, an evaluation by greedy decoding "
        "every --eval-every steps, and a last line for scripts: final task=copy steps=N exact_match=... seconds=...");
    add_word(app, "--task", task, {"copy", "reverse"}, "the task");
    add_int(app, "--vocab", o.task.vocab, kFirstSymbol + 1, L::vocab, "vocabulary size, with the 3 special tokens");
    add_int(app, "--min-len", o.task.min_len, 1, L::length, "shortest sequence");
    add_int(app, "--max-len", o.task.max_len, 1, L::length, "longest sequence");
    add_seq2seq_model_options(app, o.model_kind, o.model, o.rnn);
    add_flag(app, "--pre-norm", o.model.pre_norm, "pre-norm layers (default: the paper's post-norm)");
    add_int(app, "--batch", o.batch_size, 1, L::batch, "sequences per step (B), split over processes under mpirun");
    add_smoothing(app, o.label_smoothing);
    add_int(app, "--eval-size", o.eval_size, 1, L::eval_size, "held-out sequences");
    add_real(app, "--target", cmd.loop.target, 0, 1, "stop at this held-out exact match (0: run all steps)");
    add_train_options(app, cmd.train, words, "stop once training has taken this many seconds (0: no limit)");
    add_threads(app, cmd.threads);
    add_loop_options(app, cmd.loop,
                     "continue from --checkpoint when that file exists (same task and model, else an error listing "
                     "what differs); without it, an existing checkpoint is overwritten");
    add_flag(app, "--no-samples", no_samples, "do not print sample decodes");
  };
  auto check = [&] {
    o.task.task = parse_task(task);
    o.samples = no_samples ? 0 : 3;
    o.seed = cmd.train.seed;
    check_loop_options(cmd.loop);
    check_heads(o.model);
    take_shared_rnn_options(o.model, o.rnn);
    if (o.task.max_len < o.task.min_len)
      throw std::invalid_argument(fmt::format("--max-len {} is below --min-len {}", o.task.max_len, o.task.min_len));
    check_train_options(cmd.train, words);
    o.validate();
  };
  return parse_with("train_tasks", argc, argv, setup, check);
}

Parsed parse_decode_command(int argc, const char* const* argv, DecodeCommand& cmd) {
  auto setup = [&](CLI::App& app) {
    app.description(
        "Decodes sequences with a checkpoint written by train_tasks: one output line per input line. Each argument "
        "after the options is one source sequence of token ids (\"3 4 5\"); with none, one sequence per line of "
        "stdin.");
    add_path(app, "--checkpoint", cmd.checkpoint, "checkpoint file written by train_tasks")->required();
    add_int(app, "--beam", cmd.beam, 1, OptionLimits::beam, "beam size (1: greedy)");
    add_real(app, "--alpha", cmd.alpha, 0, 10, "beam search length penalty ((5 + |Y|) / 6)^alpha");
    add_int(app, "--max-len", cmd.max_len, 0, models::ModelLimits::max_len,
            "most output tokens (0: twice the input plus 5; never past the model's positions)");
    add_int(app, "--threads", cmd.threads, 1, available_cores(), "threads of xgrad's pool");
    app.add_option("sequences", cmd.inputs, "source sequences (default: read stdin)")->type_name("IDS");
  };
  return parse_with("decode", argc, argv, setup, [] {});
}

}  // namespace xg::seq2seq
