// The command lines of xgrad's programs, on CLI11 (a program that includes
// this header needs Debian's libcli11-dev; the library does not install it):
// typed options (whole numbers and finite reals in a range, one of a few
// words, paths, flags) whose errors name the option and the accepted range,
// the option groups every training program shares, those of the model
// families the applications train, and parse_with. The main() skeleton with
// its exit codes is in program.h, which a file that only runs a parsed
// command line includes instead: CLI11 is header-only, and slow to compile
// in every file that includes it.
//
//   xg::train::TrainOptions t;
//   xg::train::LoopOptions l;
//   xg::cli::TrainWords words;
//   auto setup = [&](CLI::App& app) {
//     xg::cli::add_train_options(app, t, words, "stop after this many seconds (0: no limit)");
//     xg::cli::add_loop_options(app, l, "continue from --checkpoint when that file exists");
//   };
//   auto check = [&] { xg::cli::check_train_options(t, words); xg::cli::check_loop_options(l); };
//   xg::cli::Parsed p = xg::cli::parse_with("myprog", argc, argv, setup, check);
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "apps/common/program.h"
#include "apps/common/smoothing.h"
#include "autograd/autocast.h"
#include "autograd/serialize.h"
#include "models/seq2seq_model.h"
#include "nn/attention.h"
#include "train/loop.h"

namespace xg::cli {

// Limits of the programs' options (the parsers name them in their errors).
struct OptionLimits {
  // The largest value of each kind of option: the model's sizes, vocab, length
  // (of sequences), batch, steps (--steps, --warmup, --eval-every, ...), eval_size, beam.
  static constexpr int64_t vocab = 1 << 16, length = 1024, layers = 64, d_model = 8192, heads = 256, d_ff = 1 << 16,
                           batch = 1 << 16, steps = 1'000'000'000, eval_size = 1'000'000, beam = 64;
};


// A whole number (parse_whole_number) within [lo, hi].
inline int64_t parse_int(const std::string& name, const std::string& v, int64_t lo, int64_t hi) {
  try {
    return xg::parse_whole_number(name, v, lo, hi);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
}

// A finite decimal number within [lo, hi], or (lo, hi] when `above_lo`
// ("nan", "inf", "1x" are refused).
inline double parse_real(const std::string& name, const std::string& v, double lo, double hi, bool above_lo = false) {
  char* end = nullptr;
  errno = 0;
  const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  const bool ok = !v.empty() && end == v.c_str() + v.size() && errno == 0 && std::isfinite(x) &&
                  (above_lo ? x > lo : x >= lo) && x <= hi &&
                  v.find_first_of("xXnN") == std::string::npos;  // no hexadecimal floats, nan or inf
  if (!ok && above_lo)
    throw CLI::ValidationError(fmt::format("{} {}: expected a number above {:g}, at most {:g}", name, v, lo, hi));
  if (!ok) throw CLI::ValidationError(fmt::format("{} {}: expected a number from {:g} to {:g}", name, v, lo, hi));
  return x;
}

// Option `name` setting `target` to a whole number in [lo, hi] (parse_int);
// the help shows the range, and the default is target's current value.
template <class T>
CLI::Option* add_int(CLI::App& app, const std::string& name, T& target, int64_t lo, int64_t hi,
                     const std::string& help) {
  return app
      .add_option_function<std::string>(
          name, [&target, name, lo, hi](const std::string& v) { target = static_cast<T>(parse_int(name, v, lo, hi)); },
          fmt::format("{} [{}..{}]", help, lo, hi))
      ->type_name("INT")
      ->default_str(std::to_string(target));
}

// The same for a finite real in [lo, hi], or (lo, hi] when `above_lo` (parse_real).
inline CLI::Option* add_real(CLI::App& app, const std::string& name, double& target, double lo, double hi,
                             const std::string& help, bool above_lo = false) {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name, lo, hi, above_lo](const std::string& v) { target = parse_real(name, v, lo, hi, above_lo); },
          fmt::format("{} {}{:g}..{:g}]", help, above_lo ? "(" : "[", lo, hi))
      ->type_name("REAL")
      ->default_str(fmt::format("{:g}", target));
}

