// xg_export: a checkpoint of a shipped model written as ONNX graphs plus a
// manifest.json, by the model family its metadata names. One entry per
// family in a table (xg_export.cpp, families()); a family whose graphs are
// not written yet (the recurrent encoder-decoder, the vision models) is
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
// writes its graphs and manifest.json into `outdir`, an existing folder.
// Throws std::runtime_error for a folder that cannot be written (before
// reading anything), the checkpoint's errors (FormatError: damaged, not a
// checkpoint, missing keys), and std::invalid_argument naming an unknown
// kind or a family not exported yet. No file appears in `outdir` before all
// are written: they go into a temporary folder inside `outdir`, are renamed
// into it at the end, and the temporary folder is removed on any error.
Exported export_checkpoint(const std::string& checkpoint, const std::string& outdir);

// The checkpoint kinds (metadata "kind") that export, sorted.
std::vector<std::string> exported_kinds();

}  // namespace xg::xg_export
