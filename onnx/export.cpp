// export_model: trace a forward, map each traced op to ONNX nodes, write.
//
// How the graph is captured. The tape (autograd/detail/impl.h, struct Node)
// keeps what backward needs: edges, input shapes, a closure. It keeps neither
// an op's attributes (a reshape's shape, a permute's order, a reduction's
// axes, layer norm's eps) nor its output tensor, nor the tensors that are not
// on it (an embedding's int64 ids, a constant mask), and it records nothing
// for ops whose inputs need no gradient. Rather than grow every Node of every
// training step by what only export reads, export opens a thread-local trace
// (autograd/trace.h, TraceGuard): while it is alive, record() (the one place
// every op goes through) also lists the op's name, inputs and the tensor it
// returns, and the module running it (NameScope); the few ops with
// attributes add them through detail::traced(), a template whose body runs
// only when a trace is alive and only on the entry of the tensor that op
// returned. Outside a trace that costs one thread-local test per op, and Node
// is unchanged (training-step figures in docs/onnx.md). The per-op logic stays
// in the op: the trace lists what the op computed with, so no shape rule or
// attribute is worked out twice; what a composed op should export as one
// (mean: a sum and a scaling) is relabelled by that op the same way.
//
// From the trace: the ops the outputs need are found by walking back from
// them through tensor identities (TensorImpl), in the order they ran; each
// becomes nodes through its emitter (onnx/emit_*.cpp), which also says which of
// its output's axes may change (batch, length), so that reshapes keep those
// to the runtime. Parameters and buffers become initializers under their
// dotted names; any other tensor an op read that no traced op made is a
// constant. ONNX's C++ checker runs on the model before it is written, and
// the file is written through write_file_atomically (autograd/serialize.h).
#include "onnx/export.h"

#include <onnx/checker.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "autograd/serialize.h"
#include "nn/module.h"
#include "onnx/detail/graph.h"
#include "onnx/graph_info.h"

