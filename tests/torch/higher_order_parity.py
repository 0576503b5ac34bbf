# Writes what PyTorch computes for second-order gradients in float64, for
# tests/torch/higher_order_parity.cpp to compare with xg::grad(create_graph),
# Tensor::backward and xg::hvp on the same weights and inputs:
#   mlp_gp           a gradient penalty on an MLP critic (Linear 5->16, tanh,
#                    Linear 16->16, gelu, Linear 16->1): the loss and its
#                    gradient with respect to every parameter and the input
#   transformer_gp   a one-layer models::Transformer's label-smoothed loss L
#                    plus 0.5 * sum over parameters of |dL/dp|^2: L, the total
#                    and the total's gradient with respect to every parameter
#   transformer_hvp  the Hessian-vector product of the same L along a random
#                    direction (one tensor per parameter)
#   bilstm_gp        a bidirectional LSTM with per-row lengths and initial
#                    states: g = d<y, gy>/dx (x only), P = sum(g^2) and dP/d
#                    every parameter, h0, c0 and x
#   wgan_gp_layernorm a gradient penalty on a critic fc2(tanh(ln(fc1(x)))):
#                    the loss and its gradient with respect to every parameter
#                    (the layer norm's too) and the input
#   cross_attention_gp multi-head cross-attention (queries from x, keys and
#                    values from a memory, a key padding mask): g = d<out, gy>/dx
#                    (x only), P = sum(g^2) and dP/d the memory, x and every
#                    parameter
#   linear_cross_entropy_gg  cross_entropy(linear(x, W, b)) with ignored rows
#                    and label smoothing: g = dL/dx (x only), P = sum(g^2) and
#                    dP/dW, dP/db, dP/dx
# The last four go through the ops whose second order xgrad computes by
# recomputation (recurrence, layer_norm, attention, linear_cross_entropy);
# each first gradient is taken with respect to x alone, so the other inputs'
# terms of the second order come only from the graph of that gradient.
# The Transformer is PyTorch's TransformerEncoderLayer and
# TransformerDecoderLayer under models::Transformer's embedding, positional
# encoding and tied projection (post-norm, dropout 0).
#   python3 higher_order_parity.py OUT.safetensors
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from safetensors_io import save

D64 = dict(dtype=torch.float64)

# ---- mlp_gp ----------------------------------------------------------------

MLP_IN, MLP_HIDDEN, MLP_N, GP_WEIGHT = 5, 16, 8, 10.0


def linear_params(sizes):
    """Weights and biases of Linear layers {name: (out, in)}, drawn in
    nn::Linear's (and torch.nn.Linear's) initial range."""
    params = {}
    for layer, (o, i) in sizes.items():
        bound = 1 / math.sqrt(i)
        params[layer + ".weight"] = (torch.rand(o, i, **D64) * 2 - 1) * bound
        params[layer + ".bias"] = (torch.rand(o, **D64) * 2 - 1) * bound
    return params


def gradient_penalty(name, out, meta, params, x, critic, config):
    """A WGAN-GP critic's loss, mean(D(x)) + GP_WEIGHT * mean((|dD/dx| - 1)^2),
    the first gradient with respect to x alone; backward into every
    parameter and x."""
    for p in params.values():
        p.requires_grad_()
    x.requires_grad_()
    d = critic(x)  # (N,1)
    (g,) = torch.autograd.grad(d.sum(), x, create_graph=True)  # (N,in)
    norm = torch.sqrt((g * g).sum(1))
    loss = d.mean() + GP_WEIGHT * ((norm - 1) ** 2).mean()
    loss.backward()
    for pname, p in params.items():
        out[f"{name}.param.{pname}"], out[f"{name}.grad.{pname}"] = p, p.grad
    out[f"{name}.x"], out[f"{name}.grad.x"] = x, x.grad
    out[f"{name}.loss"] = loss
    meta[name] = config


