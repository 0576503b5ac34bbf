#include "train/detail/checkpoint_io.h"

#include <fmt/format.h>
#include <unistd.h>

#include <stdexcept>

#include "autograd/serialize.h"

namespace xg::train::detail {

void check_same_run(const std::map<std::string, std::string>& mine, const std::map<std::string, std::string>& meta,
                    const std::string& path, const std::map<std::string, std::string>& summarised) {
  std::string diff;
  for (const auto& [key, here] : mine) {
    auto it = meta.find(key);
    const std::string there = it == meta.end() ? "(missing)" : it->second;
    if (there == here) continue;
    auto s = summarised.find(key);
    diff += (diff.empty() ? "" : "; ") +
            (s != summarised.end() ? s->second : key + " " + there + " in the file, " + here + " here");
  }
  if (!diff.empty())
    throw std::invalid_argument("checkpoint " + path + " was written by a different run: " + diff +
                                " (train with the same options, or choose another --checkpoint)");
}

SplitState split_state(const std::map<std::string, Tensor>& all, const std::string& path) {
  SplitState s;
  for (auto& [k, v] : all) {
    if (k.rfind("model.", 0) == 0) s.model[k.substr(6)] = v;
    else if (k.rfind("optim.", 0) == 0) s.optim[k.substr(6)] = v;
    else throw FormatError("checkpoint " + path + ": unexpected tensor '" + k + "'");
  }
  return s;
}

MetricsFile::MetricsFile(const std::string& path, const char* header, bool resumed) {
  if (path.empty()) return;
  const bool fresh = !(resumed && ::access(path.c_str(), F_OK) == 0);
  f_ = std::fopen(path.c_str(), fresh ? "w" : "a");
  if (!f_) throw std::runtime_error("cannot open the metrics file " + path);
  if (fresh) std::fprintf(f_, "%s\n", header);
}

MetricsFile::~MetricsFile() {
  if (f_) std::fclose(f_);
}

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

}  // namespace xg::train::detail
