"""Runs xgrad and PyTorch side by side, alternating, on the same machine in one run.

    /usr/bin/python3 bench/compare.py [--configs tiny,small,annotated,base] [--threads 1,2]
                                      [--steps 20] [--rounds 2] [--skip-converge] [--skip-micro]
                                      [--skip-decode]

Prints a table, and one machine-readable line per comparison:
    ratio <config> <metric> <xgrad/pytorch>
Ratios below 1 mean xgrad is faster (or smaller). Training is measured in
--rounds alternating runs of each side (xgrad, PyTorch, xgrad, PyTorch, ...),
so that a burst of load from another tenant falls on both; the median is over
the steps of all rounds, the spread their min..max, and the peak RSS the
largest of the rounds. The load average is recorded
because the machines are shared.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
XG = os.path.join(ROOT, "build", "bench", "xg_bench")
TORCH = [sys.executable, os.path.join(HERE, "torch_bench.py")]

# vocab, length, d_model, heads, layers, d_ff, batch
CONFIGS = {
    "tiny": (16, 12, 64, 4, 2, 256, 64),
    "small": (16, 16, 128, 4, 2, 512, 64),
    "annotated": (11, 10, 512, 8, 2, 2048, 80),
    "base": (1000, 64, 512, 8, 6, 2048, 16),
}


def run(cmd, threads):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    # PyTorch's best 2-core setting here: its own pool at 1 thread, OpenBLAS at `threads`
    # (torch.set_num_threads(2) makes its OpenMP workers spin against OpenBLAS's).
    env["OMP_NUM_THREADS"] = "1"
    env["OMP_WAIT_POLICY"] = "passive"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def model_flags(cfg):
    v, l, c, h, n, f, b = CONFIGS[cfg]
    return ["--vocab", str(v), "--len", str(l), "--d-model", str(c), "--heads", str(h), "--layers", str(n),
            "--d-ff", str(f), "--batch", str(b)]


def both(args_list, threads):
    """xgrad then PyTorch, same arguments, same thread count."""
    xg = run([XG] + args_list + ["--threads", str(threads)], threads)
    pt = run(TORCH + args_list + ["--threads", str(threads)], threads)
    return xg, pt


def med(ms):
    return statistics.median(ms)


def spread(ms):
    return f"{min(ms):.1f}..{max(ms):.1f}"


W = 42  # width of the measurement column


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="tiny,small,annotated,base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--skip-converge", action="store_true")
    p.add_argument("--skip-micro", action="store_true")
    p.add_argument("--skip-decode", action="store_true")
    a = p.parse_args()
    if not os.path.exists(XG):
        sys.exit(f"{XG} not found: build first (bash bench/run.sh does)")
    ratios, rows = [], []

    class Rows(list):
        def append(self, row):  # each row is also printed at once (long runs can be cut short)
            super().append(row)
            name, thr, x, t, r = row
            print(f"{name:<{W}}  {thr:>3}  {x:<28} {t:<28} {r}", flush=True)

    rows = Rows()

    def ratio(cfg, metric, x, t):
        r = x / t
        ratios.append(f"ratio {cfg} {metric} {r:.3f}")
        return r

    print(f"load average at start: {os.getloadavg()}", flush=True)
    for threads in [int(t) for t in a.threads.split(",")]:
        peak = {}
        xs, ts = both(["sgemm"], threads)
        # One library measured from both processes: the machine's peak is the better of the two.
        peak = max(xs[0]["gflops"], ts[0]["gflops"])
        rows.append((f"sgemm 1024^3 GFLOP/s (peak)", threads, f"{xs[0]['gflops']:.1f}", f"{ts[0]['gflops']:.1f}", ""))
        for cfg in a.configs.split(","):
            v, l, c, h, n, f, b = CONFIGS[cfg]
            x, t = {"ms": [], "rss_mb": 0}, {"ms": [], "rss_mb": 0}
            for _ in range(a.rounds):
                xs, ts = both(["train"] + model_flags(cfg) + ["--steps", str(a.steps)], threads)
                for acc, got in ((x, xs[0]), (t, ts[0])):
                    acc["ms"] += got["ms"]
                    acc["rss_mb"] = max(acc["rss_mb"], got["rss_mb"])
                    acc["flops"] = got["flops"]
                    for key in ("tensor_peak_mb", "state_mb", "activations_mb"):
                        if key in got:
                            acc[key] = max(acc.get(key, 0), got[key])
            r = ratio(f"{cfg}@{threads}t", "train_ms", med(x["ms"]), med(t["ms"]))
            rows.append((f"{cfg} train ms/step", threads, f"{med(x['ms']):.1f} ({spread(x['ms'])})",
                         f"{med(t['ms']):.1f} ({spread(t['ms'])})", f"{r:.3f}"))
            tok = b * l
            xt, tt = tok / med(x["ms"]) * 1000, tok / med(t["ms"]) * 1000
            r = ratio(f"{cfg}@{threads}t", "tokens_per_s", xt, tt)
            rows.append((f"{cfg} target tokens/s", threads, f"{xt:.0f}", f"{tt:.0f}", f"{r:.3f}"))
            xg_gf = x["flops"] / (med(x["ms"]) / 1000) / 1e9
            pt_gf = t["flops"] / (med(t["ms"]) / 1000) / 1e9
            rows.append((f"{cfg} GFLOP/s (share of sgemm peak)", threads, f"{xg_gf:.1f} ({xg_gf / peak:.0%})",
                         f"{pt_gf:.1f} ({pt_gf / peak:.0%})", ""))
            ratios.append(f"ratio {cfg}@{threads}t peak_fraction_xgrad {xg_gf / peak:.3f}")
            r = ratio(f"{cfg}@{threads}t", "peak_rss", x["rss_mb"], t["rss_mb"])
            rows.append((f"{cfg} peak RSS MB", threads, f"{x['rss_mb']:.0f}", f"{t['rss_mb']:.0f}", f"{r:.3f}"))
            # Where xgrad's peak goes: tensor storage at its peak; parameters, gradients
            # and Adam's two moments (fixed); what one forward saves for backward.
            rows.append((f"{cfg} tensors peak/fixed/saved MB", threads,
                         f"{x['tensor_peak_mb']:.0f} / {x['state_mb']:.0f} / {x['activations_mb']:.0f}", "", ""))
            # PyTorch re-runs the decoder on the whole prefix at every step: on base one
            # decode takes minutes, so the large configurations time a single run.
            if a.skip_decode:
                continue
            reps = "3" if cfg in ("tiny", "small") else "1"
            xs, ts = both(["decode"] + model_flags(cfg) + ["--sequences", "64", "--reps", reps], threads)
            x, t = xs[0], ts[0]
            r = ratio(f"{cfg}@{threads}t", "greedy_decode_ms", med(x["ms"]), med(t["ms"]))
            rows.append((f"{cfg} greedy decode 64 seqs ms", threads, f"{med(x['ms']):.1f} ({spread(x['ms'])})",
                         f"{med(t['ms']):.1f} ({spread(t['ms'])})", f"{r:.3f}"))
            print(f"  done {cfg} at {threads} thread(s)", file=sys.stderr, flush=True)
    if not a.skip_micro:
        xs, ts = both(["micro"], 1)
        for x, t in zip(xs, ts):
            r = ratio("micro@1t", x["op"], med(x["ms"]), med(t["ms"]))
            rows.append((f"micro {x['op']} fwd+bwd ms", 1, f"{med(x['ms']):.3f}", f"{med(t['ms']):.3f}", f"{r:.3f}"))
    if not a.skip_converge:
        for task in ("copy", "reverse"):
            xs, ts = both(["converge", "--task", task], 1)
            x, t = xs[0], ts[0]
            r = ratio(f"{task}@1t", "seconds_to_99", x["seconds"], t["seconds"])
            rows.append((f"{task}: steps, seconds to 99% exact", 1,
                         f"{x['steps']}, {x['seconds']:.1f}s (em {x['exact_match']:.3f})",
                         f"{t['steps']}, {t['seconds']:.1f}s (em {t['exact_match']:.3f})", f"{r:.3f}"))

    print(f"\n{'measurement':<{W}}  thr  {'xgrad':<28} {'pytorch':<28} xgrad/pytorch")
    for name, thr, x, t, r in rows:
        print(f"{name:<{W}}  {thr:>3}  {x:<28} {t:<28} {r}")
    print(f"\nload average at end: {os.getloadavg()}")
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
