"""Every speed figure of docs/performance.md against PyTorch, in one table, with one command.

    /usr/bin/python3 bench/all.py [--only tiny,small,annotated,base,resnet,vit,lstm] [--threads 1,2]
                                  [--precisions f32,bf16] [--rounds 2] [--steps 10] [--seconds 30]
    (after a Release build in build/; bash bench/run.sh --all prepares a fresh machine and runs it)

Workloads: a training step of the four Transformer configurations of
bench/compare.py (xg_bench train against bench/torch_bench.py), of ResNet-20
and the ViT of apps/vision (`vision train --time-limit` against
bench/vision.py, the same model, data and recipe), and a forward + backward of
one LSTM layer of shape B x T x C x H = 64 x 32 x 256 x 512 (xg_bench rnn
against bench/rnn.py's PyTorch side). Each in float32 and in bf16 (xgrad's
--precision bf16, PyTorch's torch.autocast), at each thread count.

How: --rounds rounds, each running xgrad and then PyTorch, so that a burst of
load from another tenant falls on both sides. PyTorch runs at every thread
variant of torch_variants() and its best counts. OPENBLAS_CORETYPE is removed
for both sides (a user's machine does not set it), and both run with glibc's
malloc keeping freed memory (compare.env_for: bench/malloc_tunables). Every figure is a median:
of the steps (Transformers, LSTM; over all rounds) or of the rounds' images
per second (vision, each round --seconds of training, start-up excluded).
Peak RSS is each process's own (wait4's ru_maxrss, or the same peak as
xg_bench reports it where it prints one), the largest over the rounds; PyTorch's includes its import, printed on its own at the start; the
LSTM's xgrad side reports its peak before its product timings allocate their
buffers. The share of peak is the products' floating-point work (the
benchmarks' own count for the Transformers and the LSTM: 3 x the forward
products; for the vision models 3 x the forward's convolutions and matrix
products as PyTorch's profiler counts them) over the time, against the
machine's peak at that thread count as bench/compare.py measures it
(sgemm_peaks: bf16, the engine on a 1024^3 product; float32, the best of the
engine and OpenBLAS there). Where the CPU cannot run bf16 at speed, the bf16
rows are left out and the reason printed.

Prints the CPU (lscpu's model and family, and the flags that decide the
kernels), then one Markdown table, a row as each is measured, then xgrad's
bf16 speed-up over its own float32. Ratios below 1 mean xgrad is faster or smaller.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare import CONFIGS, SPLITS, both, env_for, malloc_tunables, model_flags, one_of, positive, sgemm_peaks  # noqa: E402

XG_BENCH = os.path.join(ROOT, "build", "bench", "xg_bench")
VISION = os.path.join(ROOT, "build", "apps", "vision", "vision")
PY = "/usr/bin/python3"
VISION_BATCH = 128  # vision train's and bench/vision.py's default batch
LSTM = (64, 32, 256, 512)  # B, T, C, H: issue 28's shape
WORKLOADS = list(CONFIGS) + ["resnet", "vit", "lstm"]
FLAGS_SHOWN = ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


def torch_variants(threads):
    """PyTorch's thread variants at `threads`: (its OpenMP pool, OpenBLAS's, OMP_WAIT_POLICY or
    "default" for unset). Its bf16 matrix products and convolutions run on oneDNN in its OpenMP
    pool, its float32 matrix products on OpenBLAS. Unset, libgomp's workers spin a while before
    they sleep, which on 2 shared cores can cost more than the second core gives, or help."""
    out = [(omp, blas, "passive") for omp, blas in SPLITS[threads]]
    if threads > 1:
        out.append((threads, 1, "default"))
    return out


def run(cmd, variant):
    """Runs cmd at `variant`; returns (its standard output, the peak RSS in MB of that process alone)."""
    omp, blas, policy = variant
    env = env_for(omp, blas)
    if policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                                               (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)  # this child's own rusage, not all children's
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"all.py: {' '.join(cmd)} exited with {code}:\n{errors[-2000:]}")
    return text, usage.ru_maxrss / 1024.0


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def final_line(text):
    """vision's and bench/vision.py's last line: "final steps=N ... train_seconds=S" as a dict."""
    line = [line for line in text.splitlines() if line.startswith("final steps=")][-1]
    return {k: float(v) for k, v in (item.split("=", 1) for item in line.split() if "=" in item)}


def vision_flops(model):
    """Floating-point work of one training image: 3 x the forward's convolutions and matrix
    products, as PyTorch's profiler counts them on bench/vision.py's model."""
    code = (f"import sys, torch; sys.path.insert(0, {HERE!r}); import vision\n"
            f"m = vision.build({model!r})\nm = m[0] if isinstance(m, tuple) else m\n"
            "with torch.autograd.profiler.profile(with_flops=True) as p:\n"
            "    m(torch.randn(8, 1, 28, 28))\n"
            "print(3 * sum(e.flops for e in p.function_events if e.flops and e.name in "
            "('aten::conv2d', 'aten::addmm', 'aten::mm', 'aten::bmm', 'aten::matmul')) / 8)")
    return float(subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1])


class Side:
    """One side's measurements of one workload, precision and thread count (or variant)."""

    def __init__(self):
        self.values, self.rss = [], 0.0

    def add(self, values, rss):
        self.values += values
        self.rss = max(self.rss, rss)

    def ms(self):
        return statistics.median(self.values)


