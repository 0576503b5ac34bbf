// xg_export: a checkpoint of a shipped model written as ONNX graphs plus a
// manifest.json, by the model family its metadata names (the Transformer,
// the GPT, the recurrent encoder-decoder, the image classifiers). One entry
// per family in a table (xg_export.cpp, families()); an unknown kind is
// refused by name.
#pragma once

#include <string>
#include <vector>

namespace xg::xg_export {

// What export_checkpoint wrote: the family and the graph files, in OUTDIR.
struct Exported {
  std::string family;              // "transformer", "gpt"
  std::vector<std::string> files;  // the graphs, then "manifest.json"
};

// Reads `checkpoint` (any application's: its metadata "kind" says which) and
// writes its graphs and manifest.json into `outdir`, created if it does not
// exist (its parent folder must). Throws std::runtime_error for a folder
// that cannot be written (before reading anything), the checkpoint's errors
// (FormatError: damaged, not a checkpoint, missing keys), and
// std::invalid_argument naming an unknown kind. No file appears before all
// are written: they go into a temporary folder inside an existing `outdir`
// and are renamed into it at the end; a new `outdir` is written whole under
// another name beside it and renamed into place. Any error removes what was
// written.
Exported export_checkpoint(const std::string& checkpoint, const std::string& outdir);

// The checkpoint kinds (metadata "kind") that export, sorted.
std::vector<std::string> exported_kinds();

}  // namespace xg::xg_export
