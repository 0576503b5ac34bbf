#!/usr/bin/python3
"""torch.nn's modules against xgrad's, from the code: PyTorch 1.13's
torch.nn.modules.__all__ (without the base classes Module, Container,
RNNBase and RNNCellBase, the deprecated NLLLoss2d and the Lazy* modules)
against the module table that the parity tests run (xg_difftest
--list-modules, tests/optable/optable.py) and the classes that other parity
programs check (ELSEWHERE below). A class in neither needs a line in
docs/nn.md's "Not in xgrad" list saying why.

  nn_coverage.py --binary build/tests/xg_difftest           prints the table
  nn_coverage.py --binary ... --check docs/nn.md             exit 1 unless every class is accounted for
"""
import argparse
import re
import subprocess
import sys

import torch.nn as nn

LEFT_OUT = {"Module", "Container", "RNNBase", "RNNCellBase", "NLLLoss2d"}

# Classes whose parity with PyTorch another program checks (float64, values
# and gradients), by the CTest that runs it.
ELSEWHERE = {
    "BatchNorm1d": "torch_parity_vision_layers",
    "BatchNorm2d": "torch_parity_vision_layers",
    "GroupNorm": "torch_parity_vision_layers",
    "Flatten": "torch_parity_vision_layers",
    "Sequential": "nn containers (test_nn_containers.cpp)",
    "ModuleList": "nn containers (test_nn_containers.cpp)",
}


def torch_modules():
    return [m for m in nn.modules.__all__ if m not in LEFT_OUT and not m.startswith("Lazy")]


def reasons(doc):
    """'- `Name`: why' lines under the heading that starts 'Not in xgrad'."""
    out, inside = {}, False
    for line in open(doc, encoding="utf-8"):
        if line.startswith("#"):
            inside = line.lstrip("#").strip().startswith("Not in xgrad")
            continue
        m = re.match(r"- `(\w+)`: (.+)", line.strip())
        if inside and m:
            out[m.group(1)] = m.group(2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="the xg_difftest program (its --list-modules)")
    ap.add_argument("--check", metavar="NN_MD", help="docs/nn.md: fail unless every class is accounted for")
    a = ap.parse_args()
    try:
        table = set(subprocess.run([a.binary, "--list-modules"], capture_output=True, text=True,
                                   check=True).stdout.split())
    except (OSError, subprocess.CalledProcessError) as e:
        ap.error(f"--binary {a.binary}: {e}")
    why = reasons(a.check) if a.check else {}
    rows, missing, unexplained, stale = [], [], [], []
    for name in torch_modules():
        if name in table:
            rows.append((name, "yes", "module table (torch_parity_optable)"))
        elif name in ELSEWHERE:
            rows.append((name, "yes", ELSEWHERE[name]))
        else:
            missing.append(name)
            rows.append((name, "no", why.get(name, "NO REASON GIVEN")))
            if name not in why:
                unexplained.append(name)
    for name in why:
        if name in table or name in ELSEWHERE:
            stale.append(name)
    for name, has, where in rows:
        print(f"{name:32} {has:4} {where}")
    total = len(rows)
    print(f"nn_coverage: {total - len(missing)} of {total} torch.nn modules in xgrad with a parity test, "
          f"{len(missing)} not ({len(unexplained)} without a reason)")
    if a.check and (unexplained or stale):
        if unexplained:
            print(f"nn_coverage: no line in {a.check}'s 'Not in xgrad' list for: {', '.join(unexplained)}")
        if stale:
            print(f"nn_coverage: {a.check} lists as missing what xgrad has: {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