def mlp_gp(name, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    params = linear_params({"fc1": (MLP_HIDDEN, MLP_IN), "fc2": (MLP_HIDDEN, MLP_HIDDEN), "fc3": (1, MLP_HIDDEN)})
    x = torch.randn(MLP_N, MLP_IN, **D64)

    def critic(x):
        h = torch.tanh(F.linear(x, params["fc1.weight"], params["fc1.bias"]))
        h = F.gelu(F.linear(h, params["fc2.weight"], params["fc2.bias"]))
        return F.linear(h, params["fc3.weight"], params["fc3.bias"])  # (N,1)

    gradient_penalty(name, out, meta, params, x, critic, f"{MLP_IN} {MLP_HIDDEN} {GP_WEIGHT}")


# ---- the Transformer --------------------------------------------------------

V, C, H, FF, PAD, SMOOTHING = 11, 16, 2, 32, 0, 0.1
# Rows padded with PAD (0) at the end; tgt_in starts with BOS (1); no row of
# any mask is all masked.
SRC = [[3, 7, 2, 9, 4, 5], [6, 2, 8, 10, 0, 0], [5, 5, 3, 0, 0, 0]]
TGT_IN = [[1, 4, 9, 2, 7], [1, 10, 3, 0, 0], [1, 6, 2, 8, 0]]
TGT_OUT = [[4, 9, 2, 7, 2], [10, 3, 2, 0, 0], [6, 2, 8, 2, 0]]


def transformer_modules():
    """PyTorch's own layers for models::Transformer with layers=1 (post-norm,
    batch first, ReLU, dropout 0), under the model's keys: {name: parameter}
    and the two layers. Glorot-uniform matrices (as the model's own
    initialisation), biases in nn::Linear's range, layer norms off their
    identity so that they count."""
    torch.manual_seed(sum(map(ord, "transformer")))
    enc = torch.nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, batch_first=True, **D64)
    dec = torch.nn.TransformerDecoderLayer(C, H, FF, dropout=0.0, batch_first=True, **D64)
    embedding = torch.nn.Parameter(torch.empty(V, C, **D64))
    params = {"src_embed.weight": embedding}
    params.update({"encoder.layers.0." + n: w for n, w in enc.named_parameters()})
    params.update({"decoder.layers.0." + n: w for n, w in dec.named_parameters()})
    with torch.no_grad():
        for pname, w in params.items():
            if w.dim() == 2:
                bound = math.sqrt(6 / (w.shape[0] + w.shape[1]))
                w.copy_((torch.rand(*w.shape, **D64) * 2 - 1) * bound)
            elif ".norm" in pname:
                base = 1.0 if pname.endswith(".weight") else 0.0
                w.copy_(base + 0.1 * torch.randn(*w.shape, **D64))
            else:
                fan_in = FF if ".linear2." in pname else C
                w.copy_((torch.rand(*w.shape, **D64) * 2 - 1) / math.sqrt(fan_in))
    return params, enc, dec


def positional_encoding(length):
    t = torch.arange(length, **D64)[:, None]
    c = torch.arange(C)
    angle = t * torch.pow(torch.tensor(10000.0, **D64), -(c - c % 2).to(torch.float64) / C)
    return torch.where(c % 2 == 0, torch.sin(angle), torch.cos(angle))  # (L,C)


def transformer_loss(P, enc, dec, src, tgt_in, tgt_out):
    E = P["src_embed.weight"]

    def embed(ids):
        return E[ids] * math.sqrt(C) + positional_encoding(ids.shape[1])

    src_pad, tgt_pad = src == PAD, tgt_in == PAD
    T = tgt_in.shape[1]
    causal = torch.full((T, T), float("-inf"), **D64).triu(1)
    memory = enc(embed(src), src_key_padding_mask=src_pad)
    y = dec(embed(tgt_in), memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    logits = y @ E.T  # tied output projection, (B,T,V)
    return F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD, label_smoothing=SMOOTHING)


