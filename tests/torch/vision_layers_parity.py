# Writes what torch.nn's image layers compute in float64 with PyTorch's own
# initial weights: the state dict, an input, the output, and the gradients of
# every parameter and of the input of sum(y * wy) plus a gradient penalty on
# the input (so the second order too), to a safetensors file for
# tests/torch/vision_layers_parity.cpp, which builds the same layer from the
# same spec, loads the state dict strictly (PyTorch's names and shapes) and
# compares.
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
}


def parse(spec):
    kind, *args = spec.split()
    kw = {}
    for a in args:
        k, v = a.split("=")
        kw[k] = v if v == "same" else tuple(int(p) for p in v.split(",")) if "," in v else int(v)
    return kind, kw


def build(spec):
    kind, kw = parse(spec)
    args = dict(kw)
    in_, out, kernel = args.pop("in"), args.pop("out"), args.pop("kernel")
    args["bias"] = bool(args["bias"])
    return getattr(torch.nn, kind)(in_, out, kernel, **args, dtype=torch.float64)


def case(name, spec, shape, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    m = build(spec)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    y = m(x)
    wy = torch.randn_like(y)
    (gx,) = torch.autograd.grad((y * wy).sum(), x, create_graph=True)
    params = dict(m.named_parameters())
    grads = torch.autograd.grad((y * wy).sum() + (gx * gx).sum(), [x, *params.values()])
    for k, v in m.state_dict().items():
        out[f"{name}.param.{k}"] = v
    out[f"{name}.x"], out[f"{name}.y"], out[f"{name}.wy"], out[f"{name}.grad.x"] = x, y, wy, grads[0]
    for k, g in zip(params, grads[1:]):
        out[f"{name}.grad.{k}"] = g
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
