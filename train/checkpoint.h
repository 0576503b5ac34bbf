// Checkpoint files of the training loop: the checks before training starts,
// the comparison of a resumed run with the file, and what inference reads.
#pragma once

#include <map>
#include <string>

#include "autograd/serialize.h"

namespace xg::train {

// Fails early when training could not save: `path` must not be a directory,
// and its directory must exist and accept a new file (a probe file is created
// and removed). Throws std::runtime_error naming the path and the reason.
void check_writable(const std::string& path);

// Throws std::invalid_argument "checkpoint PATH was written by a different
// run: KEY THERE in the file, HERE here; ..." listing only the keys of `mine`
// whose value differs in `meta`; a key in `summarised` (long values, such as
// a vocabulary) is written as `summarised` says ("vocab differs").
void check_same_run(const Metadata& mine, const Metadata& meta, const std::string& path,
                    const Metadata& summarised = {});

// What split_state returns.
struct SplitState {
  // model: the model's state dict, model.NAME as NAME.
  std::map<std::string, Tensor> model, optim;  // the optimiser's, optim.NAME as NAME
};
// A checkpoint's tensors: "model.*" and "optim.*" with the prefix removed;
// any other name is a FormatError naming it.
SplitState split_state(const std::map<std::string, Tensor>& all, const std::string& path);

// What load_for_inference returns.
struct InferenceCheckpoint {
  Metadata metadata;                      // the file's, all of it
  std::map<std::string, Tensor> weights;  // by parameter name, for Module::load_state_dict
};
// What inference needs of a checkpoint written by train::Trainer::save: its
// metadata, and the weights the finished run was scored with (the mean of
// its snapshots, average.NAME, where it averaged; else model.NAME), prefix
// removed. Throws FormatError "checkpoint PATH was not written by PROGRAM
// (no kind=KIND in its metadata)" for another application's file.
InferenceCheckpoint load_for_inference(const std::string& path, const std::string& kind, const std::string& program);

// metadata[key], or a FormatError naming the file and the missing key.
const std::string& metadata_string(const Metadata& metadata, const std::string& key, const std::string& path);

}  // namespace xg::train
