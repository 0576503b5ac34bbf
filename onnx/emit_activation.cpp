// Activations, comparisons and norms as ONNX (opset 17): each traced op
// (autograd/ops_activation.cpp gives its options as `reals`) mapped to the
// ONNX operator of the same meaning where opset 17 has one, else to the few
// operators of its definition. The activations composed of other ops
// (softsign, tanhshrink, softmin, glu, prelu) need nothing here.
#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "onnx/detail/graph.h"
#include "onnx/export.h"

namespace xg::onnx::detail {

namespace {

const std::string& x_of(const OpContext& c) { return c.in[0].name; }
Dtype dtype_of(const OpContext& c) { return c.op.output.dtype(); }
double real(const OpContext& c, size_t i) { return c.op.attr<attr::Params>().values.at(i); }

// One ONNX operator on the input, with float attributes.
Emitter single(const char* type, std::vector<std::pair<const char*, int>> attrs = {}) {
  return [type, attrs](const OpContext& c) {
    return Value{c.b.node(type, {x_of(c)},
                          [&](pb::NodeProto& n) {
                            for (const auto& [name, i] : attrs) set_float(n, name, real(c, static_cast<size_t>(i)));
                          }),
                 c.in[0].dims};
  };
}

// ln(1 + e^x) exactly (ONNX Softplus).
std::string softplus_of(const OpContext& c, const std::string& x) { return c.b.node("Softplus", {x}); }

Value softplus(const OpContext& c) {  // (beta, threshold): x where beta x > threshold
  const Dtype d = dtype_of(c);
  const std::string bx = c.b.node("Mul", {x_of(c), c.b.scalar(real(c, 0), d)});
  const std::string sp = c.b.node("Div", {softplus_of(c, bx), c.b.scalar(real(c, 0), d)});
  if (std::isinf(real(c, 1))) return Value{sp, c.in[0].dims};
  const std::string above = c.b.node("Greater", {bx, c.b.scalar(real(c, 1), d)});
  return Value{c.b.node("Where", {above, x_of(c), sp}), c.in[0].dims};
}

Value hardtanh(const OpContext& c) {  // (min_val, max_val)
  const Dtype d = dtype_of(c);
  return Value{c.b.node("Clip", {x_of(c), c.b.scalar(real(c, 0), d), c.b.scalar(real(c, 1), d)}), c.in[0].dims};
}

Value threshold(const OpContext& c) {  // (threshold, value)
  const Dtype d = dtype_of(c);
  const std::string above = c.b.node("Greater", {x_of(c), c.b.scalar(real(c, 0), d)});
  return Value{c.b.node("Where", {above, x_of(c), c.b.scalar(real(c, 1), d)}), c.in[0].dims};
}

Value shrink(const OpContext& c, bool soft) {  // (lambd)
  return Value{c.b.node("Shrink", {x_of(c)},
                        [&](pb::NodeProto& n) {
                          set_float(n, "lambd", real(c, 0));
                          set_float(n, "bias", soft ? real(c, 0) : 0.0);
                        }),
               c.in[0].dims};
}

Value silu(const OpContext& c) { return Value{c.b.node("Mul", {x_of(c), c.b.node("Sigmoid", {x_of(c)})}), c.in[0].dims}; }

Value mish(const OpContext& c) {
  return Value{c.b.node("Mul", {x_of(c), c.b.node("Tanh", {softplus_of(c, x_of(c))})}), c.in[0].dims};
}

Value logsigmoid(const OpContext& c) {  // -ln(1 + e^-x)
  return Value{c.b.node("Neg", {softplus_of(c, c.b.node("Neg", {x_of(c)}))}), c.in[0].dims};
}

Value gelu_tanh(const OpContext& c) {  // x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
  const Dtype d = dtype_of(c);
  const std::string& x = x_of(c);
  const std::string x3 = c.b.node("Mul", {c.b.node("Mul", {x, x}), x});
  const std::string inner = c.b.node("Add", {x, c.b.node("Mul", {x3, c.b.scalar(0.044715, d)})});
  const std::string t = c.b.node("Tanh", {c.b.node("Mul", {inner, c.b.scalar(0.79788456080286535588, d)})});
  const std::string half = c.b.node("Mul", {x, c.b.scalar(0.5, d)});
  return Value{c.b.node("Mul", {half, c.b.node("Add", {t, c.b.scalar(1.0, d)})}), c.in[0].dims};
}

Value log1p(const OpContext& c) {
  return Value{c.b.node("Log", {c.b.node("Add", {x_of(c), c.b.scalar(1.0, dtype_of(c))})}), c.in[0].dims};
}

Value expm1(const OpContext& c) {
  return Value{c.b.node("Sub", {c.b.node("Exp", {x_of(c)}), c.b.scalar(1.0, dtype_of(c))}), c.in[0].dims};
}

// A comparison: its operands are the op's extra tensors (a mask has no
// history), the result cast back to the input's dtype (ONNX gives bool).
Emitter compare(const char* type, bool negate = false) {
  return [type, negate](const OpContext& c) {
    std::string r = c.b.node(type, {c.in.at(0).name, c.in.at(1).name});
    if (negate) r = c.b.node("Not", {r});
    const std::string cast = c.b.node("Cast", {r}, [&](pb::NodeProto& n) { set_int(n, "to", onnx_type(dtype_of(c))); });
    return Value{cast, broadcast(c.in[0].dims, c.in[1].dims)};
  };
}

// vector_norm (ord 2 or other finite ord > 1; ord 1 and inf are traced as
// sum/max of abs).
Value vector_norm(const OpContext& c) {
  const attr::Norm& a = c.op.attr<attr::Norm>();
  const std::vector<int64_t>& axes = a.axes;
  const bool keep = a.keepdims;
  const double ord = a.ord;
  const Dtype d = dtype_of(c);
  Dims out;
  const Dims& in = c.in[0].dims;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) out.push_back(in[i]);
    else if (keep) out.push_back({1, ""});
  }
  if (ord == 2) {
    return Value{c.b.node("ReduceL2", {x_of(c)},
                          [&](pb::NodeProto& n) {
                            set_ints(n, "axes", axes);
                            set_int(n, "keepdims", keep);
                          }),
                 out};
  }
  const std::string p = c.b.scalar(ord, d);
  const std::string powered = c.b.node("Pow", {c.b.node("Abs", {x_of(c)}), p});
  const std::string summed =
      c.b.node("ReduceSum", {powered, c.b.ints(axes)}, [&](pb::NodeProto& n) { set_int(n, "keepdims", keep); });
  return Value{c.b.node("Pow", {summed, c.b.scalar(1.0 / ord, d)}), out};
}

}  // namespace

