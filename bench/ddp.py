"""Data-parallel training, xgrad against PyTorch DDP, side by side in one run.

For each config and process count P (1 thread per process): xgrad's
`xg_bench ddp` (under `mpirun -np P`, DataParallel over OpenMPI) and PyTorch's
bench/torch_ddp.py (DistributedDataParallel, gloo over loopback). Weak scaling:
--batch is per process, so a step at P processes trains P times the sequences.
P = 1 is the plain model on each side (no communication).

Prints, per row: median step ms, tokens/s, the speed-up over P = 1 of the same
side, xgrad / PyTorch tokens/s, and for xgrad the profile of what P processes
cost: the step of the same P processes training without any exchange (what
sharing the machine costs), the exchange's cost (step with it minus step
without), the time a step blocked in wait(), and one blocking allreduce of the
same bytes alone; hidden = 1 - cost / alone (the part of the exchange that
overlapped with backward). OPENBLAS_CORETYPE is unset for both sides and glibc malloc keeps freed
memory (bench/malloc_tunables); the BLAS core is printed.

    bash bench/ddp.sh [--configs small,annotated,base] [--precision f32,bf16] [--steps 10] [--rounds 3]

This machine's speed drifts by 10% and more over minutes (a shared VM), so
each config runs --rounds rounds, each round P = 1 then P = 2 for both sides;
a speed-up is taken within a round and the table gives the median over the
rounds with its range.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
from compare import CONFIGS, malloc_tunables, model_flags  # noqa: E402


def env():
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    e.update(GLIBC_TUNABLES=malloc_tunables(), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", XG_NUM_THREADS="1", OMP_WAIT_POLICY="passive",
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
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    a = p.parse_args()
    xg = os.path.join(a.build, "bench", "xg_bench")
    results = []
    procs = [int(x) for x in a.processes.split(",")]
    for cfg in a.configs.split(","):
        if cfg not in CONFIGS:
            raise SystemExit(f"ddp.py: unknown config {cfg} (one of {', '.join(CONFIGS)})")
        for prec in a.precision.split(","):
            for rnd in range(a.rounds):
                for P in procs:
                    flags = model_flags(cfg) + ["--steps", str(a.steps), "--warmup", str(a.warmup), "--precision", prec]
                    mpirun = ["mpirun", "-np", str(P)] if P > 1 else []
                    x = run(mpirun + [xg, "ddp"] + flags + ["--threads", "1"])
                    if P > 1:  # the same processes without any exchange: what sharing the machine costs alone
                        x["no_comm_ms"] = med(run(mpirun + [xg, "ddp"] + flags + ["--threads", "1", "--comm", "0"])["ms"])
                    t = run(["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py")] + flags + ["--processes", str(P)])
                    for side, r in (("xgrad", x), ("pytorch", t)):
                        r.update(config=cfg, side=side, round=rnd, median_ms=med(r["ms"]))
                        r["tokens_per_s"] = r["tokens_per_step"] / r["median_ms"] * 1000
                        if r.get("wait_ms"):
                            r["median_wait_ms"] = med(r["wait_ms"])
                        results.append(r)
                        print(json.dumps({k: v for k, v in r.items() if k not in ("ms", "wait_ms")}), flush=True)
    print()
    print(f"BLAS core: {results[0].get('core', '?')} (OPENBLAS_CORETYPE unset), 1 thread per process, "
          f"{a.rounds} rounds; speed-up: median over rounds [min-max], each against P = 1 of its round")
    print("| config | precision | P | xgrad ms | xgrad tok/s | xgrad speed-up | PyTorch ms | PyTorch tok/s "
          "| PyTorch speed-up | xgrad/PyTorch tok/s | xgrad no-exchange ms | exchange cost ms | wait ms "
          "| allreduce alone ms | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for r in results:
        rows.setdefault((r["config"], r["precision"], r["processes"], r["side"]), []).append(r)

    def speedups(cfg, prec, P, side):
        one = {r["round"]: r["tokens_per_s"] for r in rows[(cfg, prec, procs[0], side)]}
        return [r["tokens_per_s"] / one[r["round"]] for r in rows[(cfg, prec, P, side)]]

    def fmt_speed(v, P):
        return f"{med(v):.2f}x [{min(v):.2f}-{max(v):.2f}]"

    for (cfg, prec, P, side) in rows:
        if side != "xgrad":
            continue
        xs, ts = rows[(cfg, prec, P, "xgrad")], rows[(cfg, prec, P, "pytorch")]
        xms, tms = med([r["median_ms"] for r in xs]), med([r["median_ms"] for r in ts])
        xtps, ttps = med([r["tokens_per_s"] for r in xs]), med([r["tokens_per_s"] for r in ts])
        wait = med([r.get("median_wait_ms", 0.0) for r in xs])
        alone = med([r.get("allreduce_ms", 0.0) for r in xs])
        # The exchange's cost: the step with it minus the same processes without it, per round.
        nocomm = med([r["no_comm_ms"] for r in xs]) if P > 1 else xms
        cost = med([r["median_ms"] - r["no_comm_ms"] for r in xs]) if P > 1 else 0.0
        hidden = f"{min(1.0, max(0.0, 1 - cost / alone)):.2f}" if P > 1 and alone > 0 else "-"
        print(f"| {cfg} | {prec} | {P} | {xms:.1f} | {xtps:.0f} | {fmt_speed(speedups(cfg, prec, P, 'xgrad'), P)} "
              f"| {tms:.1f} | {ttps:.0f} | {fmt_speed(speedups(cfg, prec, P, 'pytorch'), P)} "
              f"| {xtps / ttps:.2f} | {nocomm:.1f} | {cost:.1f} | {wait:.1f} | {alone:.1f} | {hidden} |")


if __name__ == "__main__":
    main()
