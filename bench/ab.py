#!/usr/bin/env python3
"""Two builds of xg_bench, step for step: is the new one slower, does it use more memory?

    python3 bench/ab.py OLD_XG_BENCH NEW_XG_BENCH [--configs tiny,small,annotated,base] [--threads 1,2]
                        [--rounds 3] [--precision f32]

Runs OLD and NEW alternately (OLD, NEW, OLD, NEW, ...) on the benchmark's
training configs, OPENBLAS_CORETYPE unset, and prints per config the median
step of each (medians over every step of every round), the ratio NEW/OLD, and
peak RSS (the median over the rounds, and its range: at 2 threads one
binary's peak moves by tens of MB between identical runs) and peak tensor
bytes of each.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CONFIGS, model_flags  # noqa: E402


def run(binary, cfg, threads, precision, steps):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    cmd = [binary, "train"] + model_flags(cfg) + ["--steps", str(steps), "--threads", str(threads)]
    if precision != "f32":
        cmd += ["--precision", precision]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--configs", default="tiny,small,annotated,base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    a = p.parse_args()
    for b in (a.old, a.new):
        if not os.access(b, os.X_OK):
            sys.exit(f"ab.py: {b} is not an executable")
    configs = a.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"ab.py: unknown config '{c}', expected one of {', '.join(CONFIGS)}")
    threads = [int(t) for t in a.threads.split(",")]
    if a.rounds < 1:
        sys.exit("ab.py: --rounds must be at least 1")
    print(f"{'config':<10} {'thr':>3} {'old ms':>9} {'new ms':>9} {'new/old':>8} "
          f"{'old rss':>8} {'new rss':>8} {'old tensor':>10} {'new tensor':>10}  (MB; rss: medians, then ranges)")
    for cfg in configs:
        # Steps run, and the first ones left out: the small configs take about
        # ten steps to reach their steady speed (measured: 16-25 ms, then 12-15).
        steps, skip = {"tiny": (60, 10), "small": (40, 10), "annotated": (8, 2), "base": (5, 1)}[cfg]
        for t in threads:
            ms = {"old": [], "new": []}
            rss = {"old": [], "new": []}
            tensor = {}
            for _ in range(a.rounds):
                for side, b in (("old", a.old), ("new", a.new)):
                    r = run(b, cfg, t, a.precision, steps)
                    ms[side] += r["ms"][skip:]
                    rss[side].append(r["rss_mb"])
                    tensor[side] = r["tensor_peak_mb"]
            mo, mn = statistics.median(ms["old"]), statistics.median(ms["new"])
            ro, rn = statistics.median(rss["old"]), statistics.median(rss["new"])
            span = lambda v: f"{min(v):.1f}-{max(v):.1f}"  # noqa: E731
            print(f"{cfg:<10} {t:>3} {mo:>9.2f} {mn:>9.2f} {mn / mo:>8.3f} {ro:>8.1f} {rn:>8.1f} "
                  f"{tensor['old']:>10.1f} {tensor['new']:>10.1f}  rss old {span(rss['old'])}, new {span(rss['new'])}",
                  flush=True)


if __name__ == "__main__":
    main()
