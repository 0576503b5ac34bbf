#!/usr/bin/env python3
"""Lists the CTest tests that were skipped, with their reasons, and fails if
any was skipped for a reason other than the machine's hardware.

    python3 scripts/check_skips.py BUILD/ctest-junit.xml

Reads the JUnit file of `ctest --output-junit`. A test is skipped when it
printed "xg-skip" (doctest cases that cannot run here) or exited 77 (the
PyTorch parity tests without python3-torch, the distributed tests without
MPI). Only "xg-skip (hardware): ..." and "xg-skip (machine): ..." are
accepted: a CPU feature a case needs (no case needs one today: bf16 runs
emulated on a CPU without AVX512_BF16), and network namespaces where
the machine does not allow them (the cluster tests of scripts/cluster.sh:
not root, or a container without CAP_SYS_ADMIN), cannot be fixed by
installing anything; every other skip can, and fails the run. Exit 0 when
nothing but those was skipped, 1 otherwise.
"""
import re
import sys
import xml.etree.ElementTree as ET


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_skips.py BUILD/ctest-junit.xml")
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"check_skips.py: cannot read {sys.argv[1]}: {e}")
    hardware, other = [], []
    for case in root.iter("testcase"):
        if case.find("skipped") is None and case.get("status") not in ("notrun", "disabled"):
            continue
        out = "".join((e.text or "") for e in case.iter("system-out"))
        m = re.search(r"xg-skip \((?:hardware|machine)\): ([^\n]*)", out)
        if m:
            hardware.append((case.get("name"), m.group(1)))
        else:
            why = re.search(r"xg-skip: ([^\n]*)|python3-torch is not installed[^\n]*", out)
            other.append((case.get("name"), why.group(0) if why else "no reason printed"))
    for name, why in hardware:
        print(f"skipped (hardware): {name}: {why}")
    for name, why in other:
        print(f"SKIPPED: {name}: {why}")
    print(f"check_skips: {len(hardware)} skipped for this machine's hardware, {len(other)} for anything else")
    return 1 if other else 0


if __name__ == "__main__":
    sys.exit(main())