// --smoothing: label smoothing of the loss, from 0 to apps::kMaxLabelSmoothing.
inline CLI::Option* add_smoothing(CLI::App& app, double& target) {
  return add_real(app, "--smoothing", target, 0, apps::kMaxLabelSmoothing,
                  "label smoothing: the loss's target gives this much, spread evenly, to every class and the rest to "
                  "the true one (PyTorch's label_smoothing; 0: off)");
}

// A path (a file or a folder, as `type_name` says): "" is refused, since it
// would mean writing or reading nothing while the option was given.
inline CLI::Option* add_path(CLI::App& app, const std::string& name, std::string& target, const std::string& help,
                             const std::string& type_name = "PATH") {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name, type_name](const std::string& v) {
            if (v.empty()) throw CLI::ValidationError(fmt::format("{} '': expected a {}", name, type_name == "DIR" ? "folder" : "file path"));
            target = v;
          },
          help)
      ->type_name(type_name);
}

// A flag: `name` alone sets `target` true; name=true|false|1|0 sets it as
// said; any other value is refused (a flag never reads "yes" or "1e30" as true).
inline CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& target, const std::string& help) {
  return app.add_flag_function(name + "{true}", [](int64_t) {}, help)->each([&target, name](const std::string& v) {
    if (v == "true" || v == "1") target = true;
    else if (v == "false" || v == "0") target = false;
    else throw CLI::ValidationError(fmt::format("'{}': expected true, false, 1 or 0 ({} alone: true)", v, name));
  });
}

// One of a few words, each standing for a value of `target`: the help lists
// the words and shows the one of target's current value.
template <class T>
CLI::Option* add_choice(CLI::App& app, const std::string& name, T& target,
                        std::vector<std::pair<std::string, T>> choices, const std::string& help) {
  std::string list, shown;
  for (const auto& [word, value] : choices) {
    list += (list.empty() ? "" : ", ") + word;
    if (shown.empty() && value == target) shown = word;
  }
  if constexpr (std::is_same_v<T, std::string>)
    if (shown.empty()) shown = target;
  return app
      .add_option_function<std::string>(
          name,
          [&target, name, choices, list](const std::string& v) {
            for (const auto& [word, value] : choices)
              if (word == v) {
                target = value;
                return;
              }
            throw CLI::ValidationError(fmt::format("{} '{}': expected one of {}", name, v, list));
          },
          fmt::format("{} ({})", help, list))
      ->type_name("WORD")
      ->default_str(shown);
}

// One of a few words, kept as the word.
inline CLI::Option* add_word(CLI::App& app, const std::string& name, std::string& target, std::vector<std::string> words,
                             const std::string& help) {
  std::vector<std::pair<std::string, std::string>> choices;
  for (auto& w : words) choices.emplace_back(w, w);
  return add_choice(app, name, target, std::move(choices), help);
}

// The options every trainer shares, with one wording.

// --layers, --d-model, --heads, --d-ff, --dropout of a Transformer-like config.
template <class Config>
void add_model_options(CLI::App& app, Config& c, const std::string& layers_help) {
  add_int(app, "--layers", c.layers, 1, OptionLimits::layers, layers_help);
  add_int(app, "--d-model", c.d_model, 1, OptionLimits::d_model, "model width (C), a multiple of --heads");
  add_int(app, "--heads", c.heads, 1, OptionLimits::heads, "attention heads (H)");
  add_int(app, "--d-ff", c.d_ff, 1, OptionLimits::d_ff, "feed-forward width");
  add_real(app, "--dropout", c.dropout, 0, 0.99, "dropout probability");
}

