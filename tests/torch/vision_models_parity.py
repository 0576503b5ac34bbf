# Writes what PyTorch twins of xgrad's image models (models/resnet.h,
# models/vit.h, models/cnn.h) compute in float64, for
# tests/torch/vision_models_parity.cpp: each twin's initial state dict, a
# training-mode forward (the logits) and the gradients of every parameter of
# sum(logits * wy), one SGD step, then an evaluation-mode forward on a new
# batch (batch norm on the running statistics the step left) and the state
# dict after. The twins are written here from the papers, with xgrad's
# module names, so the C++ side loads the state dict strictly. Each case also
# carries PyTorch's parameter count, and "count" cases carry the counts of
# the default configurations.
#   python3 vision_models_parity.py OUT.safetensors
import math
import sys

import torch
from torch import nn
import torch.nn.functional as F

from safetensors_io import save

LR = 0.1

# name: (spec, input shape). A spec is the model and its configuration fields.
CASES = {
    "resnet": ("resnet depth=14 width=4 in_channels=2 classes=3 preact=0", (4, 2, 7, 6)),
    "preact": ("resnet depth=14 width=4 in_channels=2 classes=3 preact=1", (4, 2, 8, 8)),
    "vit": ("vit image=8 patch=4 in_channels=2 classes=3 d_model=8 heads=2 layers=2 d_ff=16", (3, 2, 8, 8)),
    "vit_p2": ("vit image=6 patch=2 in_channels=1 classes=4 d_model=12 heads=3 layers=1 d_ff=8", (2, 1, 6, 6)),
    "cnn": ("cnn image=8 in_channels=2 classes=3 channels1=3 channels2=4 hidden=5", (4, 2, 8, 8)),
    "cnn_odd": ("cnn image=9 in_channels=1 classes=2 channels1=2 channels2=3 hidden=4", (3, 1, 9, 9)),
}
# The default configurations, counted only.
COUNTS = {
    "count_resnet20": "resnet depth=20 width=16 in_channels=1 classes=10 preact=0",
    "count_preact20": "resnet depth=20 width=16 in_channels=1 classes=10 preact=1",
    "count_vit": "vit image=28 patch=4 in_channels=1 classes=10 d_model=128 heads=4 layers=6 d_ff=256",
    "count_cnn": "cnn image=28 in_channels=1 classes=10 channels1=32 channels2=64 hidden=128",
}


def conv3x3(i, o, stride=1):
    return nn.Conv2d(i, o, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """He et al. 2015 (BN after each convolution) or 2016 (BN, ReLU before)."""

    def __init__(self, i, o, stride, preact):
        super().__init__()
        self.preact = preact
        self.conv1, self.bn1 = conv3x3(i, o, stride), nn.BatchNorm2d(i if preact else o)
        self.conv2, self.bn2 = conv3x3(o, o), nn.BatchNorm2d(o)
        self.downsample = None
        if stride != 1 or i != o:
            layers = [nn.Conv2d(i, o, 1, stride=stride, bias=False)] + ([] if preact else [nn.BatchNorm2d(o)])
            self.downsample = nn.Sequential(*layers)

    def forward(self, x):
        if self.preact:
            a = F.relu(self.bn1(x))
            shortcut = self.downsample(a) if self.downsample is not None else x
            return self.conv2(F.relu(self.bn2(self.conv1(a)))) + shortcut
        h = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(h + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, depth, width, in_channels, classes, preact):
        super().__init__()
        n, w = (depth - 2) // 6, width
        self.preact = preact
        self.conv1 = conv3x3(in_channels, w)
        if not preact:
            self.bn1 = nn.BatchNorm2d(w)
        self.layer1 = self.stage(w, w, 1, n)
        self.layer2 = self.stage(w, 2 * w, 2, n)
        self.layer3 = self.stage(2 * w, 4 * w, 2, n)
        if preact:
            self.final_bn = nn.BatchNorm2d(4 * w)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * w, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def stage(self, i, o, stride, n):
        rest = [BasicBlock(o, o, 1, self.preact) for _ in range(n - 1)]
        return nn.Sequential(BasicBlock(i, o, stride, self.preact), *rest)

    def forward(self, x):
        h = self.conv1(x)
        if not self.preact:
            h = F.relu(self.bn1(h))
        h = self.layer3(self.layer2(self.layer1(h)))
        if self.preact:
            h = F.relu(self.final_bn(h))
        return self.fc(torch.flatten(self.avgpool(h), 1))


class Attention(nn.Module):
    """Multi-head self-attention with separate projections (xgrad's names)."""

    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(c, c) for _ in range(4))
        self.weights = None

    def forward(self, x):
        b, t, c = x.shape
        split = lambda z: z.view(b, t, self.heads, c // self.heads).transpose(1, 2)  # (B,H,T,D)
        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        self.weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(c // self.heads), dim=-1)
        return self.w_o((self.weights @ v).transpose(1, 2).reshape(b, t, c))


class FeedForward(nn.Module):
    def __init__(self, c, f):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(c, f), nn.Linear(f, c)

    def forward(self, x):
        return self.linear2(F.gelu(self.linear1(x)))


class Block(nn.Module):
    """Pre-norm encoder block: x + attn(ln1(x)), then h + ff(ln2(h))."""

    def __init__(self, c, heads, f):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(c), Attention(c, heads)
        self.ln2, self.ff = nn.LayerNorm(c), FeedForward(c, f)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.ff(self.ln2(h))


class PatchEmbed(nn.Module):
    def __init__(self, i, c, patch):
        super().__init__()
        self.proj = nn.Conv2d(i, c, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    def __init__(self, image, patch, in_channels, classes, d_model, heads, layers, d_ff):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels, d_model, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(d_model, heads, d_ff) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, classes)

    def forward(self, x):
        p = self.patch_embed(x)
        h = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), p], 1) + self.pos_embed
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h)[:, 0])

    def class_attention(self):  # of the last forward: (N, H, P)
        return self.blocks[-1].attn.weights[:, :, 0, 1:]


