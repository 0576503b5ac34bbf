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
