"""ONNX's own checker, with shape inference (full_check), on every model that
tests/onnx/export_models.cpp wrote, and what each graph must (not) hold:
no Dropout (eval mode), the operators the mapping promises (EXPECT, or the
model's "expect_ops" in cases.json). Fails, never
skips, when python3-onnx is missing (scripts/setup.sh installs it).
Usage: check_models.py DIR"""
import json
import os
import sys

try:
    import onnx
except ImportError:
    print("check_models: python3-onnx is not installed (scripts/setup.sh installs it)")
    sys.exit(1)

# Operators each model's graph must contain: the mapping of its xgrad ops.
EXPECT = {
    "mlp.onnx": {"Gemm", "Tanh", "LayerNormalization", "Erf", "Relu", "Sigmoid", "Sub"},
    "block.onnx": {"Gather", "LayerNormalization", "MatMul", "Transpose", "ReduceMean", "Reshape",
                   "Softmax", "LogSoftmax"},
    "ops.onnx": {"MatMul", "Exp", "Log", "Sqrt", "Abs", "Neg", "Pow", "Div", "Slice", "Concat",
                 "ReduceSum", "Where", "Cast"},
}


def main(folder):
    with open(os.path.join(folder, "cases.json")) as f:
        models = json.load(f)["models"]
    bad = 0
    for m in models:
        path = os.path.join(folder, m["file"])
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        ops = {n.op_type for n in model.graph.node}
        # A model's own list (cases.json "expect_ops") or the table above.
        missing = set(m.get("expect_ops", EXPECT.get(m["file"], []))) - ops
        if missing or "Dropout" in ops or model.opset_import[0].version != 17:
            print(f"check_models: {m['file']}: missing {sorted(missing)}, ops {sorted(ops)}, "
                  f"opset {model.opset_import[0].version}")
            bad += 1
        inits = [i.name for i in model.graph.initializer]
        print(f"check_models: {m['file']}: valid (full_check), {len(model.graph.node)} nodes, "
              f"{len(inits)} initializers, e.g. {', '.join([i for i in inits if not i.startswith('const_')][:3])}")
    print(f"check_models: {len(models) - bad} passed, {bad} failed")
    return 1 if bad or not models else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
