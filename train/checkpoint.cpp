#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace xg::train {

namespace {

// The folder holding `path` ("." for a bare name).
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// Whether a new file can be created in `dir`: a probe file, created and
// removed, named as save_tensors names its temporary file (PATH.tmp.PID) for
// a file, so that a name too long is found too.
void check_can_create(const Output& o, const std::string& dir) {
  const std::string probe =
      (o.folder ? (dir == "/" ? "" : dir) + "/.xgrad-probe" : o.path + ".tmp") + "." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw std::runtime_error(o.name + " " + o.path + ": cannot create a file in " + dir + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

// The file `path` names once links are resolved (its folder's, for a file that does not exist yet).
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) return buf;
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (::realpath(folder_of(path).c_str(), buf)) return std::string(buf) + "/" + base;
  return path;
}

}  // namespace

void check_outputs(const std::vector<Output>& outputs) {
  std::vector<std::pair<std::string, const Output*>> files;  // resolved path, output
  for (const Output& o : outputs) {
    if (o.path.empty()) continue;
    struct stat st;
    const bool exists = ::stat(o.path.c_str(), &st) == 0;
    if (o.folder) {
      if (!exists) throw std::runtime_error(o.name + " " + o.path + ": no such folder");
      if (!S_ISDIR(st.st_mode)) throw std::runtime_error(o.name + " " + o.path + " is not a folder");
      check_can_create(o, o.path);
      continue;
    }
    if (exists && S_ISDIR(st.st_mode)) throw std::runtime_error(o.name + " " + o.path + " is a directory, not a file");
    if (exists && !S_ISREG(st.st_mode))
      throw std::runtime_error(o.name + " " + o.path +
                               " is not a regular file (a device, pipe or socket): refusing to replace it");
    const std::string dir = folder_of(o.path);
    struct stat d;
    if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode))
      throw std::runtime_error(o.name + " " + o.path + ": the folder " + dir + " does not exist");
    check_can_create(o, dir);
    const std::string r = resolved(o.path);
    for (const auto& [other, by] : files)
      if (other == r)
        throw std::runtime_error(by->name + " " + by->path + " and " + o.name + " " + o.path +
                                 " are the same file: one would destroy the other");
    files.emplace_back(r, &o);
  }
}

std::map<std::string, Tensor> load_checkpoint(const std::string& path, Metadata& metadata, bool allow_non_finite) {
  auto all = load_tensors(path, &metadata);
  if (!metadata.count(kChecksumKey))
    std::fprintf(stderr, "warning: checkpoint %s has no checksums (written by an older xgrad): its bytes are not verified\n",
                 path.c_str());
  if (!allow_non_finite)
    for (const auto& [name, t] : all) {
      const int64_t bad = first_nonfinite(t);
      if (bad >= 0)
        throw FormatError(fmt::format("checkpoint {}: tensor '{}' holds {} at element {} (of {}): refusing a "
                                      "non-finite checkpoint",
                                      path, name, t.dtype() == Dtype::f32 ? double{t.data<float>()[bad]} : t.data<double>()[bad], bad, t.numel()));
    }
  return all;
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

InferenceCheckpoint load_for_inference(const std::string& path, const std::string& kind, const std::string& program,
                                       bool allow_non_finite) {
  InferenceCheckpoint c;
  // The loader checks every size against the bytes present: what it allocates is bounded by the file.
  auto all = load_checkpoint(path, c.metadata, allow_non_finite);
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
