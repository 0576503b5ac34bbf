#!/usr/bin/python3
# A PyTorch text classifier on nn.TransformerEncoder, the model that
# examples/port_text_classifier.cpp ports line for line. Writes its state
# dict as it is, a batch of ids and the logits PyTorch computes (eval mode)
# to one safetensors file, which the C++ port loads and checks.
#   port_text_classifier.py OUT.safetensors
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from safetensors_io import save  # noqa: E402  (the standard library and torch only)


# --- the model (the lines the port counts) ---
class TextClassifier(nn.Module):
    def __init__(self, vocab=50, d_model=32, nhead=4, num_layers=2, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.Dropout(0.1),
                                  nn.Linear(d_model, classes))

    def forward(self, ids):                          # (N, S) int64, 0 = padding
        pad = ids == 0
        h = self.encoder(self.embed(ids), src_key_padding_mask=pad)  # (N, S, C)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))            # (N, classes)
# --- end of the model ---


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: port_text_classifier.py OUT.safetensors")
    torch.manual_seed(0)
    model = TextClassifier().eval()
    ids = torch.randint(1, 50, (4, 9))
    ids[1, 6:] = 0  # padding at the end of two rows
    ids[3, 3:] = 0
    with torch.no_grad():
        logits = model(ids)
    tensors = dict(model.state_dict())
    tensors["input.ids"], tensors["output.logits"] = ids, logits
    save(sys.argv[1], tensors)
    print(f"port_text_classifier.py: {len(model.state_dict())} tensors, logits {tuple(logits.shape)} -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
