# Where PyTorch's training step of the vision twin (bench/vision.py: the same
# model, augmentation and recipe as `vision train`) spends its time, beside
# bench/vision_profile (xgrad's): torch.profiler over some steps after a
# warm-up, each aten op's self time per step, and the share of the step in
# convolutions (forward and backward: the part both sides run on oneDNN).
# Run with OPENBLAS_CORETYPE unset, as every comparison here.
#   /usr/bin/python3 bench/vision_torch_profile.py [--model resnet|cnn|vit] [--threads 1] [--steps 10] [--bf16]
import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vision import MODELS, build, load, train_step  # noqa: E402

CONV = ("conv", "mkldnn_convolution")  # aten ops whose name holds these are convolution work


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", default="resnet", choices=MODELS)
    a.add_argument("--threads", type=int, default=1)
    a.add_argument("--steps", type=int, default=10)
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--batch", type=int, default=128)
    a.add_argument("--bf16", action="store_true")
    o = a.parse_args()
    torch.set_num_threads(o.threads)
    gen = torch.Generator().manual_seed(1)
    x, y = load(True)
    model, opt = build(o.model)
    batches = [torch.randperm(len(x), generator=gen)[:o.batch] for _ in range(o.warmup + o.steps)]
    for ids in batches[:o.warmup]:
        train_step(model, opt, x[ids], y[ids], gen, o.bf16)
    start = time.perf_counter()
    for ids in batches[o.warmup:]:
        train_step(model, opt, x[ids], y[ids], gen, o.bf16)
    plain_ms = (time.perf_counter() - start) * 1e3 / o.steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for ids in batches[o.warmup:]:
            train_step(model, opt, x[ids], y[ids], gen, o.bf16)
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in rows) / 1e3 / o.steps
    conv = sum(e.self_cpu_time_total for e in rows if any(c in e.key for c in CONV)) / 1e3 / o.steps
    print(f"# torch {torch.__version__} {o.model} batch {o.batch} threads {o.threads} {'bf16' if o.bf16 else 'f32'}: "
          f"{plain_ms:.1f} ms/step unprofiled ({o.batch * 1e3 / plain_ms:.0f} img/s), {total:.1f} ms/step of aten self "
          f"time under the profiler, convolutions {conv:.1f} ms/step = {100 * conv / total:.1f}% of it "
          f"(BLAS core {os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    print("  ms/step  share  calls/step  op")
    for e in rows[:25]:
        ms = e.self_cpu_time_total / 1e3 / o.steps
        print(f"  {ms:7.2f} {100 * ms / total:5.1f}% {e.count / o.steps:10.0f}  {e.key}")


if __name__ == "__main__":
    main()
