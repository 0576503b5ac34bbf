#!/usr/bin/python3
# The DCGAN of Radford et al. (2015) as PyTorch's examples write it
# (dcgan/main.py: a Generator and a Discriminator, each an nn.Sequential in
# `main`, DCGAN's initialisation), the model examples/port_dcgan.cpp ports
# line for line. Writes both state dicts as they are (float64), a batch of
# noise and of images, then PyTorch's outputs: the generator's images, the
# discriminator's probabilities of them, and the discriminator's
# probabilities of the real images after one Adam step on its BCE loss.
#   port_dcgan.py OUT.safetensors
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from safetensors_io import save  # noqa: E402

nz, ngf, ndf, nc = 16, 8, 8, 3


# --- the model (the lines the port counts) ---
class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def d_step(netD, netG, real, noise):
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerD.zero_grad()
    errD_real = criterion(netD(real), torch.full((real.size(0),), 1.0, dtype=real.dtype))
    errD_fake = criterion(netD(netG(noise).detach()), torch.full((real.size(0),), 0.0, dtype=real.dtype))
    (errD_real + errD_fake).backward()
    optimizerD.step()
# --- end of the model ---


def weights_init(m):  # DCGAN's initialisation, as the example applies it
    if type(m).__name__.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif type(m).__name__.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: port_dcgan.py OUT.safetensors")
    torch.manual_seed(0)
    netG, netD = Generator().double(), Discriminator().double()
    netG.apply(weights_init)
    netD.apply(weights_init)
    noise = torch.randn(4, nz, 1, 1, dtype=torch.float64)
    real = torch.rand(4, nc, 64, 64, dtype=torch.float64) * 2 - 1
    tensors = {"G." + k: v.clone() for k, v in netG.state_dict().items()}
    tensors.update({"D." + k: v.clone() for k, v in netD.state_dict().items()})
    with torch.no_grad():
        fake = netG(noise)
        p_fake = netD(fake)
    d_step(netD, netG, real, noise)  # training mode: batch statistics, running ones updated
    netD.eval()
    with torch.no_grad():
        p_real = netD(real)
    tensors.update({"input.noise": noise, "input.real": real, "output.fake": fake, "output.p_fake": p_fake,
                    "output.p_real_after_step": p_real})
    save(sys.argv[1], tensors)
    print(f"port_dcgan.py: {len(tensors) - 5} tensors, images {tuple(fake.shape)} -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
