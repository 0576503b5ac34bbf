"""Runs xgrad and PyTorch side by side, alternating, on the same machine in one run.

    /usr/bin/python3 bench/compare.py [--configs tiny,small,annotated,base] [--threads 1,2]
                                      [--precisions f32,bf16] [--steps 20] [--rounds 2]
                                      [--skip-converge] [--converge-seeds 3] [--skip-micro] [--skip-decode]
                                      [--skip-side-by-side] [--keep-coretype]

Both sides run with OPENBLAS_CORETYPE removed from the environment (what a
user's machine has; these machines set it to Haswell, which halves
OpenBLAS's speed): --keep-coretype keeps it. The BLAS core of each side is
printed. Both sides run with glibc's malloc keeping freed memory
(GLIBC_TUNABLES from bench/malloc_tunables), as PyTorch's performance tuning
guide advises a caching allocator (jemalloc or TCMalloc) for CPU training:
with glibc's defaults each of PyTorch's large tensors is a fresh mmap, whose
pages fault in again at every step (on a VM with costly page faults, twice
the step time). xgrad caches its blocks itself. PyTorch runs f32, and bf16 under torch.autocast, each at its best
thread split: at 2 threads both "torch 1 thread, OpenBLAS 2" and "torch 2
threads (passive wait), OpenBLAS 1" run, and the faster counts.

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


KEEP_CORETYPE = False

# PyTorch's thread splits: (its own OpenMP pool, OpenBLAS). Its bf16 matmuls
# run on oneDNN in the OpenMP pool, its f32 ones on OpenBLAS, so which split
# is best depends on the precision.
SPLITS = {1: [(1, 1)], 2: [(1, 2), (2, 1)]}


def malloc_tunables():
    """glibc's malloc settings of both sides (bench/malloc_tunables, shared with the .sh benchmarks):
    freed memory stays in the process rather than being unmapped."""
    with open(os.path.join(HERE, "malloc_tunables")) as f:
        return f.read().strip()


def env_for(omp, blas):
    env = dict(os.environ)
    if not KEEP_CORETYPE:
        env.pop("OPENBLAS_CORETYPE", None)
    env["GLIBC_TUNABLES"] = malloc_tunables()
    env["OPENBLAS_NUM_THREADS"] = str(blas)
    env["OMP_NUM_THREADS"] = str(omp)
    env["OMP_WAIT_POLICY"] = "passive"  # torch.set_num_threads(2) spins otherwise
    return env


def run(cmd, threads, split=None):
    omp, blas = split if split else (1, threads)
    out = subprocess.run(cmd, env=env_for(omp, blas), capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def model_flags(cfg):
    v, l, c, h, n, f, b = CONFIGS[cfg]
    return ["--vocab", str(v), "--len", str(l), "--d-model", str(c), "--heads", str(h), "--layers", str(n),
            "--d-ff", str(f), "--batch", str(b)]


def both(args_list, threads):
    """xgrad then PyTorch, same arguments, same thread count (PyTorch's first split)."""
    xg = run([XG] + args_list + ["--threads", str(threads)], threads)
    pt = run(TORCH + args_list + ["--threads", str(threads)], threads)
    return xg, pt


def side_by_side(cfg_flags, threads, steps):
    """Two xgrad training jobs at once, each at `threads`: the median step of each."""
    cmd = [XG, "train"] + cfg_flags + ["--steps", str(steps), "--threads", str(threads)]
    procs = [subprocess.Popen(cmd, env=env_for(1, 1), stdout=subprocess.PIPE, text=True) for _ in range(2)]
    meds = []
    for p in procs:
        out, _ = p.communicate()
        meds.append(med(json.loads(out.splitlines()[-1])["ms"]))
    return meds


def sgemm_peaks(xg, torch):
    """The machine's peak GFLOP/s per precision, from `sgemm` of both sides (xg_bench's and
    torch_bench.py's JSON): the engine's rate on a 1024^3 product split over the pool; in float32
    the better of that and OpenBLAS's, one library measured from both processes."""
    big = [pk for pk in xg["peaks"] if pk["shape"] == "1024x1024x1024"][0]
    return {"f32": max(big["f32"], xg["gflops"], torch["gflops"]), "bf16": big["bf16"]}


def med(ms):
    return statistics.median(ms)


def spread(ms):
    return f"{min(ms):.1f}..{max(ms):.1f}"


W = 42  # width of the measurement column


def positive(text):
    """argparse type: a whole number from 1 to 10000."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 10000, got '{text}'")
    if not 1 <= n <= 10000:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 10000, got {n}")
    return n


def one_of(allowed):
    """argparse type: a comma-separated list, each item one of `allowed`."""
    def parse(text):
        items = text.split(",")
        bad = [x for x in items if x not in allowed]
        if bad or not text:
            raise argparse.ArgumentTypeError(f"'{text}': each item must be one of {', '.join(allowed)}")
        return items
    return parse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", type=one_of(list(CONFIGS)), default="tiny,small,annotated,base")
    p.add_argument("--threads", type=one_of([str(n) for n in range(1, (os.cpu_count() or 1) + 1)]), default="1,2")
    p.add_argument("--steps", type=positive, default=20)
    p.add_argument("--rounds", type=positive, default=2)
    p.add_argument("--skip-converge", action="store_true")
    p.add_argument("--converge-seeds", type=positive, default=3)
    p.add_argument("--skip-micro", action="store_true")
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--skip-side-by-side", action="store_true")
    p.add_argument("--precisions", type=one_of(["f32", "bf16"]), default="f32,bf16")
    p.add_argument("--keep-coretype", action="store_true")
    a = p.parse_args()
    global KEEP_CORETYPE
    KEEP_CORETYPE = a.keep_coretype
    precisions = a.precisions
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
    print(f"OPENBLAS_CORETYPE: {'kept as ' + os.environ.get('OPENBLAS_CORETYPE', '(unset)') if KEEP_CORETYPE else 'removed for both sides'}; "
          f"GLIBC_TUNABLES={malloc_tunables()} for both sides", flush=True)
    for threads in [int(t) for t in a.threads]:
        xs, ts = both(["sgemm"], threads)
        print(f"xgrad: {xs[0]['engine']}; PyTorch's OpenBLAS core: {ts[0]['core']}", flush=True)
        # One library measured from both processes: the machine's peak is the better of the two.
        rows.append((f"OpenBLAS sgemm 1024^3 GFLOP/s", threads, f"{xs[0]['gflops']:.1f}", f"{ts[0]['gflops']:.1f}", ""))
        for pk in xs[0]["peaks"]:
            rows.append((f"peak {pk['shape']} OpenBLAS/f32/bf16", threads,
                         f"{pk['openblas']:.0f} / {pk['f32']:.0f} / {pk['bf16']:.0f}", "", ""))
        peaks = sgemm_peaks(xs[0], ts[0])
        for cfg in a.configs:
            v, l, c, h, n, f, b = CONFIGS[cfg]
            for prec in precisions:
                x, t = {"ms": [], "rss_mb": 0}, {}
                for _ in range(a.rounds):
                    base = ["train"] + model_flags(cfg) + ["--steps", str(a.steps), "--precision", prec]
                    xs = run([XG] + base + ["--threads", str(threads)], threads)
                    got = xs[0]
                    x["ms"] += got["ms"]
                    x["rss_mb"] = max(x["rss_mb"], got["rss_mb"])
                    x["flops"] = got["flops"]
                    for key in ("tensor_peak_mb", "state_mb", "activations_mb"):
                        x[key] = max(x.get(key, 0), got[key])
                    for split in SPLITS.get(threads, [(1, threads)]):
                        got = run(TORCH + base + ["--threads", str(threads)], threads, split)[0]
                        acc = t.setdefault(split, {"ms": [], "rss_mb": 0})
                        acc["ms"] += got["ms"]
                        acc["rss_mb"] = max(acc["rss_mb"], got["rss_mb"])
                        acc["rss_import_mb"] = got["rss_import_mb"]
                        acc["flops"] = got["flops"]
                best_split = min(t, key=lambda k: med(t[k]["ms"]))
                t = t[best_split]
                tag = f"{cfg}@{threads}t:{prec}"
                split_name = f"torch {best_split[0]}/BLAS {best_split[1]}"
                r = ratio(tag, "train_ms", med(x["ms"]), med(t["ms"]))
                rows.append((f"{cfg} {prec} train ms/step", threads, f"{med(x['ms']):.1f} ({spread(x['ms'])})",
                             f"{med(t['ms']):.1f} ({spread(t['ms'])}) {split_name}", f"{r:.3f}"))
                tok = b * l
                xt, tt = tok / med(x["ms"]) * 1000, tok / med(t["ms"]) * 1000
                r = ratio(tag, "tokens_per_s", xt, tt)
                rows.append((f"{cfg} {prec} target tokens/s", threads, f"{xt:.0f}", f"{tt:.0f}", f"{r:.3f}"))
                peak = peaks[prec]
                xg_gf = x["flops"] / (med(x["ms"]) / 1000) / 1e9
                pt_gf = t["flops"] / (med(t["ms"]) / 1000) / 1e9
                rows.append((f"{cfg} {prec} GFLOP/s (% of {prec} peak {peak:.0f})", threads,
                             f"{xg_gf:.1f} ({xg_gf / peak:.0%})", f"{pt_gf:.1f} ({pt_gf / peak:.0%})", ""))
                ratios.append(f"ratio {tag} peak_fraction_xgrad {xg_gf / peak:.3f}")
                r = ratio(tag, "peak_rss", x["rss_mb"], t["rss_mb"])
                rows.append((f"{cfg} {prec} peak RSS MB (torch: less import)", threads, f"{x['rss_mb']:.0f}",
                             f"{t['rss_mb']:.0f} ({t['rss_mb'] - t['rss_import_mb']:.0f})", f"{r:.3f}"))
                ratio(tag, "peak_rss_less_import", x["rss_mb"], t["rss_mb"] - t["rss_import_mb"])
                # Where xgrad's peak goes: tensor storage at its peak; parameters, gradients
                # and Adam's two moments (fixed); what one forward saves for backward.
                rows.append((f"{cfg} {prec} tensors peak/fixed/saved MB", threads,
                             f"{x['tensor_peak_mb']:.0f} / {x['state_mb']:.0f} / {x['activations_mb']:.0f}", "", ""))
            # PyTorch re-runs the decoder on the whole prefix at every step: on base one
            # decode takes minutes, so the large configurations time a single run.
            if not a.skip_decode:
                reps = "3" if cfg in ("tiny", "small") else "1"
                dec = ["decode"] + model_flags(cfg) + ["--sequences", "64", "--reps", reps]
                xs, ts = both(dec, threads)
                xn = run([XG] + dec + ["--cache", "0", "--threads", str(threads)], threads)[0]
                x, t = xs[0], ts[0]
                r = ratio(f"{cfg}@{threads}t", "greedy_decode_ms_cache_vs_rerun", med(x["ms"]), med(t["ms"]))
                rows.append((f"{cfg} decode 64: KV cache vs full-prefix rerun", threads,
                             f"{med(x['ms']):.1f} ({spread(x['ms'])})", f"{med(t['ms']):.1f} ({spread(t['ms'])})",
                             f"{r:.3f}"))
                r = ratio(f"{cfg}@{threads}t", "greedy_decode_ms_rerun", med(xn["ms"]), med(t["ms"]))
                rows.append((f"{cfg} decode 64: both full-prefix rerun", threads,
                             f"{med(xn['ms']):.1f} ({spread(xn['ms'])})", f"{med(t['ms']):.1f} ({spread(t['ms'])})",
                             f"{r:.3f}"))
            print(f"  done {cfg} at {threads} thread(s)", file=sys.stderr, flush=True)
    if not a.skip_side_by_side:
        # Two xgrad jobs at once on the machine's cores: at 1 thread each, then at
        # 2 threads each (oversubscribed on 2 cores). The rule: 2 threads each is
        # never more than 1.25x slower per step than 1 thread each.
        for cfg in a.configs:
            steps = max(5, a.steps // (4 if cfg == "base" else 1))
            one = side_by_side(model_flags(cfg), 1, steps)
            two = side_by_side(model_flags(cfg), 2, steps)
            r = ratio(f"{cfg}:side-by-side", "two_threads_each_vs_one", max(two), max(one))
            rows.append((f"{cfg} two jobs at once, ms/step (1t, 2t each)", 2,
                         f"{one[0]:.1f}, {one[1]:.1f} | {two[0]:.1f}, {two[1]:.1f}", "", f"{r:.3f}"))
    if not a.skip_micro:
        xs, ts = both(["micro"], 1)
        for x, t in zip(xs, ts):
            r = ratio("micro@1t", x["op"], med(x["ms"]), med(t["ms"]))
            rows.append((f"micro {x['op']} fwd+bwd ms", 1, f"{med(x['ms']):.3f}", f"{med(t['ms']):.3f}", f"{r:.3f}"))
    if not a.skip_converge:
        # Steps to 99% exact match depend on the seed (the eval runs every 100
        # steps): each side and precision runs --converge-seeds seeds, and the
        # rows give the median steps and seconds, the per-seed steps beside.
        seeds = list(range(1, a.converge_seeds + 1))
        for task in ("copy", "reverse"):
            got = {}
            for prec in [p for p in ("f32", "bf16") if p in precisions]:
                for seed in seeds:
                    args_list = ["converge", "--task", task, "--precision", prec, "--seed", str(seed)]
                    xs, ts = both(args_list, 1)
                    got.setdefault(("x", prec), []).append(xs[0])
                    got.setdefault(("t", prec), []).append(ts[0])

            def cell(runs):
                steps = [r["steps"] for r in runs]
                return (f"{med(steps):.0f}, {med([r['seconds'] for r in runs]):.1f}s "
                        f"({'/'.join(str(s) for s in steps)})")

            for prec in [p for p in ("f32", "bf16") if ("x", p) in got]:
                xr, tr = got[("x", prec)], got[("t", prec)]
                r = ratio(f"{task}@1t:{prec}", "seconds_to_99",
                          med([q["seconds"] for q in xr]), med([q["seconds"] for q in tr]))
                rows.append((f"{task} {prec}: median steps, s to 99%", 1, cell(xr), cell(tr), f"{r:.3f}"))
            if ("x", "bf16") in got and ("x", "f32") in got:
                # The bf16 rule: 99% within 1.2x the f32 step count (same seeds and data).
                rx = ratio(f"{task}@1t", "bf16_steps_over_f32_xgrad",
                           med([q["steps"] for q in got[("x", "bf16")]]), med([q["steps"] for q in got[("x", "f32")]]))
                rt = ratio(f"{task}@1t", "bf16_steps_over_f32_pytorch",
                           med([q["steps"] for q in got[("t", "bf16")]]), med([q["steps"] for q in got[("t", "f32")]]))
                rows.append((f"{task}: bf16 steps / f32 steps (medians)", 1, f"{rx:.3f}", f"{rt:.3f}", ""))

    print(f"\n{'measurement':<{W}}  thr  {'xgrad':<28} {'pytorch':<28} xgrad/pytorch")
    for name, thr, x, t, r in rows:
        print(f"{name:<{W}}  {thr:>3}  {x:<28} {t:<28} {r}")
    print(f"\nload average at end: {os.getloadavg()}")
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
