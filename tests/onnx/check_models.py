"""ONNX's own checker, with shape inference (full_check), on every model that
tests/onnx/export_models.cpp wrote, and what each graph must (not) hold:
no Dropout (eval mode), the operators the mapping promises (EXPECT, or the
model's "expect_ops" in cases.json). Fails, never
skips, when python3-onnx is missing (scripts/setup.sh installs it).
Usage: check_models.py DIR [DIR ...] (each holding cases.json or manifest.json)"""
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


# The shipped models' graphs (xg_export's folders, named by manifest.json):
# attention as MatMul + Softmax, the caches joined by Concat, positions and
# ids looked up by Gather.
EXPECT.update({
    "encoder.onnx": {"Gather", "MatMul", "Softmax", "Where", "LayerNormalization", "Reshape", "Transpose"},
    "decoder_step.onnx": {"Gather", "MatMul", "Softmax", "Where", "Concat", "LayerNormalization"},
    "step.onnx": {"Gather", "MatMul", "Softmax", "Concat", "LayerNormalization", "Erf"},
    "prefill.onnx": {"Gather", "MatMul", "Softmax", "Trilu", "Where", "Slice", "LayerNormalization", "Erf"},
})


# Graphs of xg_export's other families, by the manifest's "family".
FAMILY_EXPECT = {
    "rnn_seq2seq": {"encoder.onnx": {"Gather", "LSTM", "Equal"}, "decoder_step.onnx": {"Gather", "LSTM", "Softmax"}},
    "vision": {"model.onnx": {"Conv"}},  # every classifier starts with one (the ViT's patches)
}


def graphs_of(folder):
    """The graphs of `folder`: cases.json's models, or those manifest.json names."""
    manifest = os.path.join(folder, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            m = json.load(f)
        # The recurrent and image families name their graphs as the Transformer does (or not at all).
        own = FAMILY_EXPECT.get(m["family"], {})
        return [dict(g, expect_ops=sorted(own[g["file"]])) if g["file"] in own else g for g in m["graphs"]]
    with open(os.path.join(folder, "cases.json")) as f:
        return json.load(f)["models"]


def main(folders):
    models = []
    for folder in folders:
        models += [dict(m, file=os.path.join(folder, m["file"])) for m in graphs_of(folder)]
    bad = 0
    for m in models:
        path = m["file"]
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        ops = {n.op_type for n in model.graph.node}
        # A model's own list (cases.json "expect_ops") or the table above.
        missing = set(m.get("expect_ops", EXPECT.get(os.path.basename(m["file"]), []))) - ops
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
    sys.exit(main(sys.argv[1:]))
