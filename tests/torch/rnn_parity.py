# Writes what PyTorch computes for torch.nn.RNN / LSTM / GRU in float64 (the
# weights, inputs, outputs, final states and the gradients of every parameter
# and input) to a safetensors file, for tests/torch/rnn_parity.cpp to compare
# with xgrad's nn::RNN / LSTM / GRU on the same weights.
#   python3 rnn_parity.py OUT.safetensors
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from safetensors_io import save

# name: (module, nonlinearity, C, H, layers, bidirectional, B, T, lengths or None, with initial states)
CASES = {
    "rnn_tanh": ("RNN", "tanh", 3, 4, 2, True, 3, 5, [5, 2, 4], True),
    "rnn_relu": ("RNN", "relu", 3, 4, 1, False, 2, 4, None, False),
    "lstm": ("LSTM", None, 3, 4, 2, True, 3, 6, [6, 1, 3], True),
    "lstm_plain": ("LSTM", None, 5, 3, 1, False, 2, 4, None, False),
    "gru": ("GRU", None, 3, 4, 2, True, 3, 5, [2, 5, 4], True),
    "gru_plain": ("GRU", None, 4, 5, 1, False, 2, 3, None, True),
}


def run(name, spec, out, meta):
    kind, nonlinearity, C, H, L, bidir, B, T, lengths, with_h0 = spec
    torch.manual_seed(sum(map(ord, name)))
    kw = dict(num_layers=L, bidirectional=bidir, batch_first=True, dtype=torch.float64)
    if kind == "RNN":
        kw["nonlinearity"] = nonlinearity
    m = getattr(torch.nn, kind)(C, H, **kw)
    D = 2 if bidir else 1
    x = torch.randn(B, T, C, dtype=torch.float64, requires_grad=True)
    h0 = (0.5 * torch.randn(L * D, B, H, dtype=torch.float64)).requires_grad_() if with_h0 else None
    c0 = (0.5 * torch.randn(L * D, B, H, dtype=torch.float64)).requires_grad_() if with_h0 and kind == "LSTM" else None
    state = None if h0 is None else ((h0, c0) if kind == "LSTM" else h0)
    if lengths:
        packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        y, s = m(packed, state)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=T)
    else:
        y, s = m(x, state)
    h_n, c_n = s if kind == "LSTM" else (s, None)
    w_out, w_h = torch.randn_like(y), torch.randn_like(h_n)
    loss = (y * w_out).sum() + (h_n * w_h).sum()
    if c_n is not None:
        w_c = torch.randn_like(c_n)
        loss = loss + (c_n * w_c).sum()
        out[name + ".w_c"], out[name + ".c_n"] = w_c, c_n
    loss.backward()
    for pname, p in m.named_parameters():
        out[name + ".param." + pname] = p
        out[name + ".grad." + pname] = p.grad
    out[name + ".x"], out[name + ".grad.x"] = x, x.grad
    if h0 is not None:
        out[name + ".h0"], out[name + ".grad.h0"] = h0, h0.grad
    if c0 is not None:
        out[name + ".c0"], out[name + ".grad.c0"] = c0, c0.grad
    out[name + ".w_out"], out[name + ".w_h"], out[name + ".output"], out[name + ".h_n"] = w_out, w_h, y, h_n
    meta[name] = " ".join(map(str, [kind, nonlinearity or "-", C, H, L, int(bidir),
                                    ",".join(map(str, lengths)) if lengths else "-"]))


def main():
    out, meta = {}, {}
    for name, spec in CASES.items():
        run(name, spec, out, meta)
    save(sys.argv[1], out, meta)
    print(f"rnn_parity.py: {len(CASES)} cases written to {sys.argv[1]} (torch {torch.__version__})")


main()
