// How each traced op becomes ONNX nodes (opset 17), and the axes of its
// output: which ones may change from run to run, so that a reshape knows
// which of its sizes to leave to the runtime. One emitter per op name, as
// record() names it; an op not listed here is refused by export_model.
#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "onnx/detail/graph.h"
#include "onnx/export.h"

namespace xg::onnx::detail {

namespace {

// " (in Linear(in=4, out=3) 'fc1')", or "" when no module ran the op.


// The name of an axis made of several: "B*T", "T*16".
std::string product_sym(const Dims& ds) {
  std::string s;
  for (const Dim& d : ds) s += (s.empty() ? "" : "*") + (d.sym.empty() ? std::to_string(d.size) : d.sym);
  return s;
}

bool any_dynamic(const Dims& ds) {
  for (const Dim& d : ds)
    if (!d.sym.empty()) return true;
  return false;
}

Emitter unary(const char* type) {
  return [type](const OpContext& c) { return Value{c.b.node(type, {c.in[0].name}), c.in[0].dims}; };
}

Emitter binary(const char* type) {
  return [type](const OpContext& c) {
    return Value{c.b.node(type, {c.in[0].name, c.in[1].name}), broadcast(c.in[0].dims, c.in[1].dims)};
  };
}

// x (op) s for the scalar the op traced (add_scalar, mul_scalar, pow).
Emitter with_scalar(const char* type) {
  return [type](const OpContext& c) {
    const std::string s = c.b.scalar(c.op.attr<attr::Scalar>().value, c.op.output.dtype());
    return Value{c.b.node(type, {c.in[0].name, s}), c.in[0].dims};
  };
}

// gelu(x) = x * (1 + erf(x / sqrt 2)) / 2, the exact form xgrad computes.
Value gelu(const OpContext& c) {
  const Dtype d = c.op.output.dtype();
  const std::string& x = c.in[0].name;
  const std::string t = c.b.node("Div", {x, c.b.scalar(std::sqrt(2.0), d)});
  const std::string p = c.b.node("Add", {c.b.node("Erf", {t}), c.b.scalar(1.0, d)});
  return Value{c.b.node("Mul", {c.b.node("Mul", {x, p}), c.b.scalar(0.5, d)}), c.in[0].dims};
}

// (..., M, K) x (..., K, N): the leading axes broadcast (numpy's matmul).
Value matmul(const OpContext& c) {
  const Dims &a = c.in[0].dims, &b = c.in[1].dims;
  const size_t la = a.size() >= 2 ? a.size() - 2 : 0, lb = b.size() >= 2 ? b.size() - 2 : 0;
  Dims out = broadcast(Dims(a.begin(), a.begin() + la), Dims(b.begin(), b.begin() + lb));
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return Value{c.b.node("MatMul", {c.in[0].name, c.in[1].name}), out};
}

// y (..., O) = x (..., I) w^T (O, I) + b (O): Gemm for rows, else MatMul
// with the weight transposed (a node of its own, which runtimes fold: the
// initializer keeps the parameter's own layout and name), then Add.
Value linear(const OpContext& c) {
  const Value &x = c.in[0], &w = c.in[1], &b = c.in[2];
  Dims out = x.dims;
  out.back() = {w.dims[0].size, ""};
  if (x.dims.size() == 2) {
    std::vector<std::string> in{x.name, w.name};
    if (!b.name.empty()) in.push_back(b.name);
    return Value{c.b.node("Gemm", in, [](pb::NodeProto& n) { set_int(n, "transB", 1); }), out};
  }
  const std::string wt = c.b.node("Transpose", {w.name}, [](pb::NodeProto& n) { set_ints(n, "perm", {1, 0}); });
  std::string y = c.b.node("MatMul", {x.name, wt});
  if (!b.name.empty()) y = c.b.node("Add", {y, b.name});
  return Value{y, out};
}

// Reshape's target: leading axes kept from the input (0 copies one that may
// change), trailing fixed axes, and in between the axes that change: fixed
// sizes where no input axis there may change, else one axis left to the
// runtime (-1). More than one output axis made from changing ones cannot be
// written with Reshape alone, and is refused; size-1 axes beside that one
// (an unsqueeze next to a changing axis) are fixed, not made from them.
Value reshape(const OpContext& c) {
  const Dims& x = c.in[0].dims;
  const Shape& s = c.op.output.shape();
  const size_t rx = x.size(), ro = s.size();
  size_t p = 0, q = 0;
  while (p < rx && p < ro && s[p] == x[p].size) ++p;
  while (q < rx - p && q < ro - p && s[ro - 1 - q] == x[rx - 1 - q].size && x[rx - 1 - q].sym.empty()) ++q;
  const Dims mid(x.begin() + p, x.end() - q);
  std::vector<int64_t> target(s.begin(), s.end());
  Dims out(ro);
  for (size_t i = 0; i < ro; ++i) out[i] = i < p ? x[i] : Dim{s[i], ""};
  for (size_t i = 0; i < p; ++i)
    if (!x[i].sym.empty()) target[i] = 0;
  // Size-1 axes inserted beside the changing ones (unsqueeze) are fixed: a
  // dynamic axis has an example size of at least 2.
  size_t left = 0, others = 0;  // the last output axis there not of size 1, and how many there are
  for (size_t i = p; i < ro - q; ++i)
    if (s[i] != 1) left = i, ++others;
  if (any_dynamic(mid) && ro - p - q > 1 && others == 1) {
    Dims changing;
    for (const Dim& d : mid)
      if (d.size != 1 || !d.sym.empty()) changing.push_back(d);
    target[left] = -1;
    out[left] = {s[left], product_sym(changing)};
    return Value{c.b.node("Reshape", {c.in[0].name, c.b.ints(target)}), out};
  }
  if (any_dynamic(mid)) {
    if (ro - p - q != 1)
      throw ExportError("export_model: reshape " + dims_str(x) + " -> " + shape_str(s) + in_module(c.op) +
                        " makes " + std::to_string(ro - p - q) + " axes from " + dims_str(mid) +
                        ", which may change from run to run; Reshape can leave only one to the runtime (-1): "
                        "reshape so that at most one axis is made from the changing ones");
    target[p] = -1;
    out[p] = {s[p], product_sym(mid)};
  }
  return Value{c.b.node("Reshape", {c.in[0].name, c.b.ints(target)}), out};
}

Value permute(const OpContext& c) {
  Dims out;
  const std::vector<int64_t>& perm = c.op.attr<attr::Permutation>().order;
  for (int64_t a : perm) out.push_back(c.in[0].dims[a]);
  return Value{c.b.node("Transpose", {c.in[0].name}, [&](pb::NodeProto& n) { set_ints(n, "perm", perm); }), out};
}

// sum, mean and max. In opset 17 ReduceSum takes its axes as an input,
// ReduceMean and ReduceMax as an attribute.
Value reduce(const OpContext& c, const char* type) {
  const bool attribute = std::string(type) != "ReduceSum";
  const std::vector<int64_t>& axes = c.op.attr<attr::Axes>().axes;
  const bool keep = c.op.attr<attr::Axes>().keepdims;
  Dims out;
  for (size_t i = 0; i < c.in[0].dims.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) out.push_back(c.in[0].dims[i]);
    else if (keep) out.push_back({1, ""});
  }
  auto keepdims = [&](pb::NodeProto& n) {
    set_int(n, "keepdims", keep ? 1 : 0);
    if (attribute && !axes.empty()) set_ints(n, "axes", axes);  // none: a scalar's, itself (an empty list is invalid)
  };
  if (attribute) return Value{c.b.node(type, {c.in[0].name}, keepdims), out};
  return Value{c.b.node("ReduceSum", {c.in[0].name, c.b.ints(axes)}, keepdims), out};
}

Emitter softmax(const char* type) {
  return [type](const OpContext& c) {
    const int64_t axis = c.op.attr<attr::Axis>().axis;
    return Value{c.b.node(type, {c.in[0].name}, [&](pb::NodeProto& n) { set_int(n, "axis", axis); }), c.in[0].dims};
  };
}

// layer_norm (x, w, b) and add_layer_norm (x, r, w, b): LayerNormalization
// over the last axis, after an Add for the residual form. A layer without
// a learned scale gets ones (the operator needs one).
Value layer_norm(const OpContext& c) {
  const bool residual = c.op.op == "add_layer_norm";
  std::string x = c.in[0].name;
  if (residual) x = c.b.node("Add", {x, c.in[1].name});
  const Value &w = c.in[residual ? 2 : 1], &b = c.in[residual ? 3 : 2];
  const int64_t width = c.op.output.shape().back();
  std::vector<std::string> in{x, w.name.empty() ? c.b.constant(ones({width}, c.op.output.dtype())) : w.name};
  if (!b.name.empty()) in.push_back(b.name);
  const double eps = c.op.attr<attr::Scalar>().value;
  return Value{c.b.node("LayerNormalization", in,
                        [&](pb::NodeProto& n) {
                          set_int(n, "axis", -1);
                          set_float(n, "epsilon", eps);
                        }),
               c.in[0].dims};
}

// table (V, C) looked up by ids (the op's extra tensor): (ids..., C).
Value gather_rows(const OpContext& c) {
  const Value &table = c.in[0], &ids = c.in[1];
  Dims out = ids.dims;
  out.push_back(table.dims[1]);
  return Value{c.b.node("Gather", {table.name, ids.name}, [](pb::NodeProto& n) { set_int(n, "axis", 0); }), out};
}

// The axis of a slice [start, end) by step, Python's bounds, as Slice reads
// them too. On an axis that may change, the result does too unless its
// length is fixed by the bounds (a window from the start, or from the end).
Value slice(const OpContext& c) {
  const attr::Slice& a = c.op.attr<attr::Slice>();
  const int64_t ax = a.axis, start = a.start, end = a.end, step = a.step;
  if (c.in.size() > 1) {  // slice_like: the end is the length of the extra tensor's axis like_axis, read at run time
    const int64_t la = a.like_axis;
    const std::string n = c.b.node("Shape", {c.in[1].name}, [&](pb::NodeProto& p) {
      set_int(p, "start", la);
      set_int(p, "end", la + 1);
    });
    Dims out = c.in[0].dims;
    out[ax] = c.in[1].dims[la];
    return Value{c.b.node("Slice", {c.in[0].name, c.b.ints({0}), n, c.b.ints({ax}), c.b.ints({1})}), out};
  }
  Dims out = c.in[0].dims;
  const Dim in = out[ax];
  out[ax] = {c.op.output.shape()[ax], ""};
  const bool fixed = (start >= 0 && end >= 0 && end < in.size) || (start < 0 && (end < 0 || end >= in.size));
  if (!in.sym.empty() && !fixed)
    out[ax].sym = start == 0 && step == 1 ? in.sym : in.sym + "[" + std::to_string(start) + ":]";
  const std::string y = c.b.node(
      "Slice", {c.in[0].name, c.b.ints({start}), c.b.ints({end}), c.b.ints({ax}), c.b.ints({step})});
  return Value{y, out};
}

// broadcast_like (its extra tensor `like`): Expand to a shape whose axis
// `axis` is read from like's axis `like_axis` at run time, the others fixed.
// A plain broadcast_to, whose sizes no input gave, expands to constants.
Value broadcast_to(const OpContext& c) {
  const Shape& s = c.op.output.shape();
  if (c.in.size() == 1) {  // an axis the input already has at its size is left to it (1 in Expand's shape)
    const Dims& x = c.in[0].dims;
    const size_t off = s.size() - x.size();
    std::vector<int64_t> target(s.begin(), s.end());
    Dims out;
    for (size_t i = 0; i < s.size(); ++i) {
      const bool kept = i >= off && x[i - off].size == s[i];
      if (kept) target[i] = 1;
      out.push_back(kept ? x[i - off] : Dim{s[i], ""});
    }
    return Value{c.b.node("Expand", {c.in[0].name, c.b.ints(target)}), out};
  }
  const int64_t ax = c.op.attr<attr::BroadcastLike>().axis, la = c.op.attr<attr::BroadcastLike>().like_axis;
  const std::string n = c.b.node("Shape", {c.in[1].name}, [&](pb::NodeProto& p) {
    set_int(p, "start", la);
    set_int(p, "end", la + 1);
  });
  const std::vector<int64_t> before(s.begin(), s.begin() + ax), after(s.begin() + ax + 1, s.end());
  std::vector<std::string> parts;
  if (!before.empty()) parts.push_back(c.b.ints(before));
  parts.push_back(n);
  if (!after.empty()) parts.push_back(c.b.ints(after));
  const std::string shape = c.b.node("Concat", parts, [](pb::NodeProto& p) { set_int(p, "axis", 0); });
  Dims out = c.in[0].dims;
  out[static_cast<size_t>(ax)] = c.in[1].dims[static_cast<size_t>(la)];
  return Value{c.b.node("Expand", {c.in[0].name, shape}), out};
}

Value concat(const OpContext& c) {
  const int64_t ax = c.op.attr<attr::Axis>().axis;
  Dims out = c.in[0].dims, along;
  std::vector<std::string> names;
  for (const Value& v : c.in) {
    names.push_back(v.name);
    along.push_back(v.dims[ax]);
    out = broadcast(out, v.dims);  // the other axes are equal: keeps the names of those that change
  }
  out[ax] = {c.op.output.shape()[ax], any_dynamic(along) ? product_sym(along) : ""};
  if (!out[ax].sym.empty())
    for (char& ch : out[ax].sym) ch = ch == '*' ? '+' : ch;
  return Value{c.b.node("Concat", names, [&](pb::NodeProto& n) { set_int(n, "axis", ax); }), out};
}

// where(cond, a, b): the condition (the op's extra tensor, 0 or not) as booleans.
Value where(const OpContext& c) {
  const std::string cond = c.b.node("Cast", {c.in[2].name}, [](pb::NodeProto& n) {
    set_int(n, "to", pb::TensorProto_DataType_BOOL);
  });
  Dims out = broadcast(c.in[2].dims, broadcast(c.in[0].dims, c.in[1].dims));
  return Value{c.b.node("Where", {cond, c.in[0].name, c.in[1].name}), out};
}

// attention (q (B,T,C), k and v (B,S,C); extra: the key padding mask
// (B,S)) as the core it
// computes, head by head: softmax(scale q k^T, masked scores -1e9) v.
// A preallocated cache (kv_length > 0) is written in place, which no graph
// holds: the trace records the concatenating form (MultiHeadAttention::extend_kv).
Value attention(const OpContext& c) {
  const attr::Attention& a = c.op.attr<attr::Attention>();
  const int64_t heads = a.heads, kv_length = a.kv_length;
  if (kv_length > 0)
    throw ExportError("export_model: attention" + in_module(c.op) + " reads " + std::to_string(kv_length) +
                      " positions of a preallocated key/value buffer, which is written in place and has no ONNX "
                      "form; export the concatenating cache (MultiHeadAttention::extend_kv does so under a trace)");
  const Dtype d = c.op.output.dtype();
  const int64_t width = c.op.output.shape().back(), head_dim = width / heads;
  auto heads_of = [&](const std::string& x, std::vector<int64_t> perm) {  // (B,L,C) -> perm of (B,L,H,D)
    const std::string r = c.b.node("Reshape", {x, c.b.ints({0, 0, heads, head_dim})});
    return c.b.node("Transpose", {r}, [&](pb::NodeProto& n) { set_ints(n, "perm", perm); });
  };
  const std::string q = heads_of(c.in[0].name, {0, 2, 1, 3});  // (B,H,T,D)
  const std::string k = heads_of(c.in[1].name, {0, 2, 3, 1});  // (B,H,D,S)
  const std::string v = heads_of(c.in[2].name, {0, 2, 1, 3});  // (B,H,S,D)
  std::string s = c.b.node("Mul", {c.b.node("MatMul", {q, k}), c.b.scalar(a.scale, d)});  // (B,H,T,S)
  const std::string masked = c.b.scalar(-1e9, d);  // as attention() sets masked scores
  if (c.in.size() > 3) {  // padding: (B,S) -> (B,1,1,S), true where masked
    const std::string m = c.b.node("Unsqueeze", {c.in[3].name, c.b.ints({1, 2})});
    const std::string flag =
        c.b.node("Cast", {m}, [](pb::NodeProto& n) { set_int(n, "to", pb::TensorProto_DataType_BOOL); });
    s = c.b.node("Where", {flag, masked, s});
  }
  if (a.causal) {  // causal: query i sees keys j <= i, the lower triangle of a (T,S) of ones
    const std::string ts = c.b.node("Shape", {s}, [](pb::NodeProto& n) { set_int(n, "start", -2); });
    const std::string ones = c.b.node("Add", {c.b.node("ConstantOfShape", {ts}), c.b.scalar(1.0, f32)});
    const std::string keep = c.b.node("Cast", {c.b.node("Trilu", {ones}, [](pb::NodeProto& n) { set_int(n, "upper", 0); })},
                                      [](pb::NodeProto& n) { set_int(n, "to", pb::TensorProto_DataType_BOOL); });
    s = c.b.node("Where", {keep, s, masked});
  }
  const std::string p = c.b.node("Softmax", {s}, [](pb::NodeProto& n) { set_int(n, "axis", -1); });
  const std::string o = c.b.node("Transpose", {c.b.node("MatMul", {p, v})},
                                 [](pb::NodeProto& n) { set_ints(n, "perm", {0, 2, 1, 3}); });  // (B,T,H,D)
  Dims out = c.in[0].dims;
  out.back() = {width, ""};
  return Value{c.b.node("Reshape", {o, c.b.ints({0, 0, width})}), out};
}

}  // namespace