def transformer_case(name, kind, out, meta):
    P, enc, dec = transformer_modules()
    src, tgt_in, tgt_out = (torch.tensor(b, dtype=torch.int64) for b in (SRC, TGT_IN, TGT_OUT))
    names = list(P)
    loss = transformer_loss(P, enc, dec, src, tgt_in, tgt_out)
    grads = torch.autograd.grad(loss, [P[n] for n in names], create_graph=True)
    if kind == "gp":
        total = loss + 0.5 * sum((g * g).sum() for g in grads)
        second = torch.autograd.grad(total, [P[n] for n in names])
        out[f"{name}.total"] = total
    else:
        torch.manual_seed(sum(map(ord, name)))
        v = {n: torch.randn_like(P[n]) for n in names}
        dot = sum((g * v[n]).sum() for n, g in zip(names, grads))
        second = torch.autograd.grad(dot, [P[n] for n in names])
        for n in names:
            out[f"{name}.v.{n}"] = v[n]
    for n, g, s in zip(names, grads, second):
        out[f"{name}.param.{n}"], out[f"{name}.grad.{n}"] = P[n], g
        out[f"{name}.{'grad_total' if kind == 'gp' else 'hvp'}.{n}"] = s
    out[f"{name}.src"], out[f"{name}.tgt_in"], out[f"{name}.tgt_out"] = src, tgt_in, tgt_out
    out[f"{name}.loss"] = loss
    meta[name] = f"{kind} {V} {C} {H} {FF} {PAD} {SMOOTHING}"


# ---- bilstm_gp --------------------------------------------------------------

# Rows past their length as nn::LSTM treats them: a packed sequence (the state
# stops at the row's length, the reverse direction starts at its last
# element, the output is zero past it).
LSTM_IN, LSTM_HIDDEN, LSTM_T, LSTM_LENGTHS = 3, 4, 4, [4, 2, 3]


