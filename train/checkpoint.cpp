#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace xg::train {

void check_writable(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error("checkpoint " + path + " is a directory, not a file");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw std::runtime_error("checkpoint " + path + ": cannot create a file in " + dir + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_same_run(const Metadata& mine, const Metadata& meta, const std::string& path, const Metadata& summarised) {
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

const std::string& metadata_string(const Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata has no '" + key + "'");
  return it->second;
}

InferenceCheckpoint load_for_inference(const std::string& path, const std::string& kind, const std::string& program) {
  InferenceCheckpoint c;
  // The loader checks every size against the bytes present: what it allocates is bounded by the file.
  auto all = load_tensors(path, &c.metadata);
  auto k = c.metadata.find("kind");
  if (k == c.metadata.end() || k->second != kind)
    throw FormatError("checkpoint " + path + " was not written by " + program + " (no kind=" + kind +
                      " in its metadata)");
  std::map<std::string, Tensor> average;
  for (auto& [name, v] : all) {
    if (name.rfind("model.", 0) == 0) c.weights[name.substr(6)] = v;
    if (name.rfind("average.", 0) == 0) average[name.substr(8)] = v;
  }
  const bool finished = c.metadata.count("finished") && c.metadata.at("finished") == "1";
  if (finished && !average.empty())
    for (auto& [name, v] : average) {
      if (!c.weights.count(name))
        throw FormatError("checkpoint " + path + ": average." + name + " has no model." + name + " beside it");
      c.weights[name] = v;
    }
  return c;
}

}  // namespace xg::train
