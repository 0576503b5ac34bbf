# Writes what PyTorch computes for Bahdanau's additive attention and Luong's
# dot and general scores in float64 (written out with torch ops: torch.nn has
# no such modules), with the gradients of every parameter and input, to a
# safetensors file for tests/torch/attention_parity.cpp.
#   python3 attention_parity.py OUT.safetensors
import sys

import torch

from safetensors_io import save

B, T, S, Cq, Ck, Cv, A = 2, 3, 5, 4, 6, 3, 5


def case(name, kind, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    d = dict(dtype=torch.float64)
    ck = Cq if kind == "dot" else Ck
    q = torch.randn(B, T, Cq, **d, requires_grad=True)
    k = torch.randn(B, S, ck, **d, requires_grad=True)
    v = torch.randn(B, S, Cv, **d, requires_grad=True)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, 3:] = True  # row 0 has 3 keys
    params = {}
    if kind == "additive":
        params = {"w_q.weight": torch.randn(A, Cq, **d) * 0.5, "w_q.bias": torch.randn(A, **d) * 0.5,
                  "w_k.weight": torch.randn(A, ck, **d) * 0.5, "v.weight": torch.randn(1, A, **d) * 0.5}
    elif kind == "general":
        params = {"w_a.weight": torch.randn(ck, Cq, **d) * 0.5}
    for p in params.values():
        p.requires_grad_()
    if kind == "additive":
        hq = q @ params["w_q.weight"].T + params["w_q.bias"]  # (B,T,A)
        hk = k @ params["w_k.weight"].T                        # (B,S,A)
        scores = (torch.tanh(hq[:, :, None, :] + hk[:, None, :, :]) @ params["v.weight"].T)[..., 0]
    elif kind == "general":
        scores = (q @ params["w_a.weight"].T) @ k.transpose(1, 2)
    else:
        scores = q @ k.transpose(1, 2)
    weights = torch.softmax(scores.masked_fill(pad[:, None, :], float("-inf")), dim=-1)
    context = weights @ v
    w_context, w_weights = torch.randn_like(context), torch.randn_like(weights)
    ((context * w_context).sum() + (weights * w_weights).sum()).backward()
    for pname, p in params.items():
        out[f"{name}.param.{pname}"], out[f"{name}.grad.{pname}"] = p, p.grad
    for xname, x in (("q", q), ("k", k), ("v", v)):
        out[f"{name}.{xname}"], out[f"{name}.grad.{xname}"] = x, x.grad
    out[f"{name}.pad"] = pad.to(torch.float64)
    out[f"{name}.w_context"], out[f"{name}.w_weights"] = w_context, w_weights
    out[f"{name}.context"], out[f"{name}.weights"] = context, weights
    meta[name] = f"{kind} {Cq} {ck} {A}"


def main():
    out, meta = {}, {}
    for name in ("additive", "dot", "general"):
        case(name, name, out, meta)
    save(sys.argv[1], out, meta)
    print(f"attention_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


main()
