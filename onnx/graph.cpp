// The graph builder of onnx/detail/graph.h: nodes, initializers and
// attributes through ONNX's generated protobuf classes.
#include <string>

#include "onnx/detail/graph.h"

namespace xg::onnx::detail {

std::string dims_str(const Dims& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + (d[i].sym.empty() ? std::to_string(d[i].size) : d[i].sym);
  return s + ")";
}

pb::TensorProto_DataType onnx_type(Dtype d) {
  if (d == Dtype::f32) return pb::TensorProto_DataType_FLOAT;
  if (d == Dtype::f64) return pb::TensorProto_DataType_DOUBLE;
  return pb::TensorProto_DataType_INT64;
}

std::string GraphBuilder::fresh(const std::string& hint) { return hint + "_" + std::to_string(counter_++); }

std::string GraphBuilder::node(const std::string& type, const std::vector<std::string>& inputs,
                               const std::function<void(pb::NodeProto&)>& attrs) {
  pb::NodeProto* n = g_.add_node();
  n->set_op_type(type);
  n->set_name(fresh(type));
  for (const std::string& i : inputs) n->add_input(i);
  const std::string out = fresh(type + "_out");
  n->add_output(out);
  if (attrs) attrs(*n);
  return out;
}

void GraphBuilder::initializer(const std::string& name, const Tensor& t) {
  pb::TensorProto* p = g_.add_initializer();
  p->set_name(name);
  p->set_data_type(onnx_type(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  // Little-endian bytes, as the format's raw_data field holds them.
  const void* bytes = t.dtype() == Dtype::f32   ? static_cast<const void*>(t.data<float>())
                      : t.dtype() == Dtype::f64 ? static_cast<const void*>(t.data<double>())
                                                : static_cast<const void*>(t.data<int64_t>());
  p->set_raw_data(bytes, static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
}

std::string GraphBuilder::constant(const Tensor& t) {
  const std::string name = fresh("const");
  initializer(name, t);
  return name;
}

std::string GraphBuilder::ints(const std::vector<int64_t>& v) {
  return constant(from_ints(v, {static_cast<int64_t>(v.size())}));
}

std::string GraphBuilder::scalar(double v, Dtype d) { return constant(xg::scalar(v, d)); }

void set_int(pb::NodeProto& n, const std::string& name, int64_t v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto_AttributeType_INT);
  a->set_i(v);
}

void set_ints(pb::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto_AttributeType_INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_float(pb::NodeProto& n, const std::string& name, double v) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto_AttributeType_FLOAT);
  a->set_f(static_cast<float>(v));
}

}  // namespace xg::onnx::detail
