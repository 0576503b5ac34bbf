"""PyTorch's twin of bench/conv_bench.cpp: the same layers, the same step
(one forward + backward, input gradient except for the first layer), the
same timing (median of --reps after --warmup), in float32 and, where the CPU
has AVX512_BF16, under torch.autocast("cpu", torch.bfloat16). One JSON object
per line. Threads: torch.set_num_threads(--threads); OPENBLAS_NUM_THREADS is
the caller's to set (bench/conv_bench.sh tries both splits at 2 threads).

    /usr/bin/python3 bench/conv_bench.py [--threads T] [--batch N] [--reps R] [--warmup W]
"""
import argparse
import json
import time

import torch

LAYERS = [  # name, C, O, k, stride, pad, H, bias, input_grad (as conv_bench.cpp)
    ("cnn.conv1 1->32 3x3", 1, 32, 3, 1, 1, 28, True, False),
    ("cnn.conv2 32->64 3x3", 32, 64, 3, 1, 1, 28, True, True),
    ("res 32->64 3x3 s2", 32, 64, 3, 2, 1, 28, False, True),
    ("res 64->64 3x3 @14", 64, 64, 3, 1, 1, 14, False, True),
    ("res 1x1 down 32->64 s2", 32, 64, 1, 2, 0, 28, False, True),
]


def time_step(layer, batch, reps, warmup, bf16):
    _, c, o, k, s, p, h, bias, input_grad = layer
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(batch, c, h, h, generator=g) * 2 - 1).requires_grad_(input_grad)
    conv = torch.nn.Conv2d(c, o, k, stride=s, padding=p, bias=bias)
    ho = (h + 2 * p - k) // s + 1
    grad = torch.rand(batch, o, ho, ho, generator=g) * 2 - 1
    ms = []
    for r in range(warmup + reps):
        x.grad = None
        conv.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = conv(x)
        y.backward(grad.to(y.dtype))
        t = (time.perf_counter() - t0) * 1e3
        if r >= warmup:
            ms.append(t)
    ms.sort()
    return ms[len(ms) // 2]


def main():
    ap = argparse.ArgumentParser()
    for flag, default in (("--threads", 1), ("--batch", 128), ("--reps", 10), ("--warmup", 3)):
        ap.add_argument(flag, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    bf16 = "avx512_bf16" in open("/proc/cpuinfo").read()
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "mkldnn": torch.backends.mkldnn.is_available(),
                      "bf16": bf16}), flush=True)
    for layer in LAYERS:
        _, c, o, k, s, p, h, _, input_grad = layer
        ho = (h + 2 * p - k) // s + 1
        gflop = 2.0 * a.batch * o * c * k * k * ho * ho * (3 if input_grad else 2) / 1e9
        for path, on in (("torch_f32", False), ("torch_bf16", True)):
            if on and not bf16:
                continue
            ms = time_step(layer, a.batch, a.reps, a.warmup, on)
            print(json.dumps({"layer": layer[0], "path": path, "threads": a.threads, "ms": round(ms, 3),
                              "gflops": round(gflop / (ms / 1e3), 1)}), flush=True)


if __name__ == "__main__":
    main()