def step_ms(text):
    """A run's step times in ms: the JSON line's list (xg_bench, torch_bench.py, rnn.py), or
    for the vision programs the training time over the steps of their last line."""
    if any(line.startswith("final steps=") for line in text.splitlines()):
        f = final_line(text)
        return [1000 * f["train_seconds"] / f["steps"]]
    return last_json(text)["ms"]


def measure(workload, precision, threads, a):
    """One round: xgrad's run, then PyTorch's at each of its variants. Returns (xgrad's
    (ms list, rss, flops per step or None), {variant: (ms list, rss)})."""
    if workload in CONFIGS:
        common = ["train"] + model_flags(workload) + ["--steps", str(a.steps), "--precision", precision]
        xg_cmd = [XG_BENCH] + common
        torch_cmd = [PY, os.path.join(HERE, "torch_bench.py")] + common
    elif workload == "lstm":
        B, T, C, H = LSTM
        common = ["--cell", "lstm", "--batch", str(B), "--len", str(T), "--input", str(C), "--hidden", str(H),
                  "--precision", precision, "--reps", str(a.steps)]
        xg_cmd = [XG_BENCH, "rnn"] + common
        torch_cmd = [PY, os.path.join(HERE, "rnn.py"), "torch"] + common
    else:  # vision: ms per step from a timed run
        common = ["--model", workload, "--time-limit", str(a.seconds), "--batch", str(VISION_BATCH)]
        xg_cmd = [VISION, "train", "--precision", precision, "--eval-every", "1000000",
                  "--log-every", "1000000"] + common
        torch_cmd = [PY, os.path.join(HERE, "vision.py")] + common + (["--bf16"] if precision == "bf16" else [])
    text, rss = run(xg_cmd + ["--threads", str(threads)], (1, 1, "passive"))
    x = {} if workload in ("resnet", "vit") else last_json(text)
    # xg_bench's own peak where it reports one: rnn's leaves out the buffers of
    # its product timings; train's is the process's peak, as wait4's
    xg = (step_ms(text), x.get("rss_mb", rss), x.get("flops"))
    pt = {}
    for v in torch_variants(threads):
        text, rss = run(torch_cmd + ["--threads", str(v[0])], v)
        pt[v] = (step_ms(text), rss)
    return xg, pt


def cpu_lines():
    info = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        k, _, v = line.partition(":")
        info[k.strip()] = v.strip()
    flags = set(info.get("Flags", "").split())
    return [f"CPU: {info.get('Model name', '?')} (family {info.get('CPU family', '?')}, model {info.get('Model', '?')}), "
            f"{os.cpu_count()} CPUs; kernel {platform.release()}",
            "flags: " + ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in FLAGS_SHOWN)]


