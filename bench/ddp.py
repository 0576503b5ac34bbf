"""Data-parallel training, xgrad against PyTorch DDP, side by side in one run.

For each config and process count P (1 thread per process): xgrad's
`xg_bench ddp` (under `mpirun -np P`, DataParallel over OpenMPI) and PyTorch's
bench/torch_ddp.py (DistributedDataParallel, gloo over loopback). Weak scaling:
--batch is per process, so a step at P processes trains P times the sequences.
P = 1 is the plain model on each side (no communication).

Prints, per row: median step ms, tokens/s, the speed-up over P = 1 of the same
side and its efficiency (speed-up / P), xgrad / PyTorch tokens/s, and for
xgrad the time a step blocked in wait() against one blocking allreduce of the
same bytes alone: hidden = 1 - wait / alone (communication overlapped with
backward). OPENBLAS_CORETYPE is unset for both sides; the BLAS core is printed.

    bash bench/ddp.sh [--configs small,annotated,base] [--precision f32,bf16] [--steps 10]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
from compare import CONFIGS, model_flags  # noqa: E402


def env():
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    e.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", XG_NUM_THREADS="1", OMP_WAIT_POLICY="passive",
             OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return e


def run(cmd):
    out = subprocess.run(cmd, env=env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ddp.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return rows[0]


def med(v):
    s = sorted(v)
    return s[len(s) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="small,annotated,base")
    p.add_argument("--precision", default="f32")
    p.add_argument("--processes", default="1,2")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    a = p.parse_args()
    xg = os.path.join(a.build, "bench", "xg_bench")
    results = []
    for cfg in a.configs.split(","):
        if cfg not in CONFIGS:
            raise SystemExit(f"ddp.py: unknown config {cfg} (one of {', '.join(CONFIGS)})")
        for prec in a.precision.split(","):
            for P in [int(x) for x in a.processes.split(",")]:
                flags = model_flags(cfg) + ["--steps", str(a.steps), "--warmup", str(a.warmup), "--precision", prec]
                mpirun = ["mpirun", "-np", str(P)] if P > 1 else []
                x = run(mpirun + [xg, "ddp"] + flags + ["--threads", "1"])
                t = run(["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py")] + flags + ["--processes", str(P)])
                for side, r in (("xgrad", x), ("pytorch", t)):
                    r["config"], r["side"] = cfg, side
                    r["median_ms"] = med(r["ms"])
                    r["tokens_per_s"] = r["tokens_per_step"] / r["median_ms"] * 1000
                    results.append(r)
                    print(json.dumps({k: v for k, v in r.items() if k not in ("ms", "wait_ms")}), flush=True)
    print()
    print(f"BLAS core: {results[0].get('core', '?')} (OPENBLAS_CORETYPE unset), 1 thread per process")
    print("| config | precision | P | xgrad ms | xgrad tok/s | xgrad speed-up (eff.) | PyTorch ms | PyTorch tok/s "
          "| PyTorch speed-up (eff.) | xgrad/PyTorch tok/s | xgrad wait ms | allreduce alone ms | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = {}
    for r in results:
        if r["processes"] == 1:
            base[(r["config"], r["precision"], r["side"])] = r["tokens_per_s"]
    by = {}
    for r in results:
        by.setdefault((r["config"], r["precision"], r["processes"]), {})[r["side"]] = r
    for (cfg, prec, P), sides in by.items():
        x, t = sides["xgrad"], sides["pytorch"]
        sx = x["tokens_per_s"] / base[(cfg, prec, "xgrad")]
        st = t["tokens_per_s"] / base[(cfg, prec, "pytorch")]
        wait = med(x["wait_ms"]) if x.get("wait_ms") else 0.0
        alone = x.get("allreduce_ms", 0.0)
        hidden = f"{max(0.0, 1 - wait / alone):.2f}" if P > 1 and alone > 0 else "-"
        print(f"| {cfg} | {prec} | {P} | {x['median_ms']:.1f} | {x['tokens_per_s']:.0f} | {sx:.2f}x ({sx / P:.2f}) "
              f"| {t['median_ms']:.1f} | {t['tokens_per_s']:.0f} | {st:.2f}x ({st / P:.2f}) "
              f"| {x['tokens_per_s'] / t['tokens_per_s']:.2f} | {wait:.1f} | {alone:.1f} | {hidden} |")


if __name__ == "__main__":
    main()
