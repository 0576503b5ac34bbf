#!/usr/bin/python3
# torchvision's ResNet-18 (models/resnet.py: BasicBlock, _make_layer, the
# stem and the head), written as torchvision writes it, the model that
# examples/port_resnet18.cpp ports line for line. Runs a few training
# batches (so the batch norms' running statistics are not their initial
# values), then writes its state dict as it is (float64), a batch of images
# and the logits PyTorch computes in eval mode to one safetensors file.
#   port_resnet18.py OUT.safetensors
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from safetensors_io import save  # noqa: E402


# --- the model (the lines the port counts) ---
class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
# --- end of the model ---


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: port_resnet18.py OUT.safetensors")
    torch.manual_seed(0)
    model = ResNet18(num_classes=10).double()
    for _ in range(3):  # running statistics off their initial values
        model(torch.randn(4, 3, 32, 32, dtype=torch.float64))
    model.eval()
    images = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        logits = model(images)
    tensors = dict(model.state_dict())
    tensors["input.images"], tensors["output.logits"] = images, logits
    save(sys.argv[1], tensors)
    print(f"port_resnet18.py: {len(model.state_dict())} tensors, logits {tuple(logits.shape)} -> {sys.argv[1]}")


if __name__ == "__main__":
    main()
