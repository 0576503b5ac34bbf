# Writes what torch.nn's image layers compute in float64 with PyTorch's own
# initial weights: the state dict, an input, the output, and the gradients of
# every parameter and of the input of sum(y * wy) plus a gradient penalty on
# the input (so the second order too), to a safetensors file for
# tests/torch/vision_layers_parity.cpp. A layer with running statistics
# trains on `steps` batches (the gradients are those of the last), then
# evaluates one more batch; its state dict after training is written too.
# The C++ side
# builds the same layer from the same spec, loads the initial state dict
# strictly (PyTorch's names and shapes) and compares.
#   python3 vision_layers_parity.py OUT.safetensors
import sys
import warnings

import torch

from safetensors_io import save

# name: (spec, input shape). A spec is the layer's class and its arguments as
# key=value, pairs written a,b; padding=same is PyTorch's padding="same".
CASES = {
    "conv2d": ("Conv2d in=4 out=6 kernel=3,3 stride=2,2 padding=1,1 dilation=1,1 groups=2 bias=1", (2, 4, 7, 6)),
    "conv2d_same": ("Conv2d in=3 out=2 kernel=2,3 stride=1,1 padding=same dilation=2,1 groups=1 bias=0", (2, 3, 5, 5)),
    "conv1d": ("Conv1d in=4 out=4 kernel=3 stride=2 padding=1 dilation=2 groups=4 bias=1", (3, 4, 10)),
    "conv_t": ("ConvTranspose2d in=4 out=6 kernel=3,2 stride=2,2 padding=1,0 output_padding=1,1 dilation=1,2 "
               "groups=2 bias=1", (2, 4, 3, 4)),
    "maxpool": ("MaxPool2d kernel=3,2 stride=2,1 padding=1,1 dilation=1,2 ceil_mode=1", (2, 3, 7, 6)),
    "avgpool": ("AvgPool2d kernel=3,3 stride=2,2 padding=1,1 ceil_mode=1 count_include_pad=0", (2, 3, 6, 7)),
    "adaptive": ("AdaptiveAvgPool2d output_size=3,2", (2, 3, 7, 5)),
    "flatten": ("Flatten start_dim=1 end_dim=2", (2, 3, 4, 5)),
    "bn2d": ("BatchNorm2d num_features=3 eps=1e-5 momentum=0.2 steps=3", (4, 3, 5, 4)),
    "bn1d": ("BatchNorm1d num_features=4 eps=1e-3 momentum=0.1 steps=3", (5, 4, 6)),
    "bn1d_flat": ("BatchNorm1d num_features=4 eps=1e-5 momentum=0.5 affine=0 steps=3", (6, 4)),
    "groupnorm": ("GroupNorm num_groups=2 num_channels=6 eps=1e-5", (3, 6, 4, 3)),
}


def number(v):
    return float(v) if "." in v or "e" in v else int(v)


def parse(spec):
    kind, *args = spec.split()
    kw = {}
    for a in args:
        k, v = a.split("=")
        kw[k] = v if v == "same" else tuple(int(p) for p in v.split(",")) if "," in v else number(v)
    return kind, kw


def build(spec):
    kind, kw = parse(spec)
    args = dict(kw)
    args.pop("steps", None)
    for flag in ("bias", "affine", "ceil_mode", "count_include_pad"):
        if flag in args:
            args[flag] = bool(args[flag])
    cls = getattr(torch.nn, kind)
    if kind.startswith("Conv"):
        return cls(args.pop("in"), args.pop("out"), args.pop("kernel"), **args, dtype=torch.float64)
    if kind.startswith(("BatchNorm", "GroupNorm")):
        return cls(**args, dtype=torch.float64)
    if kind.endswith("Pool2d") and "kernel" in args:
        args["kernel_size"] = args.pop("kernel")
    return cls(**args)


def case(name, spec, shape, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    m = build(spec)
    for k, v in m.state_dict().items():
        out[f"{name}.param.{k}"] = v.clone()
    steps = parse(spec)[1].get("steps", 1)
    for i in range(steps):  # the gradients compared are those of the last step
        x = (torch.randn(*shape, dtype=torch.float64) * (1 + i) + i).requires_grad_()
        y = m(x)
        wy = torch.randn_like(y)
        (gx,) = torch.autograd.grad((y * wy).sum(), x, create_graph=True)
        params = dict(m.named_parameters())
        grads = torch.autograd.grad((y * wy).sum() + (gx * gx).sum(), [x, *params.values()])
        out[f"{name}.x{i}"], out[f"{name}.wy{i}"] = x, wy
    out[f"{name}.y"], out[f"{name}.grad.x"] = y, grads[0]
    for k, g in zip(params, grads[1:]):
        out[f"{name}.grad.{k}"] = g
    if "steps" in parse(spec)[1]:
        m.eval()
        xe = torch.randn(*shape, dtype=torch.float64)
        out[f"{name}.eval.x"], out[f"{name}.eval.y"] = xe, m(xe)
        for k, v in m.state_dict().items():
            out[f"{name}.after.{k}"] = v
    meta[name] = spec


def main():
    warnings.filterwarnings("ignore", message="Using padding='same'")
    out, meta = {}, {}
    for name, (spec, shape) in CASES.items():
        case(name, spec, shape, out, meta)
    save(sys.argv[1], {k: v.detach() for k, v in out.items()}, meta)
    print(f"vision_layers_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
