// What the image models of models/ (ResNet, ViT, CNN) share:
// torchvision's initialisation of convolutions.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::models {

// Every 4-D parameter of `m` (the convolution weights) drawn again from
// N(0, sqrt(2 / fan_out)), fan_out = out kh kw: torchvision's
// kaiming_normal_(mode="fan_out", nonlinearity="relu").
void init_convolutions_fan_out(nn::Module& m, Generator& gen);

}  // namespace xg::models
