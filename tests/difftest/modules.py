"""The fuzzer's module mode (difftest.py --modules): random compositions of
torch.nn layers with parameters and buffers, as an nn.Sequential, in
training or evaluation mode, built on both sides from the same state dict.
A program runs the composition, reads its buffers (running statistics after
a training step), takes first and sometimes second gradients with respect
to the input and a subset of the parameters, then saves the module, loads
it into a fresh one (xgrad: its safetensors file; PyTorch: torch.save) and
runs it again.

A layer is drawn by the tensor it receives (as the program's mode computes it);
each draw returns the class and PyTorch's keyword arguments, or None where
the tensor does not suit it. A normalisation is drawn only where each set it
normalises has 2 or more elements and a variance of at least 1e-2 (near
zero, its result is rounding error divided by sqrt(eps)). The activations
are smooth or have no flat part, so that max pooling meets no ties.
"""
import random

import torch


def spread(v):
    """Whether every row of v (sets, elements) has 2 or more elements and a variance of at least 1e-2."""
    return v.shape[-1] >= 2 and bool((v.var(-1, unbiased=False) >= 1e-2).all())


def _linear(r, y):
    shape = list(y.shape)
    return "Linear", {"in_features": shape[-1], "out_features": r.choice([2, 3, 4]), "bias": r.random() < 0.8}


def _layer_norm(r, y):
    shape = list(y.shape)
    if not spread(y.reshape(-1, shape[-1])):
        return None
    return "LayerNorm", {"normalized_shape": shape[-1], "eps": r.choice([1e-5, 1e-3]),
                         "elementwise_affine": r.random() < 0.8}


def _activation(r, y):
    shape = list(y.shape)
    name = r.choice(["Tanh", "GELU", "SiLU", "Sigmoid", "ELU", "Softplus", "LeakyReLU", "PReLU", "Mish"])
    if name == "GELU":
        return name, {"approximate": r.choice(["none", "tanh"])}
    if name == "LeakyReLU":
        return name, {"negative_slope": r.choice([0.01, 0.2])}
    if name == "PReLU":
        return name, {"num_parameters": shape[1] if len(shape) >= 2 and r.random() < 0.5 else 1,
                      "init": r.choice([0.25, 0.1])}
    return name, {}


def _batch_norm(r, y):
    shape = list(y.shape)
    if len(shape) not in (2, 3, 4) or not spread(y.transpose(0, 1).reshape(shape[1], -1)):
        return None
    return f"BatchNorm{1 if len(shape) < 4 else 2}d", {
        "num_features": shape[1], "eps": r.choice([1e-5, 1e-3]), "momentum": r.choice([0.1, 0.3]),
        "affine": r.random() < 0.8, "track_running_stats": r.random() < 0.8}


def _instance_norm(r, y):
    shape = list(y.shape)
    if len(shape) not in (3, 4) or not spread(y.reshape(shape[0] * shape[1], -1)):
        return None
    # track_running_stats is not built in xgrad (docs/nn.md): refused by name
    return f"InstanceNorm{len(shape) - 2}d", {"num_features": shape[1], "affine": r.random() < 0.5}


def _group_norm(r, y):
    shape = list(y.shape)
    if len(shape) < 2:
        return None
    groups = r.choice([g for g in (1, 2, 3) if shape[1] % g == 0])
    if not spread(y.reshape(shape[0], groups, -1)):
        return None
    return "GroupNorm", {"num_groups": groups, "num_channels": shape[1], "affine": r.random() < 0.8}


