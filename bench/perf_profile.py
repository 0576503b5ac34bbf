"""Where a training step's time goes, by kind of work, from Linux perf's samples.

    /usr/bin/python3 bench/perf_profile.py [--delay-ms 6000] -- COMMAND...   records COMMAND, then reports
    /usr/bin/python3 bench/perf_profile.py --data perf.data                  reports an earlier recording

Records COMMAND with `perf record` (OPENBLAS_CORETYPE removed, as for every
benchmark), skipping its first --delay-ms milliseconds (model set-up and
warm-up steps), and prints the share of all samples of each kind of work: the
oneDNN kernels (JIT code and libdnnl), xgrad's own kernels grouped by what they
do, and the C library. A symbol is put in the first group whose pattern it
matches. For example, a base Transformer step in bf16 at one thread:

    bench/perf_profile.py -- build/bench/xg_bench train --vocab 1000 --len 64 --d-model 512 --heads 8 \\
        --layers 6 --d-ff 2048 --batch 16 --steps 20 --threads 1 --precision bf16
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# (group, pattern on "library symbol"): the first match wins.
GROUPS = [
    ("oneDNN kernels", r"^\[JIT\]|^libdnnl"),
    ("OpenBLAS", r"^libopenblas"),
    ("bf16 conversions", r"to_bf16|from_bf16"),
    ("optimiser (Adam)", r"optim::"),
    ("attention: softmax, masks, its backward", r"attention|softmax_rows|fill_masked|apply_dropout|backward_heads"),
    ("dropout (and relu + dropout)", r"dropout|masked_scale|positive_bits"),
    ("residual and other adds", r"binary_kernel<xg::add\(|add_into|accumulate"),
    ("layer norm", r"layer_norm"),
    ("activations (GELU, ReLU)", r"gelu|relu"),
    ("bias add and bias gradients", r"bias_grad|fill_bias"),
    ("the loss", r"loss"),
    ("copies (memmove, gathers)", r"memmove|memcpy|gather_strided|scatter_strided|copy"),
    ("other xgrad code", r"^(xg_bench|vision|char_lm|g2p|seq2seq|libxg)"),
    ("C library, libm, kernel", r"^(libc|libm|\[kernel|libstdc|libgomp)"),
]


def report(data):
    # Sample counts, not perf's rounded percentages: the JIT code spreads over
    # thousands of addresses of 0.01% each, and their rounding adds up.
    if not os.path.isfile(data):
        sys.exit(f"perf_profile.py: {data}: no such file")
    run = subprocess.run(["perf", "report", "-i", data, "-n", "--sort", "dso,sym", "--stdio", "--no-children"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"perf_profile.py: perf report on {data} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    out = run.stdout
    samples = {name: 0 for name, _ in GROUPS}
    samples["other"] = 0
    for line in out.splitlines():
        m = re.match(r"\s*[0-9.]+%\s+(\d+)\s+(\S+(?: tid \d+)?)\s+\[[.k]\]\s+(.*)", line)
        if not m:
            continue
        count, text = int(m.group(1)), f"{m.group(2)} {m.group(3)}"
        group = next((name for name, pattern in GROUPS if re.search(pattern, text)), "other")
        samples[group] += count
    total = sum(samples.values())
    print(f"| work | share of {total} samples |\n|---|---|")
    for name, count in samples.items():
        if count >= total / 2000:
            print(f"| {name} | {100 * count / total:.1f}% |")


def non_negative(text):
    """argparse type: a whole number of milliseconds, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of milliseconds (0 or more), got '{text}'")
    return int(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="report this perf.data instead of recording")
    p.add_argument("--delay-ms", type=non_negative, default=6000, help="samples start this late (set-up and warm-up)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    a = p.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if bool(a.data) == bool(command):
        p.error("give either --data FILE or -- COMMAND...")
    if not shutil.which("perf"):
        sys.exit("perf_profile.py: perf not found (Debian: linux-perf)")
    if a.data:
        report(a.data)
        return
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        run = subprocess.run(["perf", "record", "-q", "-o", data, "-D", str(a.delay_ms), "-F", "999", "--"] + command,
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"perf_profile.py: perf record failed ({run.returncode}):\n{run.stderr[-2000:]}")
        print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "")
        report(data)


if __name__ == "__main__":
    main()
