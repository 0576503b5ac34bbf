// Recurrent layers as ONNX's own RNN, LSTM and GRU operators (opset 17).
// autograd's recurrent_layer is traced as one op from the layer's input,
// weights and initial states (no per-step internals), and its last states
// as "recurrent_state" ops that read the operator's Y_h and Y_c outputs.
//
// Gate orders differ: xgrad (PyTorch's) stacks the LSTM's gates i, f, g, o
// and the GRU's r, z, n; ONNX wants i, o, f, c and z, r, h. The weights stay
// initializers under their parameters' names, in their own layout; Slice
// and Concat nodes reorder the gate blocks (runtimes fold them once). The
// GRU's reset gate multiplies the hidden product after its bias, as in
// PyTorch: ONNX's linear_before_reset = 1.
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "onnx/detail/graph.h"
#include "onnx/export.h"

namespace xg::onnx::detail {

namespace {

// The ONNX gate blocks of a cell, as indices of xgrad's.
std::vector<int64_t> onnx_gate_order(RecurrentCell cell) {
  if (cell == RecurrentCell::lstm) return {0, 3, 1, 2};  // i, o, f, c(=g)
  if (cell == RecurrentCell::gru) return {1, 0, 2};      // z, r, h(=n)
  return {0};
}

// A node whose (first) output is named `out`.
void named_node(const OpContext& c, const std::string& type, const std::vector<std::string>& in,
                const std::string& out, const std::function<void(pb::NodeProto&)>& attrs = {}) {
  c.b.node(type, in, [&](pb::NodeProto& n) {
    n.set_output(0, out);
    if (attrs) attrs(n);
  });
}

std::string unsqueeze0(const OpContext& c, const std::string& v) { return c.b.node("Unsqueeze", {v, c.b.ints({0})}); }

// A weight or bias (G*H, ...) with its gate blocks in ONNX's order.
std::string reorder_gates(const OpContext& c, const std::string& w, RecurrentCell cell, int64_t H) {
  const std::vector<int64_t> order = onnx_gate_order(cell);
  if (order.size() == 1) return w;
  std::vector<std::string> blocks;
  for (int64_t k : order)
    blocks.push_back(c.b.node("Slice", {w, c.b.ints({k * H}), c.b.ints({(k + 1) * H}), c.b.ints({0})}));
  return c.b.node("Concat", blocks, [](pb::NodeProto& n) { set_int(n, "axis", 0); });
}

// B (1, 2*G*H): [Wb | Rb] reordered, a missing one zeros; "" when both are missing.
std::string onnx_bias(const OpContext& c, RecurrentCell cell, int64_t G, int64_t H) {
  const Value &b_ih = c.in[3], &b_hh = c.in[4];
  if (b_ih.name.empty() && b_hh.name.empty()) return "";
  auto part = [&](const Value& b) {
    return b.name.empty() ? c.b.constant(zeros({G * H}, c.op.output.dtype())) : reorder_gates(c, b.name, cell, H);
  };
  const std::string both =
      c.b.node("Concat", {part(b_ih), part(b_hh)}, [](pb::NodeProto& n) { set_int(n, "axis", 0); });
  return unsqueeze0(c, both);
}

// The operator's attributes: hidden size, direction, and the cell's own.
void recurrent_attributes(pb::NodeProto& n, RecurrentCell cell, int64_t H, bool reverse) {
  set_int(n, "hidden_size", H);
  pb::AttributeProto* dir = n.add_attribute();
  dir->set_name("direction");
  dir->set_type(pb::AttributeProto_AttributeType_STRING);
  dir->set_s(reverse ? "reverse" : "forward");
  if (cell == RecurrentCell::gru) set_int(n, "linear_before_reset", 1);
  if (cell == RecurrentCell::tanh || cell == RecurrentCell::relu) {
    pb::AttributeProto* act = n.add_attribute();
    act->set_name("activations");
    act->set_type(pb::AttributeProto_AttributeType_STRINGS);
    act->add_strings(cell == RecurrentCell::tanh ? "Tanh" : "Relu");
  }
}

// Lengths that no op made from the inputs are a constant of the traced
// batch's rows (the exporter names such values const_*): refused when the
// batch may change, since another batch would read them.
void check_lengths(const OpContext& c) {
  if (c.in.size() <= 7 || c.in[7].name.rfind("const_", 0) != 0 || c.in[0].dims[0].sym.empty()) return;
  throw ExportError("export_model: recurrent_layer" + in_module(c.op) +
                    " on " + dims_str(c.in[0].dims) + ": its lengths are a constant of the traced batch of " +
                    std::to_string(c.in[0].dims[0].size) + " rows, and the batch '" + c.in[0].dims[0].sym +
                    "' may change: fix the batch, or give the layer its lengths as a tensor computed from the "
                    "graph's inputs (traced_lengths)");
}

// recurrent_layer (x, w_ih, w_hh, b_ih, b_hh, h0, c0; extra: lengths):
// x (B,T,C) as (T,B,C) through the operator, its Y
// (T,1,B,H) back to (B,T,H). Y_h and Y_c, squeezed to (B,H), are named
// after the output (OUT_h_n, OUT_c_n) for recurrent_state to find.
Value recurrent_layer(const OpContext& c) {
  const auto cell = static_cast<RecurrentCell>(c.op.attr<attr::Recurrent>().cell);
  const bool reverse = c.op.attr<attr::Recurrent>().reverse, lstm = cell == RecurrentCell::lstm;
  const int64_t H = c.op.inputs[2].size(1), G = c.op.inputs[2].size(0) / H;
  const char* type = lstm ? "LSTM" : cell == RecurrentCell::gru ? "GRU" : "RNN";
  std::vector<std::string> in{c.b.node("Transpose", {c.in[0].name}, [](pb::NodeProto& n) { set_ints(n, "perm", {1, 0, 2}); }),
                              unsqueeze0(c, reorder_gates(c, c.in[1].name, cell, H)),
                              unsqueeze0(c, reorder_gates(c, c.in[2].name, cell, H)), onnx_bias(c, cell, G, H)};
  check_lengths(c);
  in.push_back(c.in.size() > 7 ? c.b.node("Cast", {c.in[7].name}, [](pb::NodeProto& n) {
    set_int(n, "to", pb::TensorProto_DataType_INT32);  // sequence_lens
  }) : "");
  in.push_back(c.in[5].name.empty() ? "" : unsqueeze0(c, c.in[5].name));
  if (lstm) in.push_back(c.in[6].name.empty() ? "" : unsqueeze0(c, c.in[6].name));
  while (in.back().empty()) in.pop_back();
  const std::string y = c.b.fresh(std::string(type) + "_output"), y_h = c.b.fresh("Y_h"), y_c = c.b.fresh("Y_c");
  const std::string all = c.b.node(type, in, [&](pb::NodeProto& n) {
    n.add_output(y_h);
    if (lstm) n.add_output(y_c);
    recurrent_attributes(n, cell, H, reverse);
  });
  const std::string seq = c.b.node("Squeeze", {all, c.b.ints({1})});  // (T,B,H)
  named_node(c, "Transpose", {seq}, y, [](pb::NodeProto& n) { set_ints(n, "perm", {1, 0, 2}); });
  named_node(c, "Squeeze", {y_h, c.b.ints({0})}, y + "_h_n");
  if (lstm) named_node(c, "Squeeze", {y_c, c.b.ints({0})}, y + "_c_n");
  return Value{y, {c.in[0].dims[0], c.in[0].dims[1], {H, ""}}};
}

// recurrent_state (the layer's output): the operator's last state h_n or
// c_n, which recurrent_layer named after its output.
Value recurrent_state(const OpContext& c) {
  const Value& layer = c.in[0];
  return Value{layer.name + (c.op.attr<attr::RecurrentState>().cell_state ? "_c_n" : "_h_n"), {layer.dims[0], layer.dims[2]}};
}

// What the recurrent encoder-decoder's graphs need besides the layers.

// masked_fill (x; extra: the mask): Where on the mask as booleans.
Value masked_fill(const OpContext& c) {
  const std::string cond = c.b.node("Cast", {c.in[1].name}, [](pb::NodeProto& n) {
    set_int(n, "to", pb::TensorProto_DataType_BOOL);
  });
  const std::string fill = c.b.scalar(c.op.attr<attr::Scalar>().value, c.op.output.dtype());
  return Value{c.b.node("Where", {cond, fill, c.in[0].name}), c.in[0].dims};
}

// id_mask (extra: the int64 ids): Equal to the id, then Cast to the mask's dtype.
Value id_mask(const OpContext& c) {
  const std::string eq = c.b.node("Equal", {c.in[0].name, c.b.constant(from_ints({c.op.attr<attr::Id>().id}, {}))});
  const auto to = onnx_type(c.op.output.dtype());
  return Value{c.b.node("Cast", {eq}, [&](pb::NodeProto& n) { set_int(n, "to", to); }), c.in[0].dims};
}

}  // namespace

void add_recurrent_emitters(std::map<std::string, Emitter>& table) {
  add_emitter(table, "recurrent_layer", recurrent_layer);
  add_emitter(table, "recurrent_state", recurrent_state);
  add_emitter(table, "masked_fill", masked_fill);
  add_emitter(table, "id_mask", id_mask);
}

}  // namespace xg::onnx::detail
