// Checkpoint files of the training loop: the checks before training starts,
// the comparison of a resumed run with the file, and what inference reads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autograd/serialize.h"

namespace xg::train {

// A file or folder a run writes, as a program's option names it.
struct Output {
  std::string name;     // "checkpoint", "--metrics": how the messages name it
  std::string path;     // "" = not written (skipped)
  bool folder = false;  // a folder that must exist, the files go into it (--out DIR)
};
// Fails before any work when a run could not write its outputs, or would
// destroy one with another: a file must not be a directory, a device or
// anything else but a regular file (save_tensors would refuse to replace it),
// and its folder must exist and accept a new file (a probe file is created
// and removed); a folder must exist and accept a new file; no two outputs
// may be the same file (compared after resolving links). Throws
// std::runtime_error naming the output, its path and the reason; nothing is
// left on disk.
void check_outputs(const std::vector<Output>& outputs);

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
// The tensors and metadata of a checkpoint written by Trainer::save, with the
// checks every reader of one makes: the file's checksums (load_tensors); a
// file written before checkpoints had them loads with a one-line warning on
// stderr; a tensor holding NaN or an infinity is a FormatError naming it and
// the first such element, unless `allow_non_finite` (a run that went wrong
// saves nothing, so such a file was damaged or written elsewhere).
std::map<std::string, Tensor> load_checkpoint(const std::string& path, Metadata& metadata, bool allow_non_finite = false);

// What inference needs of a checkpoint written by train::Trainer::save: its
// metadata, and the weights the finished run was scored with (the mean of
// its snapshots, average.NAME, where it averaged; else model.NAME), prefix
// removed, read by load_checkpoint. Throws FormatError "checkpoint PATH was
// not written by PROGRAM (no kind=KIND in its metadata)" for another
// application's file.
InferenceCheckpoint load_for_inference(const std::string& path, const std::string& kind, const std::string& program,
                                       bool allow_non_finite = false);

// metadata[key], or a FormatError naming the file and the missing key.
const std::string& metadata_string(const Metadata& metadata, const std::string& key, const std::string& path);

}  // namespace xg::train
