#include "apps/common/program.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <stdexcept>

#include "autograd/autograd.h"
#include "distributed/dist.h"

namespace xg::cli {

int run_program(const char* program, int& argc, char**& argv, const Parsed& parsed, int64_t threads,
                const std::function<int()>& body) {
  if (!parsed.run) {
    std::fprintf(parsed.exit_code ? stderr : stdout, "%s\n", parsed.message.c_str());
    return parsed.exit_code;
  }
  try {
    dist::Environment env(&argc, &argv);
    try {
      // Default: XG_NUM_THREADS / OMP_NUM_THREADS when set, else this process's cores.
      if (threads > 0) set_num_threads(static_cast<int>(threads));
      else if (!std::getenv("XG_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS"))
        set_num_threads(dist::cores_per_rank());
      return body();
    } catch (const std::exception& e) {
      if (dist::world_size() == 1) throw;
      dist::abort(1, std::string(program) + ": rank " + std::to_string(dist::rank()) + ": " + e.what());
    }
  } catch (const std::bad_alloc&) {  // what was being built is named where that is known (models/config.h)
    std::fprintf(stderr, "%s: out of memory\n", program);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 1;
}

int for_each_line(const char* program, const std::vector<std::string>& inputs,
                  const std::function<std::string(const std::string& line, int64_t number)>& one) {
  int64_t line_no = 0, refused = 0;
  auto run = [&](const std::string& line) {
    ++line_no;
    std::string out;
    try {
      out = one(line, line_no);
    } catch (const std::invalid_argument& e) {
      if (++refused <= kMaxLineErrors)
        std::fprintf(stderr, "%s: line %lld: %s\n", program, static_cast<long long>(line_no), e.what());
    }
    std::printf("%s\n", out.c_str());
    std::fflush(stdout);
  };
  if (!inputs.empty()) {
    for (const std::string& s : inputs) run(s);
  } else {
    for (std::string s; std::getline(std::cin, s);) {
      if (!s.empty() && s.back() == '\r') s.pop_back();
      run(s);
    }
  }
  if (refused > kMaxLineErrors)
    std::fprintf(stderr, "%s: %lld more lines refused (the first %d are shown)\n", program,
                 static_cast<long long>(refused - kMaxLineErrors), static_cast<int>(kMaxLineErrors));
  return refused > 0 ? 1 : 0;
}

}  // namespace xg::cli