Dims broadcast(const Dims& a, const Dims& b) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim* da = i + a.size() >= n ? &a[i + a.size() - n] : nullptr;
    const Dim* db = i + b.size() >= n ? &b[i + b.size() - n] : nullptr;
    if (da && !da->sym.empty()) out[i] = *da;
    else if (db && !db->sym.empty()) out[i] = *db;
    else out[i] = {std::max(da ? da->size : 1, db ? db->size : 1), ""};
  }
  return out;
}

std::string in_module(const TracedOp& op) { return op.scope.empty() ? "" : " (in " + op.scope + ")"; }

void add_emitter(std::map<std::string, Emitter>& table, const std::string& op, Emitter e) {
  if (!table.emplace(op, std::move(e)).second)
    throw std::logic_error("onnx: two emitters for the op '" + op + "'");
}

const std::map<std::string, Emitter>& emitters() {
  static const std::map<std::string, Emitter> table = [] {
    const std::vector<std::pair<std::string, Emitter>> core = {
      {"add", binary("Add")},           {"sub", binary("Sub")},
      {"mul", binary("Mul")},           {"div", binary("Div")},
      {"add_scalar", with_scalar("Add")}, {"mul_scalar", with_scalar("Mul")},
      {"pow", [](const OpContext& c) {
         return std::holds_alternative<attr::Scalar>(c.op.attrs) ? with_scalar("Pow")(c) : binary("Pow")(c);
       }},
      {"neg", unary("Neg")},
      {"exp", unary("Exp")},            {"log", unary("Log")},
      {"sqrt", unary("Sqrt")},          {"abs", unary("Abs")},
      {"tanh", unary("Tanh")},          {"sigmoid", unary("Sigmoid")},
      {"relu", unary("Relu")},          {"clone", unary("Identity")},
      {"gelu", gelu},                   {"matmul", matmul},
      {"linear", linear},               {"reshape", reshape},
      {"permute", permute},             {"sum", [](const OpContext& c) { return reduce(c, "ReduceSum"); }},
      {"mean", [](const OpContext& c) { return reduce(c, "ReduceMean"); }},
      {"max", [](const OpContext& c) { return reduce(c, "ReduceMax"); }},
      {"maximum", binary("Max")},
      {"softmax", softmax("Softmax")},  {"log_softmax", softmax("LogSoftmax")},
      {"layer_norm", layer_norm},       {"add_layer_norm", layer_norm},
      {"gather_rows", gather_rows},     {"slice", slice},
      {"concat", concat},               {"where", where},
      // The shipped models' ops (the Transformer's and the GPT's decoding).
      {"attention", attention},         {"broadcast_to", broadcast_to},
    };
    std::map<std::string, Emitter> t;
    for (const auto& [op, e] : core) add_emitter(t, op, e);
    add_vision_emitters(t);
    add_recurrent_emitters(t);
    add_activation_emitters(t);
    return t;
  }();
  return table;
}

}  // namespace xg::onnx::detail
