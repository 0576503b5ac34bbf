#!/usr/bin/env python3
"""Rebuilds a metrics CSV of char_lm (xgrad) or bench/char_lm.py (PyTorch)
from its log, for runs whose CSV was lost:

    python3 bench/char_lm_csv_from_log.py LOG > CSV

Each evaluation line ("eval step N: val_bpc X", "final eval step N: ...")
becomes a row step,loss,lr,val_bpc,tokens_per_s,elapsed_s with the values of
the progress line logged at that step (for a final evaluation at a step that
logged none, such as a time limit's, the last progress line and the final
line's training seconds). Unlike the CSV the programs write, the
loss is that line's (the mean of the last --log-every steps, 4 decimals) and
not the mean since the previous evaluation; val_bpc, lr, tokens/s and the
elapsed time are as logged.
"""
import re
import sys

progress = re.compile(r"^step (\d+)/\d+ loss ([0-9.]+) .*lr ([0-9.e+-]+) ([0-9.]+) tok/s elapsed (\S+)")
evaluation = re.compile(r"^(?:final )?eval step (\d+): val_bpc ([0-9.]+)")
final = re.compile(r"^final steps=(\d+) .*train_seconds=([0-9.]+)")


def seconds(text):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:([0-9.]+)s)?", text)
    if not m or not any(m.groups()):
        sys.exit(f"char_lm_csv_from_log.py: cannot read the elapsed time '{text}'")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    last = {}  # step -> (loss, lr, tokens/s, elapsed)
    latest = None
    rows = []
    lines = open(sys.argv[1]).read().splitlines()
    for line in lines:
        if m := progress.match(line):
            latest = (float(m[2]), float(m[3]), float(m[4]), seconds(m[5]))
            last[int(m[1])] = latest
    for line in lines:
        if m := final.match(line):
            step, elapsed = int(m[1]), float(m[2])
            if step not in last and latest:
                last[step] = latest[:3] + (elapsed,)
    for line in lines:
        if m := evaluation.match(line):
            step = int(m[1])
            if step not in last:
                sys.exit(f"char_lm_csv_from_log.py: no progress line at step {step} in {sys.argv[1]}")
            loss, lr, tps, elapsed = last[step]
            rows.append(f"{step},{loss:.6f},{lr:.6g},{float(m[2]):.6f},{tps:.1f},{elapsed:.1f}")
    print("step,loss,lr,val_bpc,tokens_per_s,elapsed_s")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
