#!/usr/bin/python3
# A small U-Net (Ronneberger et al., 2015) as the widely used Pytorch-UNet
# repository writes it (DoubleConv, Down, Up with bilinear upsampling and
# the skip's padding, OutConv), the model examples/port_unet.cpp ports line
# for line. Writes its state dict (float64), a batch of images and of
# per-pixel classes, and PyTorch's outputs: the logits (N, classes, H, W),
# the cross-entropy over the pixels and its gradient for the first
# convolution's weight.
#   port_unet.py OUT.safetensors
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from safetensors_io import save  # noqa: E402


# --- the model (the lines the port counts) ---
class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        mid_channels = mid_channels or out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diffY, diffX = x2.size(2) - x1.size(2), x2.size(3) - x1.size(3)
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, width=4):
        super().__init__()
        self.inc = DoubleConv(n_channels, width)
        self.down1 = Down(width, width * 2)
        self.down2 = Down(width * 2, width * 4 // 2)
        self.up1 = Up(width * 4, width * 2 // 2)
        self.up2 = Up(width * 2, width)
        self.outc = nn.Conv2d(width, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)
# --- end of the model ---


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: port_unet.py OUT.safetensors")
    torch.manual_seed(0)
    model = UNet(3, 5).double()
    images = torch.randn(2, 3, 13, 10, dtype=torch.float64)  # odd sizes: the skip's padding is used
    masks = torch.randint(0, 5, (2, 13, 10))
    tensors = dict(model.state_dict())
    logits = model(images)  # training mode: batch statistics
    loss = F.cross_entropy(logits, masks)
    loss.backward()
    tensors.update({"input.images": images, "input.masks": masks, "output.logits": logits.detach(),
                    "output.loss": loss.detach().reshape(1), "output.grad_inc": model.inc.double_conv[0].weight.grad})
    save(sys.argv[1], tensors)
    print(f"port_unet.py: {len(model.state_dict())} tensors, logits {tuple(logits.shape)} -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
