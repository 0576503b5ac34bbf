// What a program's main() does around its parsed command line, without
// CLI11 (apps/common/cli.h parses; this is what the files that only run the
// result include): the outcome of parsing, the main() skeleton with its exit
// codes, and a loop over input lines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xg::cli {

// What parsing decided: run, or exit with `exit_code` after printing `message`
// (the --help text to stdout with 0; an error naming the option to stderr with 2).
struct Parsed {
  bool run = false;     // true: the program runs
  int exit_code = 0;    // else it exits with this: 0 after --help, 2 on an error
  std::string message;  // what to print before exiting
};

// A program's main() around `body`: prints `parsed`'s message and returns its
// exit code when it does not run; else starts MPI (under mpirun), sets the
// threads, and runs body(), whose return value is the exit code. An
// exception is printed "PROGRAM: what" on stderr with exit code 1; under
// mpirun with more than one process, with the rank, and it ends the whole
// job (MPI_Abort).
int run_program(const char* program, int& argc, char**& argv, const Parsed& parsed, int64_t threads,
                const std::function<int()>& body);

// Each line of `inputs`, or of stdin when there are none (a trailing '\r'
// removed), given to `one` with its number from 1; an empty line gives an
// empty output line. A std::invalid_argument from `one` is printed
// "PROGRAM: line N: what" on stderr (the first kMaxLineErrors of them, then
// one line counting the rest: `one` quotes input with quote_text), its
// output line left empty, and makes the result 1 (else 0): exactly one
// output line per input line.
inline constexpr int64_t kMaxLineErrors = 20;
int for_each_line(const char* program, const std::vector<std::string>& inputs,
                  const std::function<std::string(const std::string& line, int64_t number)>& one);

}  // namespace xg::cli
