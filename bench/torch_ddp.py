"""PyTorch's side of the data-parallel benchmark: training step time with P processes.

The model, optimizer, loss and random full-length batches of torch_bench.py's `train`
mode, trained by P processes of one thread each under DistributedDataParallel (gloo over
loopback, gradients all-reduced in buckets of --bucket-mb). --batch is per process (weak
scaling: each step consumes P*B sequences). Each step is timed on rank 0 from a barrier
through zero_grad, forward+loss (autocast for bf16), backward and Adam's step.
Run with /usr/bin/python3 (Debian's python3-torch). Rank 0 prints one JSON line on stdout.

  torch_ddp.py --vocab V --len L --d-model C --heads H --layers N --d-ff F --batch B
               --steps K --warmup W --precision f32|bf16 --processes P --bucket-mb 25 [--comm 1|0]
               [--bf16-exchange 0|1 (fp16_compress_hook)] [--bucket-kb K (instead of --bucket-mb)]
  torch_ddp.py --model resnet --batch B ...   # ResNet-20 of vision.py on B random 28x28 images, AdamW

--model resnet trains the ResNet-20 and AdamW of `vision.py --model resnet` (xg_bench ddp --model
resnet the same model in xgrad) on random images and labels, no augmentation or clipping.

--comm 0 runs the same P processes without any exchange (every step under DDP's no_sync()),
as xg_bench ddp --comm 0 does: the difference of the two step times is the exchange's cost
that backward did not hide. With P > 1, rank 0 also reports allreduce_ms: the median of 3
all_reduce calls of one tensor as large as all the gradients, after training.

Across hosts (one process each, e.g. scripts/cluster.sh's namespaces), every host runs
  torch_ddp.py ... --processes P --rank R --master ADDR:PORT
with the same ADDR:PORT, rank 0's address (gloo over TCP between the hosts).
"""
import contextlib
import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # importing torch_bench leaves no bench/__pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def image_step(model, opt, precision, x, y, around):
    """One ResNet step as xg_bench ddp --model resnet takes it: zero_grad, forward and
    cross-entropy (autocast for bf16), backward (inside `around()`), AdamW's step."""
    opt.zero_grad()
    with around():
        with torch_bench.autocast(precision):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
    opt.step()
    return loss


def run(rank, a, port, master="127.0.0.1"):
    torch.set_num_threads(1)
    P = int(a.get("processes", 1))
    precision = a.get("precision", "f32")
    steps, warm = int(a.get("steps", 20)), int(a.get("warmup", 3))
    resnet = a.get("model", "transformer") == "resnet"
    if resnet:  # vision.py's ResNet-20 and its AdamW (seeded: every rank starts from the same weights)
        import vision
        m, opt = vision.build("resnet")
        c = dict(batch=int(a.get("batch", 128)))
    else:
        c, m = torch_bench.model_of(a)  # seeds 0: every rank starts from the same weights
    m.train()
    comm = a.get("comm", "1")  # checked by main()
    if P > 1:
        dist.init_process_group("gloo", rank=rank, world_size=P, init_method=f"tcp://{master}:{port}")
        cap_mb = int(a["bucket-kb"]) / 1024 if "bucket-kb" in a else int(a.get("bucket-mb", 25))
        model = torch.nn.parallel.DistributedDataParallel(m, bucket_cap_mb=cap_mb)
        if a.get("bf16-exchange", "0") == "1":
            # Half the bytes on the wire, as xg_bench ddp --bf16-exchange 1. PyTorch 1.13's
            # bf16_compress_hook refuses anything but NCCL on CUDA; its fp16 twin runs on gloo.
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    else:
        # One process is what a user runs without DDP: the plain model, no process group.
        model = m
    if not resnet:
        opt = torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(1 + rank)  # each rank its own data
    times = []
    around = model.no_sync if P > 1 and comm == "0" else contextlib.nullcontext
    for s in range(warm + steps):
        if resnet:
            x = torch.rand(c["batch"], 1, 28, 28, generator=g)
            y = torch.randint(0, 10, (c["batch"],), generator=g)
        else:
            src, tgt = torch_bench.random_batch(c, g)
        if P > 1:
            dist.barrier()  # ranks start each timed step together
        t0 = time.perf_counter()
        if resnet:
            loss = image_step(model, opt, precision, x, y, around)
        else:
            loss = torch_bench.train_step(model, opt, c, precision, src, tgt, around)
        ms = (time.perf_counter() - t0) * 1000
        if s >= warm:
            times.append(ms)
    sys.stderr.write(f"torch_ddp: rank {rank} last loss {loss.item():.4f}, "
                     f"median step {sorted(times)[len(times) // 2]:.1f} ms\n")  # one write: ranks don't interleave
    allreduce_ms = None
    if P > 1:  # one exchange of all the gradients' bytes, alone
        flat = torch.zeros(sum(p.numel() for p in m.parameters()))
        alone_ms = []
        for _ in range(3):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(flat)
            alone_ms.append((time.perf_counter() - t0) * 1000)
        allreduce_ms = sorted(alone_ms)[1]
    if rank == 0:
        print(json.dumps(dict(mode="ddp", side="pytorch", processes=P, threads=torch.get_num_threads(),
                              precision=precision, comm=int(comm), ms=times, allreduce_ms=allreduce_ms,
                              **{"images_per_step" if resnet else "tokens_per_step":
                                 P * c["batch"] * (1 if resnet else c["len"])},
                              core=torch_bench.blas_core())), flush=True)
    if P > 1:
        dist.destroy_process_group()


def main():
    a = torch_bench.args([sys.argv[0], "ddp"] + sys.argv[1:])  # torch_bench.args skips a mode word
    torch_bench.check_whole(a, {**torch_bench.MODEL_FLAGS, "processes": 1, "steps": 1, "warmup": 0, "bucket-mb": 1,
                                "bucket-kb": 1},
                            "torch_ddp.py")
    P = int(a.get("processes", 1))
    if a.get("model", "transformer") not in ("transformer", "resnet"):
        sys.exit(f"torch_ddp.py: --model {a['model']!r}: expected transformer or resnet")
    if a.get("bf16-exchange", "0") not in ("0", "1"):
        sys.exit(f"torch_ddp.py: --bf16-exchange {a['bf16-exchange']!r}: expected 0 or 1 (PyTorch: fp16_compress_hook)")
    if a.get("comm", "1") not in ("0", "1"):
        sys.exit(f"torch_ddp.py: --comm {a['comm']!r}: expected 1 (exchange the gradients) or 0 (each trains alone)")
    if "rank" in a:  # one process of P on this host, rank 0 at --master
        if not a.get("rank", "").isdigit() or not 0 <= int(a["rank"]) < P:
            sys.exit(f"torch_ddp.py: --rank {a.get('rank')!r}: expected a whole number from 0 to {P - 1}")
        host, _, port = a.get("master", "").rpartition(":")
        if not host or not port.isdigit():
            sys.exit(f"torch_ddp.py: --master {a.get('master')!r}: expected ADDR:PORT, rank 0's address")
        run(int(a["rank"]), a, int(port), host)
    elif P > 1:
        mp.spawn(run, args=(a, free_port()), nprocs=P)
    else:
        run(0, a, None)


if __name__ == "__main__":
    main()