// The options of an encoder-decoder program that trains either family:
// --model transformer|rnn, the Transformer's options (add_model_options), and
// the recurrent model's --cell, --attention, --embed, --hidden. The recurrent
// model takes --layers (its encoder's) and --dropout from the Transformer's
// options: call take_shared_rnn_options after parsing.
template <class TransformerConfig, class RNNConfig>
void add_seq2seq_model_options(CLI::App& app, models::Seq2SeqKind& kind, TransformerConfig& t, RNNConfig& r) {
  add_choice(app, "--model", kind, models::seq2seq_kinds(),
           "the encoder-decoder: the Transformer, or a recurrent one with attention (--cell, --attention, --embed, "
           "--hidden; --layers sets its encoder layers)");
  add_model_options(app, t, "encoder and decoder layers (N); with --model rnn, the encoder's layers");
  add_word(app, "--cell", r.cell, {"lstm", "gru"}, "--model rnn: the recurrent cell");
  add_word(app, "--attention", r.attention, {"bahdanau", "dot", "general", "concat"},
           "--model rnn: Bahdanau's additive attention, or Luong's score with input feeding");
  add_int(app, "--embed", r.embed, 1, OptionLimits::d_model, "--model rnn: embedding width (E)");
  add_int(app, "--hidden", r.hidden, 1, OptionLimits::d_model, "--model rnn: encoder width per direction (H)");
}
template <class TransformerConfig, class RNNConfig>
void take_shared_rnn_options(const TransformerConfig& t, RNNConfig& r) {
  r.layers = t.layers;
  r.dropout = t.dropout;
}

// --precision f32 or bf16 (matrix products under Autocast), as a word.
inline CLI::Option* add_precision(CLI::App& app, std::string& precision) {
  return add_word(app, "--precision", precision, {"f32", "bf16"},
                  "bf16: matrix products in bf16 with float32 accumulation (needs AVX512_BF16)");
}

// The options of train::TrainOptions given as words, held until check_train_options.
struct TrainWords {
  // --precision's word ("f32", "bf16").
  std::string precision, schedule;  // --schedule's word
};
// The recipe of a run (train::TrainOptions), as every training program offers it:
// --steps, --time-limit, --schedule, --lr, --warmup, --beta1, --beta2,
// --eps, --weight-decay, --clip, --seed, --average, --precision,
// --detect-anomaly. The options' current values are the defaults shown;
// `time_limit_help` says what the program's --time-limit does
// (train::TrainOptions::clock_schedule). Words are parsed into `o` by check_train_options.
void add_train_options(CLI::App& app, train::TrainOptions& o, TrainWords& words, const std::string& time_limit_help);
// After parsing: the words into `o`, then o.validate(true), the library's
// one check of a recipe, its messages naming the options (--warmup).
void check_train_options(train::TrainOptions& o, const TrainWords& words);

// The loop's options (train::LoopOptions): --eval-every, --log-every, --checkpoint,
// --checkpoint-every, --resume, --metrics.
void add_loop_options(CLI::App& app, train::LoopOptions& l, const std::string& resume_help);
void check_loop_options(const train::LoopOptions& l);  // l.validate(true): --resume needs --checkpoint

// --threads: 0 (the default) is every core this process may use, under
// mpirun its share of the host's (dist::cores_per_rank()), unless
// XG_NUM_THREADS or OMP_NUM_THREADS says otherwise.
CLI::Option* add_threads(CLI::App& app, int64_t& threads);

// d_model a multiple of heads, as the option names say it.
template <class Config>
void check_heads(const Config& c) {
  nn::require_heads_divide(c.d_model, c.heads, "", "--d-model", "--heads");
}

// Runs CLI11 and turns its outcome, or a check after it (which throws
// std::invalid_argument), into a Parsed.
template <class Setup, class Check>
Parsed parse_with(const char* program, int argc, const char* const* argv, Setup setup, Check check) {
  CLI::App app;
  app.name(program);
  setup(app);
  Parsed p;
  try {
    app.parse(argc, argv);
    check();
    p.run = true;
  } catch (const CLI::CallForHelp&) {
    const auto chosen = app.get_subcommands();  // "prog sub --help": the subcommand's help
    p.message = chosen.empty() ? app.help() : chosen.front()->help();
  } catch (const CLI::ParseError& e) {
    p.exit_code = 2;
    p.message = fmt::format("{}: {} (try --help)", program, e.what());
  } catch (const std::invalid_argument& e) {
    p.exit_code = 2;
    p.message = fmt::format("{}: {}", program, e.what());
  }
  return p;
}

}  // namespace xg::cli
