# The PyTorch twin of `vision train` (apps/vision): the same model (the
# twins of tests/torch/vision_models_parity.py, with the same dropout), the
# same data and augmentation (Debian's Fashion-MNIST, random crop with
# padding 2, horizontal flip, normalisation, --erase: random erasing), the
# same recipe (--smoothing: label smoothing of the loss, 0 by default as in
# vision; AdamW, weight decay on matrices only, warm-up then a cosine to
# lr x --min-lr-ratio over whichever ends first, the steps or the time limit,
# clipping at 1) and the same time
# budget, counting training time only. Prints the run's header, progress and
# "final steps=N test_accuracy=A train_seconds=S" like the C++ program.
#   /usr/bin/python3 bench/vision.py --model cnn|resnet|vit --time-limit 600 [--threads 2] [--bf16]
#       [--erase P] [--min-lr-ratio F] [--smoothing E] [--seed N]
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "torch"))
from vision_models_parity import CNN, ResNet, ViT  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
MODELS = ("cnn", "resnet", "vit")  # as `vision train --model`
# The recipe and preprocessing, from the file `vision` embeds
# (apps/vision/recipe.json): each model's learning rate, cosine end, random
# erasing and dropout; the schedule; the pixels' mean and deviation.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "vision", "recipe.json")) as f:
    RECIPE = json.load(f)
LR = {m: r["lr"] for m, r in RECIPE["models"].items()}
ERASE = {m: r["erase"] for m, r in RECIPE["models"].items()}
MIN_LR_RATIO = {m: r["min_lr_ratio"] for m, r in RECIPE["models"].items()}
DROPOUT = {m: r["dropout"] for m, r in RECIPE["models"].items()}
MEAN, STD = RECIPE["input"]["mean"], RECIPE["input"]["std"]
STEPS, WARMUP = RECIPE["schedule"]["steps"], RECIPE["schedule"]["warmup"]
WEIGHT_DECAY, CLIP_NORM = RECIPE["schedule"]["weight_decay"], RECIPE["schedule"]["clip_norm"]