namespace xg::onnx {

using detail::Dims;
using detail::Value;
namespace pb = detail::pb;

namespace {

constexpr int64_t kOpset = 17;

// One input's dynamic axes, checked against its example; `sizes` collects
// every name's size (a name seen before must have the same one).
void check_axes(const Input& in, std::map<std::string, int64_t>& sizes) {
  if (!in.dynamic_axes.empty() && static_cast<int64_t>(in.dynamic_axes.size()) != in.example.dim())
    throw ShapeError("export_model: input '" + in.name + "' has " + std::to_string(in.dynamic_axes.size()) +
                     " dynamic_axes names for an example of shape " + shape_str(in.example.shape()) +
                     ": give one per axis (\"\" for a fixed one), or none");
  for (size_t a = 0; a < in.dynamic_axes.size(); ++a) {
    const std::string& s = in.dynamic_axes[a];
    if (s.empty()) continue;
    const int64_t n = in.example.shape()[a];
    if (n < 2)
      throw ShapeError("export_model: input '" + in.name + "' axis " + std::to_string(a) + " ('" + s +
                       "') has size " + std::to_string(n) + " in the example: give a dynamic axis a size of at least 2");
    const auto [it, first] = sizes.emplace(s, n);
    if (!first && it->second != n)
      throw ShapeError("export_model: axis '" + s + "' has size " + std::to_string(n) + " in input '" + in.name +
                       "' but " + std::to_string(it->second) + " in an input before it: axes that share a name share a size");
  }
}

// The inputs' names and examples, and their dynamic axes (named, sized
// apart from each other: a reshape tells them apart by size).
void check_inputs(const std::vector<Input>& inputs) {
  if (inputs.empty()) throw std::invalid_argument("export_model: no inputs given (a graph needs at least one)");
  std::set<std::string> names;
  std::map<std::string, int64_t> sizes;
  for (const Input& in : inputs) {
    if (in.name.empty()) throw std::invalid_argument("export_model: an input has an empty name");
    if (!names.insert(in.name).second)
      throw std::invalid_argument("export_model: input name '" + in.name + "' is given twice");
    if (!in.example.defined()) throw ShapeError("export_model: input '" + in.name + "': the example is undefined");
    check_axes(in, sizes);
  }
  std::map<int64_t, std::string> by_size;
  for (const auto& [name, n] : sizes) {
    const auto [it, first] = by_size.emplace(n, name);
    if (!first)
      throw ShapeError("export_model: dynamic axes '" + it->second + "' and '" + name + "' both have size " +
                       std::to_string(n) + " in the examples: give them different sizes, so that a reshape "
                       "can tell them apart");
  }
}

std::vector<std::string> output_names(const ExportOptions& o, size_t n, const std::vector<Input>& inputs) {
  std::vector<std::string> names = o.output_names;
  if (names.empty())
    for (size_t i = 0; i < n; ++i) names.push_back(n == 1 ? "output" : "output" + std::to_string(i));
  if (names.size() != n)
    throw std::invalid_argument("export_model: " + std::to_string(o.output_names.size()) +
                                " output names given for a forward that returned " + std::to_string(n) + " outputs");
  std::set<std::string> seen;
  for (const Input& in : inputs) seen.insert(in.name);
  for (const std::string& s : names)
    if (s.empty() || !seen.insert(s).second)
      throw std::invalid_argument("export_model: output name '" + s + "' is empty or used twice (inputs included)");
  return names;
}

struct Traced {
  std::vector<TracedOp> ops;
  std::vector<Tensor> outputs;
};

// Runs the forward once in eval mode under an export trace.
Traced trace(nn::Module& model, const Forward& forward, const std::vector<Input>& inputs) {
  std::vector<Tensor> examples;
  std::string shapes;
  for (const Input& in : inputs) {
    examples.push_back(in.example);
    shapes += (shapes.empty() ? "" : ", ") + in.name + " " + shape_str(in.example.shape());
  }
  Traced t;
  nn::EvalGuard eval(model);
  TraceGuard on(t.ops);
  try {
    t.outputs = forward(examples);
  } catch (const ShapeError& e) {
    throw ShapeError("export_model: the forward failed on the example inputs (" + shapes + "): " + e.what());
  }
  if (t.outputs.empty()) throw ExportError("export_model: the forward returned no output");
  for (size_t i = 0; i < t.outputs.size(); ++i)
    if (!t.outputs[i].defined()) throw ExportError("export_model: output " + std::to_string(i) + " is undefined");
  return t;
}

// A traced op's tensors: record()'s inputs, then its extra ones.
std::vector<Tensor> operands(const TracedOp& op) {
  std::vector<Tensor> all = op.inputs;
  all.insert(all.end(), op.extra.begin(), op.extra.end());
  return all;
}

void set_value_info(pb::ValueInfoProto* v, const std::string& name, Dtype d, const Dims& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(detail::onnx_type(d));
  auto* shape = tt->mutable_shape();
  for (const detail::Dim& dim : dims) {
    auto* s = shape->add_dim();
    if (dim.sym.empty()) s->set_dim_value(dim.size);
    else s->set_dim_param(dim.sym);
  }
}

}  // namespace

// Builds one model from one trace.
class Exporter {
 public:
  Exporter(nn::Module& model, const std::vector<Input>& inputs, const Traced& t)
      : inputs_(inputs), t_(t), b_(*model_.mutable_graph()) {
    for (const auto& list : {model.named_parameters(), model.named_buffers()})
      for (const auto& [name, tensor] : list) named_.emplace(tensor.impl().get(), std::make_pair(name, tensor));
    for (size_t i = 0; i < t.ops.size(); ++i) producer_[t.ops[i].output.impl().get()] = i;
  }
  pb::ModelProto build(const std::vector<std::string>& outputs, const std::string& graph_name);

 private:
  std::vector<size_t> needed() const;
  void check_depends_on_inputs(const std::vector<size_t>& ops, const std::vector<std::string>& names) const;
  Value value_of(const Tensor& t);
  void emit(const TracedOp& op);

