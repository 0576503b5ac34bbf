"""PyTorch twin of `char_lm train` (train/char_lm.h): the same GPT, data, split,
batch order, optimiser and schedule, so that the two can be compared at equal
steps and at equal wall-clock time.

    /usr/bin/python3 bench/char_lm.py [--steps N] [--time-limit S] [--precision f32|bf16] [--threads N] ...

Same as xgrad:
- data: every fortune file (name without '.') of --data in name order, cut into
  records at lines "%"; a record is held out when FNV-1a-64(record) % 100 < 10;
  vocabulary = the sorted bytes of both splits;
- batches: row b of step s starts at splitmix64(seed ^ splitmix64(s*B + b)) % (n - T);
- model: token embedding N(0, 0.02) + learned positions N(0, 0.02), pre-norm
  blocks (LayerNorm, causal multi-head attention with q/k/v/o projections with
  bias, LayerNorm, Linear-GELU-Linear), final LayerNorm, output tied to the
  token embedding; Linear layers keep PyTorch's default initialisation, which
  is xgrad's (uniform in +-1/sqrt(fan_in));
- AdamW(0.9, 0.95, eps 1e-8), weight decay on matrices except embeddings;
  warm-up then cosine to lr/10; gradient norm clipped to --clip;
- bits per character on the validation split in windows of T.
Only the initial values differ (different random generators).
Prints progress lines and, last, "final steps=N val_bpc=X train_seconds=Y".
"""
import argparse
import contextlib
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def fnv1a64(data):
    h = 14695981039346656037
    for c in data:
        h = ((h ^ c) * 1099511628211) & MASK64
    return h


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def window_start(seed, step, batch, b, n, length):
    return splitmix64(seed ^ splitmix64(step * batch + b)) % (n - length)


def load_fortunes(directory, valid_percent=10):
    train, valid = bytearray(), bytearray()
    held = 0
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or not os.path.isfile(path):
            continue
        text = open(path, "rb").read()
        lines = text.split(b"\n")
        # Lines back with their newlines (the last only if the file ended in one).
        chunks = [ln + b"\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        record = bytearray()
        records = []
        for ln in chunks:
            if ln.rstrip(b"\n") == b"%":
                records.append(bytes(record))
                record = bytearray()
            else:
                record += ln
        records.append(bytes(record))
        for r in records:
            if not r.strip(b" \t\r\n"):
                continue
            is_valid = fnv1a64(r) % 100 < valid_percent
            out = valid if is_valid else train
            held += is_valid
            out += r
            if not r.endswith(b"\n"):
                out += b"\n"
            out += b"%\n"
    if not train:
        raise SystemExit(f"char_lm.py: no fortune file in {directory} (apt-get install fortunes)")
    return bytes(train), bytes(valid), held


class Block(nn.Module):
    def __init__(self, c, heads, d_ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(c, c) for _ in range(4))
        self.ln2 = nn.LayerNorm(c)
        self.ff1 = nn.Linear(c, d_ff)
        self.ff2 = nn.Linear(d_ff, c)

    def attention(self, x, mask):
        b, t, c = x.shape
        h, d = self.heads, c // self.heads
        q = self.w_q(x).view(b, t, h, d).transpose(1, 2)
        k = self.w_k(x).view(b, t, h, d).transpose(1, 2)
        v = self.w_v(x).view(b, t, h, d).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        weights = torch.softmax(scores.masked_fill(mask[:t, :t], float("-inf")), dim=-1)
        return self.w_o((weights @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, c, heads, d_ff):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, c)
        self.pos = nn.Parameter(torch.zeros(context, c))
        nn.init.normal_(self.tok_embed.weight, 0.0, 0.02)
        nn.init.normal_(self.pos, 0.0, 0.02)
        self.blocks = nn.ModuleList(Block(c, heads, d_ff) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1), persistent=False)

    def forward(self, ids):
        x = self.tok_embed(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x, self.mask)
        return F.linear(self.ln_f(x), self.tok_embed.weight)