def variant_name(v):
    return f"torch {v[0]}/BLAS {v[1]}" + (", default wait" if v[2] == "default" else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", type=one_of(WORKLOADS), default=",".join(WORKLOADS))
    p.add_argument("--threads", type=one_of([str(n) for n in sorted(SPLITS) if n <= (os.cpu_count() or 1)]),
                   default=",".join(str(n) for n in sorted(SPLITS) if n <= (os.cpu_count() or 1)))
    p.add_argument("--precisions", type=one_of(["f32", "bf16"]), default="f32,bf16")
    p.add_argument("--rounds", type=positive, default=2)
    p.add_argument("--steps", type=positive, default=10, help="timed steps per run (Transformers, LSTM)")
    p.add_argument("--seconds", type=positive, default=30, help="training seconds per run (vision)")
    a = p.parse_args()
    needed = [XG_BENCH] + ([VISION] if {"resnet", "vit"} & set(a.only) else [])
    for path in needed:
        if not os.path.exists(path):
            sys.exit(f"all.py: {path} not found: build first (bash scripts/build.sh)")
    print(f"bench/all.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()}")
    print("\n".join(cpu_lines()))
    text, import_rss = run([PY, "-c", "import torch; print(torch.__version__)"], (1, 1, "passive"))
    print(f"OPENBLAS_CORETYPE removed and GLIBC_TUNABLES={malloc_tunables()} for both sides; "
          f"PyTorch {text.strip()}, whose import alone takes "
          f"{import_rss:.0f} MB of RSS", flush=True)
    peaks = {}
    for t in [int(t) for t in a.threads]:
        xs, ts = both(["sgemm"], t)
        peaks[t] = sgemm_peaks(xs[0], ts[0])
        print(f"peak at {t} thread(s), GFLOP/s: f32 {peaks[t]['f32']:.0f}, bf16 {peaks[t]['bf16']:.0f}", flush=True)
    print(f"xgrad's engine: {xs[0]['engine']}", flush=True)  # bf16's route among it (docs/performance.md)
    precisions = list(a.precisions)
    if "bf16" in precisions and not all(peaks[t]["bf16"] > 0 for t in peaks):
        precisions.remove("bf16")
        why = subprocess.run([XG_BENCH, "train", "--precision", "bf16", "--steps", "1"], capture_output=True,
                             text=True).stderr.strip().splitlines()
        print(f"bf16 rows left out: {why[-1] if why else 'this CPU has no bf16 products at speed'}")
    flops_per_image = {w: vision_flops(w) for w in a.only if w in ("resnet", "vit")}
    print("\n| workload | precision | threads | xgrad ms/step | PyTorch ms/step | PyTorch's best variant "
          "| xgrad / PyTorch | xgrad % of peak | PyTorch % of peak | peak RSS MB xgrad / PyTorch | RSS ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    own = {}
    for w in a.only:
        for prec in precisions:
            for t in [int(t) for t in a.threads]:
                xg, pt, flops = Side(), {}, None
                for _ in range(a.rounds):
                    (x_ms, x_rss, flops), got = measure(w, prec, t, a)
                    xg.add(x_ms, x_rss)
                    for v, (ms, rss) in got.items():
                        pt.setdefault(v, Side()).add(ms, rss)
                best = min(pt, key=lambda v: pt[v].ms())
                if flops is None:
                    flops = flops_per_image[w] * VISION_BATCH
                sx, sp = (flops / (side.ms() / 1000) / 1e9 / peaks[t][prec] for side in (xg, pt[best]))
                own[(w, prec, t)] = xg.ms()
                x, pm = xg.ms(), pt[best].ms()
                # each row as it is measured: a run cut short keeps what it has
                print(f"| {w} | {prec} | {t} | {x:.1f} | {pm:.1f} | {variant_name(best)} | {x / pm:.2f} | {sx:.0%} "
                      f"| {sp:.0%} | {xg.rss:.0f} / {pt[best].rss:.0f} | {xg.rss / pt[best].rss:.2f} |", flush=True)
    speedups = [f"{w} {t}t {own[(w, 'f32', t)] / own[(w, 'bf16', t)]:.2f}x" for w in a.only
                for t in [int(t) for t in a.threads] if (w, "f32", t) in own and (w, "bf16", t) in own]
    if speedups:
        print("\nxgrad's bf16 speed-up over its own float32 (time per step): " + ", ".join(speedups))
    print(f"\nload average at end: {os.getloadavg()}")

if __name__ == "__main__":
    main()