def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(train):
    p = "train" if train else "t10k"
    x = torch.from_numpy(idx(f"{DATA}/{p}-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(idx(f"{DATA}/{p}-labels-idx1-ubyte.gz").astype(np.int64))
    return x, y


class DropoutCNN(CNN):
    """The CNN twin with models::CNN's dropout after the first dense layer."""

    def __init__(self, p, **kw):
        super().__init__(**kw)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        h = self.pool(F.relu(self.bn1(self.conv1(x))))
        h = self.pool(F.relu(self.bn2(self.conv2(h))))
        return self.fc2(self.drop(F.relu(self.fc1(torch.flatten(h, 1)))))


class DropoutViT(ViT):
    """The ViT twin with models::ViT's dropout, p at each place it has one:
    after the positions are added, on the attention weights, after the
    feed-forward's GELU, and on each block's two residual branches."""

    def __init__(self, p, **kw):
        super().__init__(**kw)
        self.p = p

    def drop(self, x):
        return F.dropout(x, self.p, self.training)

    def attend(self, a, x):
        b, t, c = x.shape
        split = lambda z: z.view(b, t, a.heads, c // a.heads).transpose(1, 2)  # (B,H,T,D)
        q, k, v = split(a.w_q(x)), split(a.w_k(x)), split(a.w_v(x))
        w = self.drop(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(c // a.heads), dim=-1))
        return a.w_o((w @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        p = self.patch_embed(x)
        h = self.drop(torch.cat([self.cls_token.expand(x.shape[0], -1, -1), p], 1) + self.pos_embed)
        for b in self.blocks:
            h = h + self.drop(self.attend(b.attn, b.ln1(h)))
            f = b.ff
            h = h + self.drop(f.linear2(self.drop(F.gelu(f.linear1(b.ln2(h))))))
        return self.head(self.norm(h)[:, 0])


def erase(out, p, gen):
    """data::random_erasing's (and torchvision's RandomErasing's) draws, per
    image: with probability p, up to 10 tries at a box of 2-33% of the area and
    aspect ratio 0.3-3.3 that fits, filled with 0. The uniform draws come in
    one call per batch (41 an image), so the loop below is plain Python."""
    n, _, h_img, w_img = out.shape
    draws = torch.rand(n, 41, generator=gen, dtype=torch.float64).tolist()
    lo, hi = math.log(0.3), math.log(3.3)
    for i, u in enumerate(draws):
        if u[0] >= p:
            continue
        for t in range(10):
            scale, ratio, u_top, u_left = u[1 + 4 * t:5 + 4 * t]
            area = h_img * w_img * (0.02 + (0.33 - 0.02) * scale)
            aspect = math.exp(lo + (hi - lo) * ratio)
            # std::lround's halves, away from 0 (Python's round takes them to even)
            h, w = math.floor(math.sqrt(area * aspect) + 0.5), math.floor(math.sqrt(area / aspect) + 0.5)
            if h < 1 or w < 1 or h >= h_img or w >= w_img:
                continue
            top, left = int(u_top * (h_img - h + 1)), int(u_left * (w_img - w + 1))
            out[i, :, top:top + h, left:left + w] = 0
            break
    return out


def augment(x, gen, p_erase=0.0):
    """Random crop (padding 2) and horizontal flip of each image, then normalisation, then erasing."""
    n = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2))
    tops = torch.randint(0, 5, (n,), generator=gen)
    lefts = torch.randint(0, 5, (n,), generator=gen)
    out = torch.stack([padded[i, :, t:t + 28, l:l + 28] for i, (t, l) in enumerate(zip(tops.tolist(), lefts.tolist()))])
    flip = torch.rand(n, generator=gen) < 0.5
    out[flip] = out[flip].flip(-1)
    out = (out - MEAN) / STD
    return erase(out, p_erase, gen) if p_erase > 0 else out


def lr_at(position, steps, warmup, lr, min_ratio=0.1):
    if position < warmup:
        return lr * (position + 1) / warmup
    t = min(1.0, (position - warmup) / max(1, steps - warmup))
    low = lr * min_ratio
    return low + (lr - low) * 0.5 * (1 + math.cos(math.pi * t))


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 500):
            correct += (model((x[i:i + 500] - MEAN) / STD).argmax(-1) == y[i:i + 500]).sum().item()
    model.train()
    return correct / len(x)


def build(name, lr=None, dropout=None, seed=1):
    """The model `vision train --model NAME` trains (with its defaults, or
    `dropout`) and its AdamW, at lr or the recipe's (LR); its initialisation
    drawn from `seed`."""
    p = DROPOUT[name] if dropout is None else dropout
    if lr is None:
        lr = LR[name]
    torch.manual_seed(seed)
    if name == "cnn":
        model = DropoutCNN(p, image=28, in_channels=1, classes=10, channels1=32, channels2=64, hidden=128)
    elif name == "resnet":
        model = ResNet(20, 16, 1, 10, False)
    else:  # models::ViTConfig's defaults
        model = DropoutViT(p, image=28, patch=4, in_channels=1, classes=10, d_model=128, heads=4, layers=6, d_ff=256)
    # vision train's groups (optim::weight_decay_groups): decay on tensors of
    # 2+ dimensions whose names hold neither "embed" nor "pos", so the ViT's
    # patch kernel and positions are not decayed and its class token is.
    def decayed(name, p):
        return p.dim() >= 2 and "embed" not in name and "pos" not in name

    decay = [p for n, p in model.named_parameters() if decayed(n, p)]
    other = [p for n, p in model.named_parameters() if not decayed(n, p)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": other, "weight_decay": 0.0}], lr=lr)
    return model, opt


def train_step(model, opt, x, y, gen, bf16, p_erase=0.0, smoothing=0.0):
    """One step of the recipe on images x (N,1,28,28) in [0, 1]: augment, forward, backward, clip, AdamW."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(model(augment(x, gen, p_erase)), y, label_smoothing=smoothing)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
    opt.step()
    return loss


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", default="cnn", choices=MODELS)
    a.add_argument("--time-limit", type=float, default=600)
    a.add_argument("--steps", type=int, default=STEPS)
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--batch", type=int, default=128)
    a.add_argument("--lr", type=float, default=None, help="default: the model's, LR (vision's recipe)")
    a.add_argument("--bf16", action="store_true")
    a.add_argument("--seed", type=int, default=1, help="the initialisation's and the data's (vision train --seed)")
    a.add_argument("--erase", type=float, default=None, help="probability of random erasing (default: the model's, ERASE)")
    a.add_argument("--min-lr-ratio", type=float, default=None,
                   help="the cosine's end as a fraction of the peak (default: the model's, MIN_LR_RATIO)")
    a.add_argument("--smoothing", type=float, default=0.0, help="label smoothing (vision train --smoothing)")
    a.add_argument("--dropout", type=float, default=None, help="dropout of the CNN and the ViT (default: the model's, DROPOUT)")
    a.add_argument("--dry-run", action="store_true",
                   help="print the header and stop (apps/vision/twin_recipe.py compares it with vision train's)")
    o = a.parse_args()
    if o.erase is None:
        o.erase = ERASE[o.model]
    if o.min_lr_ratio is None:
        o.min_lr_ratio = MIN_LR_RATIO[o.model]
    if o.dropout is None:
        o.dropout = DROPOUT[o.model]
    for name, v, top in (("--erase", o.erase, 1), ("--min-lr-ratio", o.min_lr_ratio, 1), ("--smoothing", o.smoothing, 0.999),
                         ("--dropout", o.dropout, 0.99)):
        if not 0 <= v <= top:
            a.error(f"{name} {v}: expected a number from 0 to {top:g}")
    if not 0 <= o.seed < 2**62:  # vision train --seed's range
        a.error(f"--seed {o.seed}: expected a whole number from 0 to {2**62 - 1}")
    torch.set_num_threads(o.threads)
    gen = torch.Generator().manual_seed(o.seed)
    model, opt = build(o.model, o.lr, o.dropout, o.seed)
    lr = opt.defaults["lr"]  # o.lr, or the recipe's for this model
    decay = opt.param_groups[0]  # build()'s decayed group
    print(f"torch {torch.__version__} | {o.model} | {sum(p.numel() for p in model.parameters())} parameters | "
          f"batch {o.batch} | {o.threads} threads | {'bf16 autocast' if o.bf16 else 'f32'} | "
          f"seed {o.seed} | dropout {o.dropout:g} | erase {o.erase:g} | smoothing {o.smoothing:g} | lr {lr:g} to {lr * o.min_lr_ratio:g} | "
          f"weight decay {decay['weight_decay']:g} on {sum(p.numel() for p in decay['params'])} parameters | "
          f"BLAS core {os.environ.get('OPENBLAS_CORETYPE', 'unset')}", flush=True)
    if o.dry_run:
        return
    xtr, ytr = load(True)
    xte, yte = load(False)
    trained, step, order, at = 0.0, 0, torch.randperm(len(xtr), generator=gen), 0
    while step < o.steps and trained < o.time_limit:
        start = time.perf_counter()
        if at + o.batch > len(xtr):
            order, at = torch.randperm(len(xtr), generator=gen), 0
        ids = order[at:at + o.batch]
        at += o.batch
        # vision's clock-bounded schedule (train::Trainer::position_at): the
        # warm-up counts steps; then the clock or the steps, whichever is further.
        warm = min(WARMUP, o.steps)
        position = step if step < warm else max(step, warm + (o.steps - warm) * min(1.0, trained / o.time_limit))
        for g in opt.param_groups:
            g["lr"] = lr_at(position, o.steps, WARMUP, lr, o.min_lr_ratio)
        loss = train_step(model, opt, xtr[ids], ytr[ids], gen, o.bf16, o.erase, o.smoothing)
        step += 1
        trained += time.perf_counter() - start
        if step % 200 == 0:
            print(f"step {step} loss {loss.item():.4f} {step * o.batch / trained:.0f} img/s trained {trained:.0f}s", flush=True)
    print(f"final steps={step} test_accuracy={evaluate(model, xte, yte):.4f} train_seconds={trained:.1f}", flush=True)


if __name__ == "__main__":
    main()
