"""PyTorch's side of the benchmark: the same model and measurements as xg_bench.

What a PyTorch user would write: nn.Transformer (post-norm, batch_first) with a
shared embedding scaled by sqrt(C), sinusoidal positions and a tied output
projection; Adam(0.9, 0.98, eps 1e-9); label-smoothed cross-entropy.
Run with /usr/bin/python3 (Debian's python3-torch). Prints one JSON object per line.
"""
import contextlib
import ctypes
import json
import math
import resource
import sys
import time

RSS_BEFORE_IMPORT_MB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
import torch
import torch.nn as nn
import torch.nn.functional as F

# The interpreter and torch's libraries, before any model: reported so that
# PyTorch's RSS can be read both as measured and less this baseline.
RSS_IMPORT_MB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def blas_core():
    """OpenBLAS's kernel family in this process (follows OPENBLAS_CORETYPE)."""
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"


def autocast(precision):
    """torch.autocast around forward and loss, as a PyTorch user writes it for bf16."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if precision != "f32":
        raise SystemExit(f"torch_bench: precision '{precision}' is not one of f32, bf16")
    return contextlib.nullcontext()


def args(argv):
    a = {}
    for i in range(2, len(argv) - 1, 2):
        a[argv[i][2:]] = argv[i + 1]
    return a


# The model's flags and the smallest value each takes (model_of reads them).
MODEL_FLAGS = {"vocab": 4, "len": 1, "d-model": 1, "heads": 1, "layers": 1, "d-ff": 1, "batch": 1}


def check_whole(a, lowest, prog):
    """Exits naming the flag where a given --flag of `lowest` ({flag: smallest value}) is not a whole
    number at least that large."""
    for key, lo in lowest.items():
        v = a.get(key)
        if v is not None and not (v.isdigit() and int(v) >= lo):
            sys.exit(f"{prog}: --{key} {v!r}: expected a whole number of at least {lo}")


class Model(nn.Module):
    def __init__(self, vocab, d_model, heads, layers, d_ff, max_len, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(dropout)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def emb(self, ids):
        return self.drop(self.embed(ids) * math.sqrt(self.d_model) + self.pe[: ids.size(1)])

    def encode(self, src):
        return self.transformer.encoder(self.emb(src), src_key_padding_mask=src == 0)

    def decode(self, tgt, memory, src):
        t = tgt.size(1)
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        y = self.transformer.decoder(self.emb(tgt), memory, tgt_mask=causal, tgt_key_padding_mask=tgt == 0,
                                     memory_key_padding_mask=src == 0)
        return F.linear(y, self.embed.weight)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src), src)


def forward_flops(B, L, C, F_, V, N):
    enc = 8 * B * L * C * C + 4 * B * L * L * C + 4 * B * L * C * F_
    dec = 16 * B * L * C * C + 8 * B * L * L * C + 4 * B * L * C * F_
    return N * (enc + dec) + 2 * B * L * C * V


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def model_of(a):
    c = dict(vocab=int(a.get("vocab", 16)), len=int(a.get("len", 12)), d_model=int(a.get("d-model", 64)),
             heads=int(a.get("heads", 4)), layers=int(a.get("layers", 2)), d_ff=int(a.get("d-ff", 256)),
             batch=int(a.get("batch", 64)))
    torch.manual_seed(0)
    m = Model(c["vocab"], c["d_model"], c["heads"], c["layers"], c["d_ff"], c["len"] + 2)
    return c, m


def random_batch(c, g):
    """Source (B, L) and target (B, L+1) ids drawn from `g`, never the ids 0-2."""
    return (torch.randint(3, c["vocab"], (c["batch"], c["len"]), generator=g),
            torch.randint(3, c["vocab"], (c["batch"], c["len"] + 1), generator=g))


def train_step(model, opt, c, precision, src, tgt, around=contextlib.nullcontext):
    """One step: zero_grad, forward and label-smoothed loss (under autocast for bf16), backward
    (forward and backward inside `around()`, e.g. DDP's no_sync), Adam's step. Returns the loss."""
    opt.zero_grad()
    with around():
        with autocast(precision):
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), tgt[:, 1:].reshape(-1), ignore_index=0,
                                   label_smoothing=0.1)
        loss.backward()
    opt.step()
    return loss


def train(a):
    c, m = model_of(a)
    steps, warm = int(a.get("steps", 20)), int(a.get("warmup", 3))
    precision = a.get("precision", "f32")
    opt = torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    m.train()
    g = torch.Generator().manual_seed(1)
    times = []
    for s in range(warm + steps):
        src, tgt = random_batch(c, g)
        t0 = time.perf_counter()
        train_step(m, opt, c, precision, src, tgt)
        ms = (time.perf_counter() - t0) * 1000
        if s >= warm:
            times.append(ms)
    flops = 3 * forward_flops(c["batch"], c["len"], c["d_model"], c["d_ff"], c["vocab"], c["layers"])
    print(json.dumps(dict(mode="train", precision=precision, ms=times, flops=flops, rss_mb=rss_mb(),
                          rss_import_mb=RSS_IMPORT_MB, params=sum(p.numel() for p in m.parameters()),
                          threads=torch.get_num_threads(), core=blas_core())))


@torch.no_grad()
def decode(a):
    c, m = model_of(a)
    n, reps = int(a.get("sequences", 64)), int(a.get("reps", 3))
    m.eval()
    g = torch.Generator().manual_seed(2)
    src = torch.randint(3, c["vocab"], (n, c["len"]), generator=g)
    times = []
    for r in range(reps + 1):
        t0 = time.perf_counter()
        memory = m.encode(src)
        ys = torch.ones(n, 1, dtype=torch.long)
        for _ in range(c["len"]):
            logits = m.decode(ys, memory, src)[:, -1]
            ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
        ms = (time.perf_counter() - t0) * 1000
        if r > 0:
            times.append(ms)
    print(json.dumps(dict(mode="decode", ms=times, rss_mb=rss_mb(), rss_import_mb=RSS_IMPORT_MB)))


def micro(a):
    B, L, C, H, D, V = int(a.get("batch", 80)), int(a.get("len", 10)), 512, 8, 64, 11
    torch.manual_seed(3)

    def time_it(name, f, leaves):
        times = []
        for r in range(25):
            for t in leaves:
                t.grad = None
            t0 = time.perf_counter()
            f().sum().backward()
            if r >= 5:
                times.append((time.perf_counter() - t0) * 1000)
        print(json.dumps(dict(mode="micro", op=name, ms=times)))

    # heads split from and merged back into (B,L,C), as inside nn.MultiheadAttention
    q, k, v = (torch.randn(B, L, C, requires_grad=True) for _ in range(3))

    def heads(t):
        return t.view(B, L, H, D).transpose(1, 2)

    def attention_core():
        w = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) * 0.125, -1)
        return (w @ heads(v)).transpose(1, 2).reshape(B, L, C)

    time_it("attention_core", attention_core, [q, k, v])
    x = torch.randn(B * L, C, requires_grad=True)
    w, b = torch.ones(C, requires_grad=True), torch.zeros(C, requires_grad=True)
    time_it("layer_norm", lambda: F.layer_norm(x, (C,), w, b), [x, w, b])
    W, bias = torch.randn(4 * C, C, requires_grad=True), torch.zeros(4 * C, requires_grad=True)
    time_it("linear", lambda: F.linear(x, W, bias), [x, W, bias])
    logits = torch.randn(B * L, V, requires_grad=True)
    tgt = torch.randint(0, V, (B * L,))
    time_it("log_softmax_nll", lambda: F.nll_loss(F.log_softmax(logits, -1), tgt), [logits])


def sgemm(a):
    n = 1024
    A, B = torch.full((n, n), 0.5), torch.full((n, n), 0.25)
    best = 0.0
    for r in range(23):  # the first 3 wake the BLAS threads
        t0 = time.perf_counter()
        A @ B
        if r >= 3:
            best = max(best, 2 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    print(json.dumps(dict(mode="sgemm", gflops=best, core=blas_core())))


def converge(a):
    """Steps and seconds to 99% exact match with the training program's defaults."""
    task = a.get("task", "copy")
    precision = a.get("precision", "f32")
    seed = int(a.get("seed", 1))
    vocab, max_len, batch = 16, 10, 64
    torch.manual_seed(seed)
    m = Model(vocab, 64, 4, 2, 256, max_len + 2, dropout=0.0)
    opt = torch.optim.Adam(m.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 64 ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 200 ** -1.5))
    g = torch.Generator().manual_seed(seed)

    def batch_of(n, gen):
        lens = torch.randint(1, max_len + 1, (n,), generator=gen)
        src = torch.zeros(n, max_len, dtype=torch.long)
        tgt = torch.zeros(n, max_len + 1, dtype=torch.long)
        for i in range(n):
            s = torch.randint(3, vocab, (int(lens[i]),), generator=gen)
            src[i, : lens[i]] = s
            t = s if task == "copy" else s.flip(0)
            tgt[i, : lens[i]] = t
            tgt[i, lens[i]] = 2
        return src, tgt

    eval_src, eval_tgt = batch_of(1000, torch.Generator().manual_seed(12345))
    t0 = time.perf_counter()
    step, em = 0, 0.0
    while step < int(a.get("max-steps", 4000)):
        m.train()
        src, tgt = batch_of(batch, g)
        tin = torch.cat([torch.ones(batch, 1, dtype=torch.long), tgt[:, :-1]], 1)
        opt.zero_grad()
        with autocast(precision):
            loss = F.cross_entropy(m(src, tin).reshape(-1, vocab), tgt.reshape(-1), ignore_index=0,
                                   label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % 100 == 0:
            m.eval()
            with torch.no_grad():
                memory = m.encode(eval_src)
                ys = torch.ones(1000, 1, dtype=torch.long)
                for _ in range(max_len + 1):
                    ys = torch.cat([ys, m.decode(ys, memory, eval_src)[:, -1].argmax(-1, keepdim=True)], 1)
                out = ys[:, 1:]
                ok = 0
                for i in range(1000):
                    n = int((eval_tgt[i] != 0).sum())  # symbols + EOS
                    ok += bool((out[i, :n] == eval_tgt[i, :n]).all())
                em = ok / 1000
            if em >= 0.99:
                break
    print(json.dumps(dict(mode="converge", precision=precision, task=task, seed=seed, steps=step, seconds=time.perf_counter() - t0, exact_match=em)))


if __name__ == "__main__":
    mode = sys.argv[1]
    {"train": train, "decode": decode, "micro": micro, "sgemm": sgemm, "converge": converge}[mode](args(sys.argv))
