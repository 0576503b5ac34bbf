// What the image models of models/ (ResNet, ViT, CNN) share: the input
// check, a padded convolution window, and torchvision's initialisation of
// convolutions.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::models {

// A stride-1 window with `padding` zeros on each side (a 3x3 kernel with
// padding 1 keeps the image size).
Conv2dOptions padded(int64_t padding);

// Throws ShapeError "WHO: expected images (N, C, H, W) with C = channels
// [and H = W = side], got SHAPE" unless x is 4-D with that many channels
// (and, if side > 0, side x side pixels).
void require_images(const Tensor& x, int64_t channels, int64_t side, const std::string& who);

// Every 4-D parameter of `m` (the convolution weights) drawn again from
// N(0, sqrt(2 / fan_out)), fan_out = out kh kw: torchvision's
// kaiming_normal_(mode="fan_out", nonlinearity="relu").
void init_convolutions_fan_out(nn::Module& m, Generator& gen);

}  // namespace xg::models