  const std::vector<Input>& inputs_;
  const Traced& t_;
  pb::ModelProto model_;
  detail::GraphBuilder b_;
  std::unordered_map<const TensorImpl*, std::pair<std::string, Tensor>> named_;  // parameters, buffers
  std::unordered_map<const TensorImpl*, size_t> producer_;                       // the op that made a tensor
  std::unordered_map<const TensorImpl*, Value> values_;                          // in the graph so far
};

// The ops the outputs need, in the order they ran.
std::vector<size_t> Exporter::needed() const {
  std::vector<const TensorImpl*> stack;
  for (const Tensor& o : t_.outputs) stack.push_back(o.impl().get());
  std::set<size_t> ops;
  std::unordered_set<const TensorImpl*> seen;
  while (!stack.empty()) {
    const TensorImpl* t = stack.back();
    stack.pop_back();
    auto it = producer_.find(t);
    if (!seen.insert(t).second || it == producer_.end()) continue;
    ops.insert(it->second);
    for (const Tensor& in : operands(t_.ops[it->second]))
      if (in.defined()) stack.push_back(in.impl().get());
  }
  return std::vector<size_t>(ops.begin(), ops.end());
}

// A graph whose output does not depend on any input computes a constant:
// its example inputs were not what it ran on (a closed graph).
void Exporter::check_depends_on_inputs(const std::vector<size_t>& ops, const std::vector<std::string>& names) const {
  std::unordered_set<const TensorImpl*> live;
  for (const Input& in : inputs_) live.insert(in.example.impl().get());
  for (size_t i : ops)
    for (const Tensor& in : operands(t_.ops[i]))
      if (in.defined() && live.count(in.impl().get())) live.insert(t_.ops[i].output.impl().get());
  for (size_t k = 0; k < t_.outputs.size(); ++k)
    if (!live.count(t_.outputs[k].impl().get()))
      throw ExportError("export_model: output '" + names[k] + "' " + shape_str(t_.outputs[k].shape()) +
                        " does not depend on any input: the forward computed it from parameters and constants "
                        "alone (a closed graph); pass the tensors it should read as inputs");
}

Value Exporter::value_of(const Tensor& t) {
  if (!t.defined()) return Value{"", {}};
  const TensorImpl* key = t.impl().get();
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  Dims dims;
  for (int64_t n : t.shape()) dims.push_back({n, ""});
  auto named = named_.find(key);
  Value v{named != named_.end() ? named->second.first : b_.fresh("const"), dims};
  b_.initializer(v.name, t);
  return values_[key] = v;
}

void Exporter::emit(const TracedOp& op) {
  const auto& table = detail::emitters();
  auto e = table.find(op.op);
  if (e == table.end()) {
    std::string known;
    for (const auto& kv : table) known += (known.empty() ? "" : ", ") + kv.first;
    throw ExportError("export_model: op '" + op.op + "'" + (op.scope.empty() ? "" : " in " + op.scope) +
                      " has no ONNX mapping yet; the ops that export are: " + known);
  }
  detail::OpContext c{op, {}, b_};
  for (const Tensor& in : operands(op)) c.in.push_back(value_of(in));
  Value out = e->second(c);
  std::vector<int64_t> sizes;
  for (const detail::Dim& d : out.dims) sizes.push_back(d.size);
  if (sizes != op.output.shape())  // the emitter's axes disagree with what the op computed: a bug here
    throw ExportError("export_model: internal error: op '" + op.op + "' gave " + shape_str(op.output.shape()) +
                      " but its ONNX form " + detail::dims_str(out.dims));
  values_[op.output.impl().get()] = out;
}

pb::ModelProto Exporter::build(const std::vector<std::string>& outputs, const std::string& graph_name) {
  model_.set_ir_version(pb::IR_VERSION);
  model_.set_producer_name("xgrad");
  pb::OperatorSetIdProto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  pb::GraphProto& g = *model_.mutable_graph();
  g.set_name(graph_name);
  for (const Input& in : inputs_) {
    Dims dims;
    for (int64_t a = 0; a < in.example.dim(); ++a)
      dims.push_back({in.example.shape()[a], in.dynamic_axes.empty() ? "" : in.dynamic_axes[a]});
    values_[in.example.impl().get()] = Value{in.name, dims};
    set_value_info(g.add_input(), in.name, in.example.dtype(), dims);
  }
  const std::vector<size_t> ops = needed();
  check_depends_on_inputs(ops, outputs);
  for (size_t i : ops) emit(t_.ops[i]);
  // An output a node of ours computes takes the output's name (in the
  // nodes that read it too) rather than passing through an Identity: ONNX
  // Runtime's optimiser, removing such an Identity, can leave a fused node
  // reading the old name (an invalid model). An input, a constant or a
  // value already output under another name still gets an Identity.
  std::unordered_set<std::string> produced, named_out;
  for (const auto& n : g.node())
    for (const std::string& o : n.output()) produced.insert(o);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Value v = value_of(t_.outputs[k]);
    if (produced.count(v.name) && !named_out.count(v.name)) {
      for (auto& n : *g.mutable_node()) {
        for (auto& i : *n.mutable_input())
          if (i == v.name) i = outputs[k];
        for (auto& o : *n.mutable_output())
          if (o == v.name) o = outputs[k];
      }
      values_[t_.outputs[k].impl().get()].name = outputs[k];
    } else {
      pb::NodeProto* n = g.add_node();
      n->set_op_type("Identity");
      n->set_name(outputs[k]);
      n->add_input(v.name);
      n->add_output(outputs[k]);
    }
    named_out.insert(outputs[k]);
    set_value_info(g.add_output(), outputs[k], t_.outputs[k].dtype(), v.dims);
  }
  return model_;
}