def _conv(r, y):
    shape = list(y.shape)
    if len(shape) not in (3, 4):
        return None
    d = len(shape) - 2
    k = r.choice([k for k in (1, 2, 3) if k <= min(shape[2:])])
    return f"Conv{d}d", {"in_channels": shape[1], "out_channels": r.choice([2, 3, 4]), "kernel_size": k,
                         "stride": r.choice([1, 1, 2]), "padding": r.choice([0, k // 2]), "bias": r.random() < 0.8}


def _pool(r, y):
    shape = list(y.shape)
    if len(shape) not in (3, 4) or min(shape[2:]) < 2:
        return None
    return f"{r.choice(['Max', 'Avg'])}Pool{len(shape) - 2}d", {"kernel_size": 2}


def _flatten(r, y):
    return ("Flatten", {}) if y.dim() >= 3 else None


def _encoder_layer(r, y):
    shape = list(y.shape)
    if len(shape) != 3 or shape[-1] % 2:
        return None
    return "TransformerEncoderLayer", {"d_model": shape[-1], "nhead": r.choice([1, 2]), "dim_feedforward": 6,
                                       "dropout": 0.0, "activation": r.choice(["relu", "gelu"]),
                                       "batch_first": True, "norm_first": r.random() < 0.5}


DRAWS = [_linear, _layer_norm, _activation, _activation, _batch_norm, _instance_norm, _group_norm, _conv, _conv,
         _pool, _flatten, _encoder_layer]


def torch_layer(cls, kwargs):
    return getattr(torch.nn, cls)(**kwargs)


def move_statistics(layer, r):
    """Running means and variances moved off their initial 0 and 1, so that
    evaluation mode reads them, before the layer runs in the generator."""
    with torch.no_grad():
        for name, t in layer.named_buffers():
            if name.endswith("running_mean"):
                t.copy_(torch.tensor([r.uniform(-1, 1) for _ in range(t.numel())]))
            elif name.endswith("running_var"):
                t.copy_(torch.tensor([r.uniform(0.5, 2) for _ in range(t.numel())]))
            elif name.endswith("num_batches_tracked"):
                t.fill_(r.randint(0, 5))


def state_of(module):
    """The module's state dict as the program holds it (parameters as PyTorch
    initialised them, seeded; the statistics move_statistics set)."""
    return {name: {"shape": list(t.shape), "data": t.double().reshape(-1).tolist()}
            for name, t in module.state_dict().items()}


def program(seed):
    """One module program, in the fuzzer's format (README.md)."""
    r = random.Random(seed)
    torch.manual_seed(seed)
    kind = r.choice(["flat", "seq", "1d", "2d"])
    n = r.choice([2, 3])
    shape = {"flat": [n, r.randint(2, 5)], "seq": [n, r.randint(2, 4), r.choice([2, 4])],
             "1d": [n, r.randint(1, 4), r.randint(3, 7)], "2d": [n, r.randint(1, 3), r.randint(3, 5), r.randint(3, 5)]}[kind]
    train = r.random() < 0.5
    x = torch.tensor([r.uniform(-2, 2) for _ in range(torch.Size(shape).numel())]).reshape(shape)
    children, layers, y = [], [], x
    for _ in range(r.randint(2, 5)):
        draw = r.choice(DRAWS)
        spec = draw(r, y)
        if spec is None:
            continue
        layer = torch_layer(*spec)
        move_statistics(layer, r)
        state = {k: v.clone() for k, v in layer.state_dict().items()}  # as the program loads it
        with torch.no_grad():
            y = layer.train(train)(y)
        layer.load_state_dict(state)  # the statistics before this call (training mode updates them)
        children.append({"class": spec[0], "kwargs": spec[1]})
        layers.append(layer)
    if not children:
        children.append({"class": "Tanh", "kwargs": {}})
        layers.append(torch.nn.Tanh())
        y = torch.tanh(y)
    seq = torch.nn.Sequential(*layers)
    params = [name for name, _ in seq.named_parameters()]
    buffers = [name for name, _ in seq.named_buffers()]
    wrt_params = [p for p in params if r.random() < 0.6]
    steps = [{"op": "input", "shape": shape, "data": x.reshape(-1).tolist(), "rg": True},
             {"op": "module", "class": "Sequential", "children": children, "state": state_of(seq),
              "eval": not train, "args": [0], "params": wrt_params, "buffers": buffers}]
    out = 1
    vid = 2 + len(wrt_params) + len(buffers)
    wrt = [0] + list(range(2, 2 + len(wrt_params)))
    steps.append({"op": "input", "shape": list(y.shape), "data": [r.uniform(-1, 1) for _ in range(y.numel())],
                  "rg": False})
    seed_id = vid
    vid += 1
    second = r.random() < 0.4
    steps.append({"op": "grad", "outputs": [out], "grad_outputs": [seed_id], "wrt": wrt, "create_graph": second})
    grads = list(range(vid, vid + len(wrt)))
    vid += len(wrt)
    if second:
        g = r.choice(grads)
        g_shape = shape if g == grads[0] else list(dict(seq.named_parameters())[wrt_params[g - grads[1]]].shape)
        steps.append({"op": "input", "shape": g_shape,
                      "data": [r.uniform(-1, 1) for _ in range(torch.Size(g_shape).numel())], "rg": False})
        steps.append({"op": "grad", "outputs": [g], "grad_outputs": [vid], "wrt": r.sample(wrt, r.randint(1, len(wrt))),
                      "create_graph": False})
    steps.append({"op": "reload", "module": 0, "args": [0], "buffers": buffers})
    return {"steps": steps}