def bilstm_gp(name, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    m = torch.nn.LSTM(LSTM_IN, LSTM_HIDDEN, bidirectional=True, batch_first=True, **D64)
    B = len(LSTM_LENGTHS)
    x = torch.randn(B, LSTM_T, LSTM_IN, **D64, requires_grad=True)
    h0 = (0.5 * torch.randn(2, B, LSTM_HIDDEN, **D64)).requires_grad_()
    c0 = (0.5 * torch.randn(2, B, LSTM_HIDDEN, **D64)).requires_grad_()
    packed = pack_padded_sequence(x, torch.tensor(LSTM_LENGTHS), batch_first=True, enforce_sorted=False)
    y, _ = m(packed, (h0, c0))
    y, _ = pad_packed_sequence(y, batch_first=True, total_length=LSTM_T)  # (B,T,2H)
    gy = torch.randn_like(y)
    (g,) = torch.autograd.grad((y * gy).sum(), x, create_graph=True)  # (B,T,C)
    p = (g * g).sum()
    p.backward()
    for pname, w in m.named_parameters():
        out[f"{name}.param.{pname}"], out[f"{name}.grad.{pname}"] = w, w.grad
    for key, t in (("x", x), ("h0", h0), ("c0", c0)):
        out[f"{name}.{key}"], out[f"{name}.grad.{key}"] = t, t.grad
    out[f"{name}.gy"], out[f"{name}.g"], out[f"{name}.p"] = gy, g, p
    meta[name] = f"{LSTM_IN} {LSTM_HIDDEN} {','.join(map(str, LSTM_LENGTHS))}"


# ---- wgan_gp_layernorm ------------------------------------------------------

LN_IN, LN_HIDDEN, LN_N = 5, 8, 6


def wgan_gp_layernorm(name, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    params = linear_params({"fc1": (LN_HIDDEN, LN_IN), "fc2": (1, LN_HIDDEN)})
    # The layer norm off its identity, so that its parameters count.
    params["ln.weight"] = 1 + 0.3 * torch.randn(LN_HIDDEN, **D64)
    params["ln.bias"] = 0.3 * torch.randn(LN_HIDDEN, **D64)
    x = torch.randn(LN_N, LN_IN, **D64)

    def critic(x):
        h = F.linear(x, params["fc1.weight"], params["fc1.bias"])
        h = torch.tanh(F.layer_norm(h, (LN_HIDDEN,), params["ln.weight"], params["ln.bias"], 1e-5))
        return F.linear(h, params["fc2.weight"], params["fc2.bias"])  # (N,1)

    gradient_penalty(name, out, meta, params, x, critic, f"{LN_IN} {LN_HIDDEN} {GP_WEIGHT}")


# ---- cross_attention_gp -----------------------------------------------------

# nn::MultiHeadAttention written out as xg::attention computes it: scores
# scaled by 1/sqrt(D), padded keys' scores set to -1e9 before the softmax.
XA_B, XA_T, XA_S, XA_C, XA_H = 2, 3, 4, 8, 2
XA_PAD = [[0, 0, 0, 1], [0, 0, 1, 1]]  # 1: a padded key (no row all padded)


def cross_attention_gp(name, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    B, T, S, C, H, D = XA_B, XA_T, XA_S, XA_C, XA_H, XA_C // XA_H
    P = linear_params({w: (C, C) for w in ("w_q", "w_k", "w_v", "w_o")})
    for t in P.values():
        t.requires_grad_()
    x = torch.randn(B, T, C, **D64, requires_grad=True)
    memory = torch.randn(B, S, C, **D64, requires_grad=True)
    pad = torch.tensor(XA_PAD, **D64)

    def linear(t, w):
        return F.linear(t, P[w + ".weight"], P[w + ".bias"])

    q = linear(x, "w_q").view(B, T, H, D).transpose(1, 2)  # (B,H,T,D)
    k = linear(memory, "w_k").view(B, S, H, D).transpose(1, 2)  # (B,H,S,D)
    v = linear(memory, "w_v").view(B, S, H, D).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)  # (B,H,T,S)
    w = torch.softmax(scores.masked_fill(pad[:, None, None, :] != 0, -1e9), dim=-1)
    y = linear((w @ v).transpose(1, 2).reshape(B, T, C), "w_o")  # (B,T,C)
    gy = torch.randn_like(y)
    (g,) = torch.autograd.grad((y * gy).sum(), x, create_graph=True)
    p = (g * g).sum()
    p.backward()
    for pname, t in P.items():
        out[f"{name}.param.{pname}"] = t
        if t.grad is not None:  # w_o.bias: g does not depend on it, no gradient is written
            out[f"{name}.grad.{pname}"] = t.grad
    out[f"{name}.x"], out[f"{name}.grad.x"] = x, x.grad
    out[f"{name}.memory"], out[f"{name}.grad.memory"] = memory, memory.grad
    out[f"{name}.pad"], out[f"{name}.gy"], out[f"{name}.g"], out[f"{name}.p"] = pad, gy, g, p
    meta[name] = f"{C} {H}"


# ---- linear_cross_entropy_gg ------------------------------------------------

LCE_N, LCE_C, LCE_V, LCE_IGNORE, LCE_SMOOTHING = 7, 5, 6, -100, 0.1
LCE_TARGETS = [2, -100, 5, 0, -100, 3, 1]  # two ignored rows


def linear_cross_entropy_gg(name, out, meta):
    torch.manual_seed(sum(map(ord, name)))
    lin = linear_params({"out": (LCE_V, LCE_C)})
    W, b = lin["out.weight"].requires_grad_(), lin["out.bias"].requires_grad_()
    x = torch.randn(LCE_N, LCE_C, **D64, requires_grad=True)
    targets = torch.tensor(LCE_TARGETS, dtype=torch.int64)
    loss = F.cross_entropy(F.linear(x, W, b), targets, ignore_index=LCE_IGNORE, label_smoothing=LCE_SMOOTHING)
    (g,) = torch.autograd.grad(loss, x, create_graph=True)  # (N,C)
    p = (g * g).sum()
    p.backward()
    for key, t in (("x", x), ("weight", W), ("bias", b)):
        out[f"{name}.{key}"], out[f"{name}.grad.{key}"] = t, t.grad
    out[f"{name}.targets"], out[f"{name}.loss"], out[f"{name}.g"], out[f"{name}.p"] = targets, loss, g, p
    meta[name] = f"{LCE_IGNORE} {LCE_SMOOTHING}"


def main():
    out, meta = {}, {}
    mlp_gp("mlp_gp", out, meta)
    transformer_case("transformer_gp", "gp", out, meta)
    transformer_case("transformer_hvp", "hvp", out, meta)
    bilstm_gp("bilstm_gp", out, meta)
    wgan_gp_layernorm("wgan_gp_layernorm", out, meta)
    cross_attention_gp("cross_attention_gp", out, meta)
    linear_cross_entropy_gg("linear_cross_entropy_gg", out, meta)
    save(sys.argv[1], out, meta)
    print(f"higher_order_parity.py: {len(meta)} cases written to {sys.argv[1]} (torch {torch.__version__})")


main()
