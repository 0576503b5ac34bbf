"""The table of bench/conv_bench.sh: for each layer and thread count, ms per
step and GFLOP/s of every path, and xgrad's ratio to PyTorch (xgrad ms /
PyTorch ms: below 1 is faster), float32 (the oneDNN path in its default
layout against torch f32) and bf16 (against torch bf16 autocast). PyTorch's figure is its
fastest run at that thread count. Then batch norm and max pooling: xgrad's
own loops against oneDNN's primitives on NCHW and on nChw16c."""
import json
import sys


def fastest(path, name):
    """The rows of `path` that carry `name` ("layer" or "op"), and the fastest
    of each (name, threads, path)."""
    rows = [json.loads(line) for line in open(path) if line.startswith("{") and f'"{name}"' in line]
    best = {}
    for r in rows:
        key = (r[name], r["threads"], r["path"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    return rows, best


def main(path):
    rows, best = fastest(path, "layer")
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    paths = ["im2col", "onednn", "onednn_blocked", "onednn_plain", "torch_f32", "onednn_bf16", "onednn_bf16_blocked",
             "onednn_bf16_plain", "torch_bf16"]
    for t in (1, 2):
        print(f"\nthreads {t}: ms per step (GFLOP/s)")
        print(f"{'layer':26}" + "".join(f"{p:>20}" for p in paths) + f"{'f32 ratio':>11}{'bf16 ratio':>11}")
        tot = {p: 0.0 for p in paths}
        for layer in layers:
            cells = ""
            for p in paths:
                r = best.get((layer, t, p))
                cells += f"{r['ms']:>11.2f} ({r['gflops']:>5.0f})" if r else f"{'-':>20}"
                if r:
                    tot[p] += r["ms"]
            print(f"{layer:26}{cells}{ratio(best, layer, t, 'onednn', 'torch_f32')}"
                  f"{ratio(best, layer, t, 'onednn_bf16', 'torch_bf16')}")
        cells = "".join(f"{tot[p]:>20.2f}" if tot[p] else f"{'-':>20}" for p in paths)
        f32 = tot["onednn"] / tot["torch_f32"] if tot["torch_f32"] else float("nan")
        b16 = tot["onednn_bf16"] / tot["torch_bf16"] if tot["torch_bf16"] and tot["onednn_bf16"] else float("nan")
        print(f"{'all layers':26}{cells}{f32:>11.2f}{b16:>11.2f}")
    planes(*fastest(path, "op"))


def planes(rows, best):
    ops = list(dict.fromkeys(r["op"] for r in rows))
    paths = ["xgrad", "onednn_nchw", "onednn_blocked"]
    for t in (1, 2):
        print(f"\nthreads {t}: ms per forward + backward; xgrad / oneDNN")
        print(f"{'op':26}" + "".join(f"{p:>16}" for p in paths) + f"{'/ nchw':>9}{'/ blocked':>11}")
        for op in ops:
            ms = [best[(op, t, p)]["ms"] if (op, t, p) in best else float("nan") for p in paths]
            print(f"{op:26}" + "".join(f"{m:>16.2f}" for m in ms) + f"{ms[0] / ms[1]:>9.2f}{ms[0] / ms[2]:>11.2f}")


def ratio(best, layer, t, mine, theirs):
    a, b = best.get((layer, t, mine)), best.get((layer, t, theirs))
    return f"{a['ms'] / b['ms']:>11.2f}" if a and b else f"{'-':>11}"


if __name__ == "__main__":
    main(sys.argv[1])
