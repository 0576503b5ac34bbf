// Private to onnx/*.cpp: the graph being built, as ONNX's generated protobuf
// classes, and the per-op emitters (onnx/emit_*.cpp) that map a traced op to
// ONNX nodes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/trace.h"

namespace xg::onnx::detail {

namespace pb = ::onnx;  // ONNX's own namespace (xg::onnx is ours)

// One axis of a value: its size in the traced run and, for an axis that may
// change, its name as the model declares it ("B", "T", "B*T").
struct Dim {
  int64_t size;
  std::string sym;  // "" for a fixed axis
};
using Dims = std::vector<Dim>;
std::string dims_str(const Dims& d);  // "(B, T, 16)"

// A tensor of the graph: its name there, and its axes.
struct Value {
  std::string name;  // "" for an absent optional input (linear's bias)
  Dims dims;
};

// Adds nodes and initializers to a graph, naming what it adds uniquely.
class GraphBuilder {
 public:
  explicit GraphBuilder(pb::GraphProto& g) : g_(g) {}
  // A node of `type` on `inputs`; returns the name of its (first) output.
  // `attrs` sets the node's attributes.
  std::string node(const std::string& type, const std::vector<std::string>& inputs,
                   const std::function<void(pb::NodeProto&)>& attrs = {});
  // Initializers: a tensor's values under `name`, and unnamed constants.
  void initializer(const std::string& name, const Tensor& t);
  std::string constant(const Tensor& t);
  std::string ints(const std::vector<int64_t>& v);  // 1-D int64
  std::string scalar(double v, Dtype d);           // 0-D of d
  std::string fresh(const std::string& hint);      // a name not used yet

 private:
  pb::GraphProto& g_;
  int64_t counter_ = 0;
};

// Attributes of a node.
void set_int(pb::NodeProto& n, const std::string& name, int64_t v);
void set_ints(pb::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);
void set_float(pb::NodeProto& n, const std::string& name, double v);

// Numpy broadcasting of two values' axes: an axis that may change wins over
// a fixed one (a fixed 1 stretches to it).
Dims broadcast(const Dims& a, const Dims& b);

// What an emitter gets: the op as traced, its inputs as graph values (in
// record()'s order, then the op's extra tensors), and the graph.
struct OpContext {
  const TracedOp& op;
  std::vector<Value> in;
  GraphBuilder& b;
};
// Emits the nodes of one op and returns its output (name and axes).
using Emitter = std::function<Value(const OpContext&)>;
const std::map<std::string, Emitter>& emitters();  // by record()'s op name
// Adds op's emitter to the table; a second emitter for one op throws
// std::logic_error naming it (the result may not depend on which came first).
void add_emitter(std::map<std::string, Emitter>& table, const std::string& op, Emitter e);
// The emitters of each family, one file each (onnx/emit_*.cpp), added to the
// table above: the core ops (emit_core.cpp), images (emit_vision.cpp),
// recurrent layers and what the recurrent models need besides
// (emit_recurrent.cpp), activations, comparisons and vector norms
// (emit_activation.cpp).
void add_vision_emitters(std::map<std::string, Emitter>& table);
void add_recurrent_emitters(std::map<std::string, Emitter>& table);
void add_activation_emitters(std::map<std::string, Emitter>& table);
// " (in SCOPE)" for an op a module ran, "" otherwise: how every export error names the module.
std::string in_module(const TracedOp& op);

pb::TensorProto_DataType onnx_type(Dtype d);

}  // namespace xg::onnx::detail
