#!/usr/bin/python3
"""Checks the fuzzer's judge (judge.py) on the known PyTorch deviations: on
each program of the folder, xgrad and PyTorch must differ and the judge must
find PyTorch wrong; and with the two sides' results exchanged (PyTorch's
answers given as xgrad's), it must find the side holding PyTorch's answers
wrong, or, where only the second judge (PyTorch running the op's definition)
decides, no side. A judge that always blames one side, or never decides,
fails.

  test_judge.py --binary build/tests/xg_difftest [--deviations DIR] [--workdir DIR]
"""
import argparse
import json
import math
import os
import sys

import difftest
import judge

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="the xg_difftest program")
    ap.add_argument("--deviations", default=os.path.join(HERE, "pytorch_deviations"),
                    help="a folder of programs where PyTorch is wrong")
    ap.add_argument("--workdir", default="judge-work")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    names = sorted(n for n in os.listdir(a.deviations) if n.endswith(".json"))
    if not names:
        ap.error(f"--deviations {a.deviations}: no program (*.json) in it")
    progs = [json.load(open(os.path.join(a.deviations, n))) for n in names]
    failed = 0
    for n, p, xr in zip(names, progs, difftest.run_xgrad(a.binary, progs, a.workdir, "judge")):
        tr = difftest.run_torch(p)
        if difftest.compare(p, xr, tr) is None:
            print(f"{n}: FAILED: xgrad and PyTorch agree: not a deviation")
            failed += 1
            continue
        # A deviation only the second judge decides (finite differences cannot
        # move the value) is decided one way only: exchanged, it is undecided.
        second_only = difftest.finite_difference_verdict(p, xr, tr)[0] == "undecided"
        exchanged = "undecided" if second_only else "xgrad"
        for label, first, second, want in (("as run", xr, tr, "pytorch"), ("exchanged", tr, xr, exchanged)):
            verdict, lines = difftest.judge_verdict(p, first, second)
            ok = verdict == want
            failed += not ok
            print(f"{n} ({label}): {'ok' if ok else 'FAILED'}: judge says {verdict} wrong, expected {want}")
            if not ok:
                print("\n".join("  " + line for line in lines))
    # The finite differences alone: a kink at the point has no verdict, a smooth function its derivative.
    try:
        judge.richardson(lambda d: abs(d) + 0.3 * d, 0.0)
        print("richardson: FAILED: |x| + 0.3 x at 0 gave a derivative (the mean of its two slopes)")
        failed += 1
    except judge.Kink:
        print("richardson: ok: |x| + 0.3 x at 0 is a kink")
    est, err = judge.richardson(lambda d: 3 * math.sin(1 + d), 0.0)
    ok = abs(est - 3 * math.cos(1)) <= 1e-11 and err <= 1e-11
    failed += not ok
    print(f"richardson: {'ok' if ok else 'FAILED'}: d/dx 3 sin(x) at 1 = {est!r} +- {err:.1e} (exact {3 * math.cos(1)!r})")
    print(f"{len(names)} programs, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
