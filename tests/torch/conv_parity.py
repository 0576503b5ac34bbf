# Writes what PyTorch computes in float64 for torch.nn.functional.conv2d
# (strides, padding incl. "same", dilation, groups incl. depthwise, with and
# without bias), conv1d, conv_transpose2d, unfold and fold, with the
# gradients of every input and the second-order gradients of a gradient
# penalty taken with respect to the input alone, to a safetensors file for
# tests/torch/conv_parity.cpp.
#   python3 conv_parity.py OUT.safetensors
import sys
import warnings

import torch
import torch.nn.functional as F

from safetensors_io import save

# name: kind, input shape, weight shape, stride, padding, dilation, groups,
# bias, output_padding. padding -1 is "same"; 1-D cases use the second of
# each pair.
CASES = {
    "plain": ("conv2d", (2, 3, 6, 5), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1, 1, (0, 0)),
    "strided": ("conv2d", (2, 2, 7, 8), (3, 2, 3, 2), (2, 3), (1, 0), (1, 1), 1, 1, (0, 0)),
    "padded": ("conv2d", (1, 3, 5, 5), (2, 3, 3, 3), (1, 1), (2, 1), (1, 1), 1, 0, (0, 0)),
    "dilated": ("conv2d", (2, 2, 9, 7), (3, 2, 2, 3), (1, 2), (1, 1), (2, 2), 1, 1, (0, 0)),
    "pointwise": ("conv2d", (3, 4, 3, 3), (5, 4, 1, 1), (1, 1), (0, 0), (1, 1), 1, 1, (0, 0)),
    "grouped": ("conv2d", (2, 6, 6, 5), (4, 3, 3, 2), (2, 1), (1, 1), (1, 1), 2, 1, (0, 0)),
    "depthwise": ("conv2d", (2, 4, 6, 6), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4, 1, (0, 0)),
    "same_even": ("conv2d", (2, 3, 5, 6), (2, 3, 2, 4), (1, 1), -1, (2, 1), 1, 1, (0, 0)),
    "conv1d": ("conv1d", (2, 4, 11), (6, 2, 3), (1, 2), (0, 1), (1, 2), 2, 1, (0, 0)),
    "conv1d_same": ("conv1d", (3, 2, 7), (3, 2, 4), (1, 1), -1, (1, 1), 1, 0, (0, 0)),
    "transposed": ("conv_transpose2d", (2, 3, 4, 3), (3, 2, 3, 2), (2, 1), (1, 0), (1, 1), 1, 1, (1, 0)),
    "transposed_g": ("conv_transpose2d", (2, 4, 3, 4), (4, 3, 2, 3), (2, 3), (0, 1), (2, 1), 2, 1, (1, 2)),
}


def forward(kind, x, w, b, stride, padding, dilation, groups, output_padding):
    if kind == "conv2d":
        return F.conv2d(x, w, b, stride, "same" if padding == -1 else padding, dilation, groups)
    if kind == "conv1d":
        return F.conv1d(x, w, b, stride[1], "same" if padding == -1 else padding[1], dilation[1], groups)
    return F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)


def case(name, cfg, out, meta):
    kind, xs, ws, stride, padding, dilation, groups, has_bias, output_padding = cfg
    torch.manual_seed(sum(map(ord, name)))
    d = dict(dtype=torch.float64)
    x = torch.randn(*xs, **d, requires_grad=True)
    w = torch.randn(*ws, **d, requires_grad=True)
    channels = ws[1] * groups if kind == "conv_transpose2d" else ws[0]
    b = torch.randn(channels, **d, requires_grad=True) if has_bias else None
    y = forward(kind, x, w, b, stride, padding, dilation, groups, output_padding)
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
    if kind == "conv2d" and padding != -1 and groups == 1:
        k = ws[2:]
        cols = F.unfold(x, k, dilation=dilation, padding=padding, stride=stride)
        out[f"{name}.unfold"] = cols
        out[f"{name}.fold"] = F.fold(cols * 2 + 1, xs[2:], k, dilation=dilation, padding=padding, stride=stride)
    pad = (-1, -1) if padding == -1 else padding
    meta[name] = " ".join(str(v) for v in (kind, *stride, *pad, *dilation, groups, has_bias, *output_padding))


def main():
    # PyTorch warns that "same" with an even kernel pads a copy of the input.
    warnings.filterwarnings("ignore", message="Using padding='same'")
    out, meta = {}, {}
    for name, cfg in CASES.items():
        case(name, cfg, out, meta)
    save(sys.argv[1], {k: v.detach() for k, v in out.items()}, meta)
    print(f"conv_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
