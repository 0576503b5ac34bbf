// xg::onnx::export_model: a module's forward, traced once on example inputs,
// written as an ONNX model (opset 17) that ONNX Runtime and other runtimes
// read. Which ops export and how: docs/onnx.md. This header stays free of
// protobuf and ONNX's own headers: the library target xgrad_onnx links them.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg::nn {
class Module;
}

namespace xg::onnx {

// What export_model refuses: an op with no ONNX mapping (named, with the
// module that ran it), a graph it cannot write (an output that depends on no
// input, a reshape of dynamic axes it cannot express), or a model that
// ONNX's own checker rejects. Errors of the arguments are ShapeError (the
// example inputs) and std::invalid_argument (names, options); a file that
// cannot be written is std::runtime_error naming it.
class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One input of the graph: its name, the example the forward runs on, and a
// name for each axis that may change from run to run ("" keeps that axis at
// the example's size): {"x", x, {"B", ""}} for a batch of rows of fixed
// width. An empty `dynamic_axes` fixes every axis. Axes that share a name
// must share a size; give each dynamic axis an example size above 1 and
// unlike the others', so that reshapes can tell them apart.
struct Input {
  std::string name;
  Tensor example;                         // float32, float64 or int64 (ids)
  std::vector<std::string> dynamic_axes;  // one per axis of `example`, or none
};

struct ExportOptions {
  // One name per output of the forward; empty: "output" (one output) or
  // "output0", "output1", ...
  std::vector<std::string> output_names;
  std::string graph_name = "xgrad";
};

// The forward to trace: the examples in, the graph's outputs out.
using Forward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs forward once on the inputs' examples, with `model` in eval mode (its
// mode comes back afterwards) and an export trace (autograd/trace.h) on, and
// writes the ops that lead from the inputs to the outputs to `path`:
// parameters and buffers become initializers under their dotted names
// (named_parameters, named_buffers), other tensors the forward made without
// an input (masks, tables) constants. Ops that no output needs (a loss left
// out) are not written. The file is written whole or not at all (a
// temporary file renamed over `path`). Throws as ExportError says.
void export_model(nn::Module& model, const Forward& forward, const std::vector<Input>& inputs,
                  const std::string& path, const ExportOptions& options = {});
// The same for model.forward(x): one input, one output.
void export_model(nn::Module& model, const Input& input, const std::string& path, const ExportOptions& options = {});

// The ops (as record() names them) that export_model maps to ONNX, sorted.
std::vector<std::string> exported_ops();

}  // namespace xg::onnx
