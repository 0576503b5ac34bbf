# Writes what PyTorch computes for torch.nn.functional.max_pool2d (with its
# indices), avg_pool2d, adaptive_avg_pool2d, batch_norm (training for three
# steps with running statistics, then evaluation; also followed by relu, for
# xgrad's batch_norm_relu) and group_norm in float64,
# with the gradients of every input of L + P, where L = sum(tanh(y) * wy)
# and P = sum((dL/dx)^2) is a gradient penalty taken with respect to the
# input alone (so the second order too, mixed with weight and bias), to a
# safetensors file for tests/torch/pool_norm_parity.cpp.
#   python3 pool_norm_parity.py OUT.safetensors
import sys

import torch
import torch.nn.functional as F

from safetensors_io import save

D = dict(dtype=torch.float64)

POOLS = {  # name: kind, input shape, options as the C++ side reads them
    "max_k2": ("max", (2, 3, 6, 7), dict(kernel_size=(2, 2), stride=None, padding=(0, 0), dilation=(1, 1), ceil_mode=False)),
    "max_s2p1": ("max", (2, 2, 7, 6), dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=True)),
    "max_dil": ("max", (1, 3, 7, 8), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=False)),
    "max_ceil": ("max", (2, 2, 8, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(0, 1), dilation=(1, 1), ceil_mode=True)),
    "avg_k2": ("avg", (2, 3, 6, 7), dict(kernel_size=(2, 2), stride=None, padding=(0, 0), ceil_mode=False, count_include_pad=True)),
    "avg_incl": ("avg", (2, 2, 6, 7), dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=True)),
    "avg_excl": ("avg", (2, 2, 6, 7), dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=False)),
    "avg_rect": ("avg", (1, 3, 5, 8), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=False, count_include_pad=False)),
    "adapt_3x4": ("adaptive", (2, 2, 5, 7), dict(output_size=(3, 4))),
    "adapt_up": ("adaptive", (1, 3, 3, 5), dict(output_size=(5, 2))),
    "adapt_1x1": ("adaptive", (2, 3, 4, 4), dict(output_size=(1, 1))),
}

BATCH_NORMS = {  # name: input shape, momentum, eps, affine (0 none, 1 weight, 2 both), running statistics, relu after
    "bn_2d": ((6, 3), 0.1, 1e-5, 2, True, False),
    "bn_3d": ((4, 3, 5), 0.3, 1e-3, 1, True, False),
    "bn_4d": ((3, 4, 3, 2), 0.1, 1e-5, 2, True, False),
    "bn_nostats": ((4, 3, 2, 2), 0.1, 1e-5, 2, False, False),
    # xgrad's batch_norm_relu against F.relu(F.batch_norm(...))
    "bn_relu_4d": ((3, 4, 3, 2), 0.1, 1e-5, 2, True, True),
    "bn_relu_2d": ((6, 3), 0.3, 1e-3, 0, True, True),
}

GROUP_NORMS = {  # name: input shape, groups, eps, affine
    "gn_3": ((2, 6, 3, 2), 3, 1e-5, 2),
    "gn_1": ((3, 4, 5), 1, 1e-5, 0),
    "gn_C": ((2, 4, 2, 2), 4, 1e-4, 1),
}


def loss_and_grads(prefix, y, inputs, names, out):
    """Stores y, wy and the gradients of L + P with respect to every input."""
    wy = torch.randn_like(y)
    loss = (torch.tanh(y) * wy).sum()
    (gx,) = torch.autograd.grad(loss, inputs[0], create_graph=True)
    grads = torch.autograd.grad(loss + (gx * gx).sum(), inputs, allow_unused=True)
    out[prefix + "wy"], out[prefix + "y"] = wy, y
    for n, t, g in zip(names, inputs, grads):
        out[prefix + n] = t
        out[prefix + "grad." + n] = g if g is not None else torch.zeros_like(t)


def pool_case(name, cfg, out, meta):
    kind, shape, o = cfg
    x = torch.randn(*shape, **D, requires_grad=True)
    if kind == "max":
        y, idx = F.max_pool2d(x, return_indices=True, **o)
        out[name + ".indices"] = idx
        s = o["stride"] or o["kernel_size"]
        meta[name] = " ".join(map(str, ("max", *o["kernel_size"], *s, *o["padding"], *o["dilation"], int(o["ceil_mode"]))))
    elif kind == "avg":
        y = F.avg_pool2d(x, **o)
        s = o["stride"] or o["kernel_size"]
        meta[name] = " ".join(map(str, ("avg", *o["kernel_size"], *s, *o["padding"], int(o["ceil_mode"]),
                                        int(o["count_include_pad"]))))
    else:
        y = F.adaptive_avg_pool2d(x, o["output_size"])
        meta[name] = " ".join(map(str, ("adaptive", *o["output_size"])))
    loss_and_grads(name + ".", y, [x], ["x"], out)


def affine_params(c, affine):
    w = torch.randn(c, **D, requires_grad=True) if affine >= 1 else None
    b = torch.randn(c, **D, requires_grad=True) if affine >= 2 else None
    return w, b


def batch_norm_case(name, cfg, out, meta):
    shape, momentum, eps, affine, stats, relu = cfg
    after = F.relu if relu else (lambda y: y)
    c = shape[1]
    w, b = affine_params(c, affine)
    rm = torch.zeros(c, **D) if stats else None
    rv = torch.ones(c, **D) if stats else None
    params = [t for t in (w, b) if t is not None]
    names = ["w", "b"][: len(params)]
    for step in range(3):  # two forward steps, then the third with gradients
        x = torch.randn(*shape, **D, requires_grad=True)
        y = after(F.batch_norm(x, rm, rv, w, b, training=True, momentum=momentum, eps=eps))
        if step < 2:
            out[f"{name}.x{step}"] = x
    loss_and_grads(name + ".", y, [x] + params, ["x"] + names, out)
    if stats:
        out[name + ".running_mean"], out[name + ".running_var"] = rm, rv
        x = torch.randn(*shape, **D, requires_grad=True)
        y = after(F.batch_norm(x, rm, rv, w, b, training=False, momentum=momentum, eps=eps))
        loss_and_grads(name + ".eval.", y, [x] + params, ["x"] + names, out)
    meta[name] = f"batch_norm {momentum!r} {eps!r} {affine} {int(stats)} {int(relu)}"


def group_norm_case(name, cfg, out, meta):
    shape, groups, eps, affine = cfg
    w, b = affine_params(shape[1], affine)
    params = [t for t in (w, b) if t is not None]
    x = torch.randn(*shape, **D, requires_grad=True)
    y = F.group_norm(x, groups, w, b, eps)
    loss_and_grads(name + ".", y, [x] + params, ["x", "w", "b"][: 1 + len(params)], out)
    meta[name] = f"group_norm {groups} {eps!r} {affine}"


def main():
    out, meta = {}, {}
    for table, case in ((POOLS, pool_case), (BATCH_NORMS, batch_norm_case), (GROUP_NORMS, group_norm_case)):
        for name, cfg in table.items():
            torch.manual_seed(sum(map(ord, name)))
            case(name, cfg, out, meta)
    save(sys.argv[1], {k: v.detach() for k, v in out.items()}, meta)
    print(f"pool_norm_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
