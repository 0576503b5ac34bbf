# Writes what PyTorch computes for torch.nn.functional.conv2d, unfold and fold
# in float64 (strides, padding, dilation, with and without bias), with the
# gradients of every input, and the second-order gradients of a gradient
# penalty taken with respect to the input alone, to a safetensors file for
# tests/torch/conv_parity.cpp.
#   python3 conv_parity.py OUT.safetensors
import sys

import torch
import torch.nn.functional as F

from safetensors_io import save

CASES = {  # name: N C H W O kh kw stride padding dilation bias
    "plain": (2, 3, 6, 5, 4, 3, 3, (1, 1), (0, 0), (1, 1), 1),
    "strided": (2, 2, 7, 8, 3, 3, 2, (2, 3), (1, 0), (1, 1), 1),
    "padded": (1, 3, 5, 5, 2, 3, 3, (1, 1), (2, 1), (1, 1), 0),
    "dilated": (2, 2, 9, 7, 3, 2, 3, (1, 2), (1, 1), (2, 2), 1),
    "pointwise": (3, 4, 3, 3, 5, 1, 1, (1, 1), (0, 0), (1, 1), 1),
}


def case(name, cfg, out, meta):
    N, C, H, W, O, kh, kw, stride, padding, dilation, has_bias = cfg
    torch.manual_seed(sum(map(ord, name)))
    d = dict(dtype=torch.float64)
    x = torch.randn(N, C, H, W, **d, requires_grad=True)
    w = torch.randn(O, C, kh, kw, **d, requires_grad=True)
    b = torch.randn(O, **d, requires_grad=True) if has_bias else None
    y = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)
    wy = torch.randn_like(y)
    # A gradient penalty: P = sum((dL/dx)^2) with L = sum(y * wy), its
    # gradient with respect to w (and b): the second order, as gradgradcheck.
    (gx,) = torch.autograd.grad((y * wy).sum(), x, create_graph=True)
    penalty = (gx * gx).sum()
    inputs = [x, w] + ([b] if has_bias else [])
    grads = torch.autograd.grad((y * wy).sum() + penalty, inputs, allow_unused=True)
    out[f"{name}.x"], out[f"{name}.w"], out[f"{name}.wy"], out[f"{name}.y"] = x, w, wy, y
    out[f"{name}.grad.x"], out[f"{name}.grad.w"] = grads[0], grads[1]
    if has_bias:
        out[f"{name}.b"] = b
        out[f"{name}.grad.b"] = grads[2] if grads[2] is not None else torch.zeros_like(b)
    cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    out[f"{name}.unfold"] = cols
    out[f"{name}.fold"] = F.fold(cols * 2 + 1, (H, W), (kh, kw), dilation=dilation, padding=padding, stride=stride)
    meta[name] = " ".join(str(v) for v in (kh, kw, *stride, *padding, *dilation, has_bias))


def main():
    out, meta = {}, {}
    for name, cfg in CASES.items():
        case(name, cfg, out, meta)
    save(sys.argv[1], {k: v.detach() for k, v in out.items()}, meta)
    print(f"conv_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
