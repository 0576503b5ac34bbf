// Image transforms for a DataLoader, on one (C,H,W) float image at a time,
// as torchvision.transforms' of the same names. Each returns a new tensor;
// none records on the tape.
#pragma once

#include <array>
#include <vector>

#include "data/loader.h"

namespace xg::data {

// Applies each transform in turn.
Transform compose(std::vector<Transform> transforms);
// Pads each side with `padding` zeros, then crops a (h, w) window at a
// uniformly drawn position (RandomCrop(size, padding)).
Transform random_crop(std::array<int64_t, 2> size, int64_t padding = 0);
// Mirrors the image left to right with probability p (RandomHorizontalFlip).
Transform random_horizontal_flip(double p = 0.5);
// (x - mean[c]) / std[c] per channel (Normalize); one value each per channel.
Transform normalize(std::vector<double> mean, std::vector<double> std);
// With probability p sets a rectangle to `value`: its area a uniform
// fraction in `scale` of the image's, its aspect ratio log-uniform in
// `ratio`, up to 10 draws to fit (RandomErasing).
Transform random_erasing(double p = 0.5, std::array<double, 2> scale = {0.02, 0.33},
                         std::array<double, 2> ratio = {0.3, 3.3}, double value = 0.0);

}  // namespace xg::data