def lr_at(step, peak, warmup, total):
    low = peak / 10
    if step <= warmup:
        return peak * step / warmup
    if step >= total:
        return low
    progress = (step - warmup) / (total - warmup)
    return low + 0.5 * (peak - low) * (1 + math.cos(math.pi * progress))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=512)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--time-limit", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-chars", type=int, default=65536)
    p.add_argument("--train-chars", type=int, default=0)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--metrics", default="")
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    train, valid, held = load_fortunes(a.data)
    vocab = sorted(set(train + valid))
    index = {c: i for i, c in enumerate(vocab)}
    if a.train_chars > 0:
        train = train[: a.train_chars]
    train_ids = torch.tensor([index[c] for c in train], dtype=torch.long)
    valid_ids = torch.tensor([index[c] for c in valid], dtype=torch.long)
    t, bsz = a.context, a.batch
    model = GPT(len(vocab), t, a.layers, a.d_model, a.heads, a.d_ff)
    decay, no_decay = [], []
    for name, prm in model.named_parameters():
        (decay if prm.dim() >= 2 and "embed" not in name and "pos" not in name else no_decay).append(prm)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" else contextlib.nullcontext
    n_params = sum(prm.numel() for prm in model.parameters())
    print(f"torch {torch.__version__} data={a.data} ({len(train)} train / {len(valid)} validation characters, {held} "
          f"fortunes held out) vocab={len(vocab)} | GPT layers={a.layers} d_model={a.d_model} heads={a.heads} "
          f"d_ff={a.d_ff} context={t} | {n_params} parameters | batch {bsz}, {torch.get_num_threads()} threads, "
          f"{a.precision}", flush=True)

    offsets = torch.arange(t + 1)

    def evaluate(chars):
        n = min(chars, len(valid_ids)) if chars > 0 else len(valid_ids)
        model.eval()
        nats, predicted, start = 0.0, 0, 0
        with torch.no_grad():
            while start < n - 1:
                length = min(t, n - 1 - start)
                rows = min(max(bsz, 32), (n - 1 - start) // t) if length == t else 1
                x = valid_ids[start : start + rows * length].view(rows, length)
                y = valid_ids[start + 1 : start + rows * length + 1].view(rows, length)
                with cast():
                    logits = model(x)
                nats += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)).item() * rows * length
                predicted += rows * length
                start += rows * length
        model.train()
        return nats / predicted / math.log(2)

    metrics = open(a.metrics, "w") if a.metrics else None
    if metrics:
        metrics.write("step,loss,lr,val_bpc,tokens_per_s,elapsed_s\n")
    start_time = time.perf_counter()
    train_seconds, loss_sum, window, step = 0.0, 0.0, 0, 0
    n = len(train_ids)
    timed_out = False
    while step < a.steps:
        t0 = time.perf_counter()
        at = step + 1
        starts = torch.tensor([window_start(a.seed, at, bsz, b, n, t) for b in range(bsz)])
        rows = train_ids[starts[:, None] + offsets]  # (B, T+1)
        x, y = rows[:, :-1], rows[:, 1:]
        with cast():
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        step = at
        lr = lr_at(step, a.lr, a.warmup, a.steps)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        value = loss.item()
        train_seconds += time.perf_counter() - t0
        loss_sum += value
        window += 1
        tps = step * bsz * t / train_seconds
        out_of_time = a.time_limit > 0 and train_seconds >= a.time_limit
        if step % a.log_every == 0:
            print(f"step {step}/{a.steps} loss {value:.4f} ({value / math.log(2):.3f} bpc) lr {lr:.2e} {tps:.0f} tok/s "
                  f"elapsed {time.perf_counter() - start_time:.1f}s", flush=True)
        at_end = step == a.steps or out_of_time
        if step % a.eval_every == 0 and not at_end:
            bpc = evaluate(a.eval_chars)
            print(f"eval step {step}: val_bpc {bpc:.4f}", flush=True)
            if metrics:
                metrics.write(f"{step},{loss_sum / window:.6f},{lr:.6g},{bpc:.6f},{tps:.1f},"
                              f"{time.perf_counter() - start_time:.1f}\n")
                metrics.flush()
            loss_sum, window = 0.0, 0
        if out_of_time:
            timed_out = step < a.steps
            break
    bpc = evaluate(0)
    print(f"final eval step {step}: val_bpc {bpc:.4f} ({len(valid_ids)} validation characters)")
    if metrics:
        metrics.write(f"{step},{loss_sum / max(window, 1):.6f},{lr_at(step, a.lr, a.warmup, a.steps):.6g},{bpc:.6f},"
                      f"{step * bsz * t / train_seconds:.1f},{time.perf_counter() - start_time:.1f}\n")
        metrics.close()
    print(f"final steps={step} val_bpc={bpc:.4f} train_seconds={train_seconds:.1f}"
          f"{' (time limit)' if timed_out else ''}", flush=True)


if __name__ == "__main__":
    main()
