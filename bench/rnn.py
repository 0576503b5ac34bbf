"""One recurrent layer, xgrad against PyTorch, forward + backward (issue 28's shapes).

    /usr/bin/python3 bench/rnn.py [--build build] [--reps 10] [--shapes 64x32x256x512,16x64x512x512]
                                  [--cells lstm,gru] [--threads 1,2]

For each shape (B x T x C x H), cell, precision (f32; bf16 under autocast on
both sides) and thread count, runs `xg_bench rnn` and this file's PyTorch side
(`rnn.py torch ...`) one after the other, each in its own process with
OPENBLAS_CORETYPE unset (a user's machine does not set it), and prints a
Markdown table: median ms of a forward + backward of sum(output) with the
input requiring a gradient, PyTorch at its best thread split (the splits of
bench/compare.py: at n threads, its OpenMP pool and OpenBLAS's set to 1 and n
or n and 1; the fastest of every split up to n threads counts; without OPENBLAS_NUM_THREADS Debian's
OpenBLAS would use every core under torch.set_num_threads(1)), the ratio,
GFLOP/s (3 x the forward products), and the share of xgrad's time its
products alone take at the engine's best speed on each of their shapes (100%
= the layer does nothing but its products). In f32 it also runs
`onednn_rnn` (bench/onednn_rnn.cpp): oneDNN's own LSTM and linear-before-
reset GRU primitives on the same shape, the alternative to xgrad's kernels.
Where xgrad cannot run bf16 (no AVX512_BF16), the bf16 rows are left out and
the reason printed.
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import SPLITS, env_for  # noqa: E402  (the one definition of PyTorch's thread splits)


def torch_side(argv):
    a = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    import torch

    threads = int(a.get("threads", 1))
    torch.set_num_threads(threads)
    B, T, C, H = (int(a[k]) for k in ("batch", "len", "input", "hidden"))
    cell, precision = a.get("cell", "lstm"), a.get("precision", "f32")
    reps, warm = int(a.get("reps", 10)), int(a.get("warmup", 3))
    torch.manual_seed(1)
    layer = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(C, H, batch_first=True)
    x = torch.randn(B, T, C, requires_grad=True)
    times = []
    for r in range(warm + reps):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        t0 = time.perf_counter()
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y, _ = layer(x)
        else:
            y, _ = layer(x)
        y.float().sum().backward()
        if r >= warm:
            times.append((time.perf_counter() - t0) * 1000)
    G = 4 if cell == "lstm" else 3
    print(json.dumps({"mode": "rnn", "side": "torch", "cell": cell, "threads": threads, "precision": precision,
                      "median_ms": statistics.median(times), "ms": times,
                      "flops": 3 * 2 * B * T * G * H * (C + H), "torch": torch.__version__}))


def run(cmd, split, allow_fail=False):
    out = subprocess.run(cmd, env=env_for(*split), capture_output=True, text=True)
    if out.returncode != 0:
        if allow_fail:
            return {"error": out.stderr.strip()}
        raise SystemExit(f"rnn.py: {' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv):
    a = {argv[i][2:]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    build = a.get("build", "build")
    xg = os.path.join(build, "bench", "xg_bench")
    onednn = os.path.join(build, "bench", "onednn_rnn")
    if not os.path.exists(xg):
        raise SystemExit(f"rnn.py: {xg} not found (cmake --build {build} --target xg_bench)")
    try:
        reps = str(int(a.get("reps", "10")))
        shapes = [tuple(int(v) for v in s.split("x"))
                  for s in a.get("shapes", "64x32x256x512,16x64x512x512").split(",")]
        threads = [int(t) for t in a.get("threads", "1,2").split(",")]
    except ValueError as e:
        raise SystemExit(f"rnn.py: --reps, --shapes (BxTxCxH,...) and --threads (N,...) take whole numbers: {e}")
    cells = a.get("cells", "lstm,gru").split(",")
    if int(reps) < 1 or any(len(s) != 4 or min(s) < 1 for s in shapes) or any(t not in SPLITS for t in threads) \
            or any(c not in ("lstm", "gru") for c in cells):
        raise SystemExit(f"rnn.py: expected --reps >= 1, --shapes of four positive sizes, --threads among "
                         f"{sorted(SPLITS)}, --cells among lstm,gru")
    rows, notes = [], []
    core = None
    for (B, T, C, H) in shapes:
        for cell in cells:
            for precision in ("f32", "bf16"):
                split_ms = {}  # every split PyTorch ran up to n threads: its best with n cores at hand
                for n in threads:
                    common = ["--cell", cell, "--batch", str(B), "--len", str(T), "--input", str(C), "--hidden", str(H),
                              "--precision", precision, "--threads", str(n), "--reps", reps]
                    x = run([xg, "rnn"] + common, (1, 1), allow_fail=precision == "bf16")
                    if "error" in x:
                        notes.append(f"bf16 left out: {x['error']}")
                        break
                    core = x["core"]
                    for split in SPLITS[n]:
                        t = run(["/usr/bin/python3", __file__, "torch"] + common[:-4] + ["--threads", str(split[0]),
                                                                                          "--reps", reps], split)
                        split_ms[split] = t["median_ms"]
                    best_split = min(split_ms, key=split_ms.get)
                    best = split_ms[best_split]
                    prim = float("nan")
                    if precision == "f32" and os.path.exists(onednn):
                        prim = run([onednn] + common[:-6] + ["--threads", str(n), "--reps", reps], (n, 1))["median_ms"]
                    rows.append((f"{B}x{T}x{C}x{H}", cell, precision, n, x["median_ms"], best,
                                 f"{best_split[0]}/{best_split[1]}", x["median_ms"] / best,
                                 x["flops"] / x["median_ms"] / 1e6, x["flops"] / best / 1e6,
                                 100 * x["products_ms"] / x["median_ms"], x["products"], prim))
                    print(f"rnn.py: {rows[-1][:11]} PyTorch's splits {split_ms}", file=sys.stderr, flush=True)
    print(f"OpenBLAS core {core}, OPENBLAS_CORETYPE unset; median ms of one forward + backward; PyTorch "
          f"{torch_version()} at its best split up to that many threads (torch threads/OpenBLAS threads); ratio = xgrad / PyTorch\n")
    for note in sorted(set(notes)):
        print(f"{note}\n")
    print("| B x T x C x H | cell | precision | threads | xgrad ms | PyTorch ms | its split | ratio "
          "| xgrad GFLOP/s | PyTorch GFLOP/s | products' share of xgrad's time | oneDNN RNN primitive ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]} | {r[7]:.2f} | {r[8]:.0f} "
              f"| {r[9]:.0f} | {r[10]:.0f}% | {r[12]:.1f} |")
    print("\nxgrad's products, each at the engine's best speed on its shape (m x n x k, transposed A/B, "
          "times per step: GFLOP/s):\n")
    for r in rows:
        if r[3] == 1:
            each = ", ".join(f"{m}x{n_}x{k}{' tA' if ta else ''}{' tB' if tb else ''} x{c}: "
                             f"{2 * m * n_ * k / ms / 1e6:.0f}" for m, n_, k, ta, tb, c, ms in r[11])
            print(f"- {r[0]} {r[1]} {r[2]}: {each}")


def torch_version():
    out = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"], capture_output=True,
                         text=True)
    return out.stdout.strip() or "(not found)"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        torch_side(sys.argv[2:])
    else:
        main(sys.argv[1:])