class CNN(nn.Module):
    def __init__(self, image, in_channels, classes, channels1, channels2, hidden):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(in_channels, channels1), nn.BatchNorm2d(channels1)
        self.conv2, self.bn2 = conv3x3(channels1, channels2), nn.BatchNorm2d(channels2)
        self.pool = nn.MaxPool2d(2)
        self.fc1, self.fc2 = nn.Linear(channels2 * (image // 4) ** 2, hidden), nn.Linear(hidden, classes)

    def forward(self, x):
        h = self.pool(F.relu(self.bn1(self.conv1(x))))
        h = self.pool(F.relu(self.bn2(self.conv2(h))))
        return self.fc2(F.relu(self.fc1(torch.flatten(h, 1))))


def build(spec):
    kind, *args = spec.split()
    kw = {k: int(v) for k, v in (a.split("=") for a in args)}
    return {"resnet": ResNet, "vit": ViT, "cnn": CNN}[kind](**kw).double()


def case(name, spec, shape, out):
    torch.manual_seed(sum(map(ord, name)))
    m = build(spec)
    with torch.no_grad():  # BN and LayerNorm away from 1 and 0, so a swapped weight and bias shows
        for p in m.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    for k, v in m.state_dict().items():
        out[f"{name}.param.{k}"] = v.clone()
    x = torch.randn(*shape, dtype=torch.float64)
    y = m(x)
    wy = torch.randn_like(y)
    params = dict(m.named_parameters())
    grads = torch.autograd.grad((y * wy).sum(), list(params.values()))
    out[f"{name}.x"], out[f"{name}.wy"], out[f"{name}.y"] = x, wy, y
    with torch.no_grad():
        for (k, p), g in zip(params.items(), grads):
            out[f"{name}.grad.{k}"] = g
            p.copy_(p - LR * g)
        m.eval()
        xe = torch.randn(*shape, dtype=torch.float64)
        out[f"{name}.eval.x"], out[f"{name}.eval.y"] = xe, m(xe)
        if isinstance(m, ViT):
            out[f"{name}.eval.class_attention"] = m.class_attention()
    for k, v in m.state_dict().items():
        out[f"{name}.after.{k}"] = v
    out[f"{name}.count"] = torch.tensor(sum(p.numel() for p in m.parameters()))


def main():
    out, meta = {}, {}
    for name, (spec, shape) in CASES.items():
        case(name, spec, shape, out)
        meta[name] = spec
    for name, spec in COUNTS.items():
        out[f"{name}.count"] = torch.tensor(sum(p.numel() for p in build(spec).parameters()))
        meta[name] = spec
    save(sys.argv[1], {k: v.detach() for k, v in out.items()}, meta)
    print(f"vision_models_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
