// Private to train/*.cpp: the typed CLI11 options of xgrad's programs
// (whole numbers and finite reals in a range, one of a few words) and the
// parse that turns CLI11's outcome into a Parsed.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "train/cli.h"
#include "train/trainer.h"

namespace xg::train::cli_detail {

// A whole number (parse_whole_number) within [lo, hi].
inline int64_t parse_int(const std::string& name, const std::string& v, int64_t lo, int64_t hi) {
  const std::optional<int64_t> x = parse_whole_number(v);
  if (!x || *x < lo || *x > hi)
    throw CLI::ValidationError(fmt::format("{} {}: expected a whole number from {} to {}", name, v, lo, hi));
  return *x;
}

// A finite decimal number within [lo, hi] ("nan", "inf", "1x" are refused).
inline double parse_real(const std::string& name, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  const bool ok = !v.empty() && end == v.c_str() + v.size() && errno == 0 && std::isfinite(x) && x >= lo && x <= hi &&
                  v.find_first_of("xXnN") == std::string::npos;  // no hexadecimal floats, nan or inf
  if (!ok) throw CLI::ValidationError(fmt::format("{} {}: expected a number from {:g} to {:g}", name, v, lo, hi));
  return x;
}

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

inline CLI::Option* add_real(CLI::App& app, const std::string& name, double& target, double lo, double hi,
                      const std::string& help) {
  return app
      .add_option_function<std::string>(
          name, [&target, name, lo, hi](const std::string& v) { target = parse_real(name, v, lo, hi); },
          fmt::format("{} [{:g}..{:g}]", help, lo, hi))
      ->type_name("REAL")
      ->default_str(fmt::format("{:g}", target));
}

// One of a few words.
inline CLI::Option* add_word(CLI::App& app, const std::string& name, std::string& target, std::vector<std::string> words,
                      const std::string& help) {
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : ", ") + w;
  return app
      .add_option_function<std::string>(
          name,
          [&target, name, words, list](const std::string& v) {
            if (std::find(words.begin(), words.end(), v) == words.end())
              throw CLI::ValidationError(fmt::format("{} '{}': expected one of {}", name, v, list));
            target = v;
          },
          fmt::format("{} ({})", help, list))
      ->type_name("WORD")
      ->default_str(target);
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

inline CLI::Option* add_precision(CLI::App& app, std::string& precision) {
  return add_word(app, "--precision", precision, {"f32", "bf16"},
                  "bf16: matrix products in bf16 with float32 accumulation (needs AVX512_BF16)");
}

// --checkpoint, --checkpoint-every, --resume, --metrics.
inline void add_checkpoint_options(CLI::App& app, std::string& checkpoint, int64_t& every, bool& resume,
                                   std::string& metrics, const std::string& resume_help) {
  app.add_option("--checkpoint", checkpoint, "checkpoint file (safetensors), checked writable before step 1")
      ->type_name("PATH");
  add_int(app, "--checkpoint-every", every, 0, OptionLimits::steps, "steps between checkpoints (0: at the end only)");
  app.add_flag("--resume", resume, resume_help);
  app.add_option("--metrics", metrics, "CSV file of evaluation rows (appended to when resuming)")->type_name("PATH");
}

// The checks after parsing that every trainer makes, in this order.
template <class Config>
void check_common(bool resume, const std::string& checkpoint, const Config& c, Precision precision) {
  if (resume && checkpoint.empty()) throw std::invalid_argument("--resume needs --checkpoint PATH");
  if (c.d_model % c.heads != 0)
    throw std::invalid_argument(fmt::format("--d-model {} is not a multiple of --heads {}", c.d_model, c.heads));
  if (precision == Precision::bf16 && !bf16_unsupported_reason().empty())
    throw std::invalid_argument("--precision bf16: " + bf16_unsupported_reason());
}

inline void check_warmup(int64_t warmup, int64_t steps) {
  if (warmup >= steps) throw std::invalid_argument(fmt::format("--warmup {} must be below --steps {}", warmup, steps));
}

// Runs CLI11 and turns its outcome, or a check after it, into a Parsed.
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

}  // namespace xg::train::cli_detail