void add_activation_emitters(std::map<std::string, Emitter>& t) {
  add_emitter(t, "leaky_relu", single("LeakyRelu", {{"alpha", 0}}));
  add_emitter(t, "hardtanh", hardtanh);
  add_emitter(t, "clamp", hardtanh);  // traced with (min, max) as hardtanh is
  add_emitter(t, "elu", single("Elu", {{"alpha", 0}}));
  add_emitter(t, "selu", single("Selu", {{"alpha", 0}, {"gamma", 1}}));
  add_emitter(t, "celu", single("Celu", {{"alpha", 0}}));
  add_emitter(t, "hardsigmoid", [](const OpContext& c) {
    return Value{c.b.node("HardSigmoid", {x_of(c)},
                          [](pb::NodeProto& n) {
                            set_float(n, "alpha", 1.0 / 6);
                            set_float(n, "beta", 0.5);
                          }),
                 c.in[0].dims};
  });
  add_emitter(t, "hardswish", single("HardSwish"));
  add_emitter(t, "softplus", softplus);
  add_emitter(t, "softshrink", [](const OpContext& c) { return shrink(c, true); });
  add_emitter(t, "hardshrink", [](const OpContext& c) { return shrink(c, false); });
  add_emitter(t, "threshold", threshold);
  add_emitter(t, "silu", silu);
  add_emitter(t, "mish", mish);
  add_emitter(t, "logsigmoid", logsigmoid);
  add_emitter(t, "gelu_tanh", gelu_tanh);
  add_emitter(t, "log1p", log1p);
  add_emitter(t, "expm1", expm1);
  add_emitter(t, "gt", compare("Greater"));
  add_emitter(t, "ge", compare("GreaterOrEqual"));
  add_emitter(t, "lt", compare("Less"));
  add_emitter(t, "le", compare("LessOrEqual"));
  add_emitter(t, "eq", compare("Equal"));
  add_emitter(t, "ne", compare("Equal", true));
  add_emitter(t, "vector_norm", vector_norm);
}

}  // namespace xg::onnx::detail
