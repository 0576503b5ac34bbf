// What a manifest says of one exported graph: its file, and the name, dtype
// and axes of each input and output, for a program that runs it (xg_export
// writes these into manifest.json).
#pragma once

#include <string>
#include <vector>

namespace xg::onnx {

// One input or output of a graph. `axes` holds a name for an axis that may
// change from run to run ("N", "S") and a number for a fixed one ("28").
struct ValueSignature {
  std::string name;
  std::string dtype;              // "float32", "float64" or "int64"
  std::vector<std::string> axes;  // per axis: its name if it may change ("B", "L+1"), else its size ("1", "64")
};

struct GraphSignature {
  std::string file;  // the graph's file name inside the output folder
  std::vector<ValueSignature> inputs, outputs;
};

// The inputs and outputs declared by the ONNX model at `path`; ExportError
// naming the file if it cannot be read or parsed as one.
GraphSignature read_signature(const std::string& path);

}  // namespace xg::onnx