void export_model(nn::Module& model, const Forward& forward, const std::vector<Input>& inputs,
                  const std::string& path, const ExportOptions& options) {
  check_inputs(inputs);
  if (!forward) throw std::invalid_argument("export_model: the forward function is empty");
  const Traced t = trace(model, forward, inputs);
  const std::vector<std::string> names = output_names(options, t.outputs.size(), inputs);
  const pb::ModelProto m = Exporter(model, inputs, t).build(names, options.graph_name);
  try {
    ::onnx::checker::check_model(m);
  } catch (const ::onnx::checker::ValidationError& e) {
    throw ExportError(std::string("export_model: ONNX's checker rejects the model: ") + e.what());
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw ExportError("export_model: the model could not be serialised");
  write_file_atomically(path, "export_model", [&](const ByteSink& put) { put(bytes.data(), bytes.size()); });
}

void export_model(nn::Module& model, const Input& input, const std::string& path, const ExportOptions& options) {
  export_model(
      model, [&model](const std::vector<Tensor>& x) { return std::vector<Tensor>{model.forward(x[0])}; }, {input},
      path, options);
}

std::vector<std::string> exported_ops() {
  std::vector<std::string> ops;
  for (const auto& kv : detail::emitters()) ops.push_back(kv.first);
  return ops;
}

namespace {

std::string dtype_of(int32_t t) {
  if (t == detail::pb::TensorProto_DataType_FLOAT) return "float32";
  if (t == detail::pb::TensorProto_DataType_DOUBLE) return "float64";
  if (t == detail::pb::TensorProto_DataType_INT64) return "int64";
  return "type " + std::to_string(t);
}

std::vector<ValueSignature> values_of(const google::protobuf::RepeatedPtrField<detail::pb::ValueInfoProto>& list) {
  std::vector<ValueSignature> out;
  for (const auto& v : list) {
    ValueSignature s{v.name(), dtype_of(v.type().tensor_type().elem_type()), {}};
    for (const auto& d : v.type().tensor_type().shape().dim())
      s.axes.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
    out.push_back(s);
  }
  return out;
}

}  // namespace

GraphSignature read_signature(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  detail::pb::ModelProto m;
  if (!f || !m.ParseFromIstream(&f))
    throw ExportError("read_signature: " + path + " cannot be read as an ONNX model");
  const size_t slash = path.find_last_of('/');
  return {slash == std::string::npos ? path : path.substr(slash + 1), values_of(m.graph().input()),
          values_of(m.graph().output())};
}

}  // namespace xg::onnx
