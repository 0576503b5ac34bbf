#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "autograd/require.h"

namespace xg::data {

namespace {

// The image's (C, H, W), or an error naming the transform. Callers copy
// them into variables: C++17 lambdas cannot capture structured bindings.
std::array<int64_t, 3> chw(const Tensor& x, const char* transform) {
  if (!x.defined() || x.dim() != 3 || x.dtype() == i64)
    throw ShapeError(std::string(transform) + ": expected a float (C,H,W) image, got " +
                     (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
  return {x.size(0), x.size(1), x.size(2)};
}

// Calls f(T*) on a float32 or float64 tensor's values.
template <class F>
void on_values(Tensor& t, F&& f) {
  if (t.dtype() == f32)
    f(t.data<float>());
  else
    f(t.data<double>());
}

// A plain copy: transforms run on the loader's thread, so they stay off the
// tape and off the thread pool that the training step is using.
Tensor copy_of(const Tensor& x) {
  Tensor y = empty(x.shape(), x.dtype());
  Tensor src = x;
  on_values(y, [&](auto* out) {
    const auto* in = src.data<std::remove_pointer_t<decltype(out)>>();
    std::copy(in, in + x.numel(), out);
  });
  return y;
}

}  // namespace

Transform compose(std::vector<Transform> transforms) {
  return [transforms = std::move(transforms)](const Tensor& x, Generator& gen) {
    Tensor y = x;
    for (const auto& t : transforms) y = t(y, gen);
    return y;
  };
}

Transform random_crop(std::array<int64_t, 2> size, int64_t padding) {
  require(size[0] >= 1 && size[1] >= 1 && padding >= 0,
          "random_crop: size (" + std::to_string(size[0]) + "," + std::to_string(size[1]) + ") and padding " +
              std::to_string(padding) + ": expected a size of at least 1 and a padding of at least 0");
  return [size, padding](const Tensor& x, Generator& gen) {
    const auto chw_ = chw(x, "random_crop");
    const int64_t C = chw_[0], H = chw_[1], W = chw_[2];
    const int64_t ph = H + 2 * padding, pw = W + 2 * padding, h = size[0], w = size[1];
    if (h > ph || w > pw)
      throw ShapeError("random_crop: the crop " + std::to_string(h) + "x" + std::to_string(w) +
                       " is larger than the padded image " + std::to_string(ph) + "x" + std::to_string(pw));
    const auto top = static_cast<int64_t>(gen.uniform() * static_cast<double>(ph - h + 1));
    const auto left = static_cast<int64_t>(gen.uniform() * static_cast<double>(pw - w + 1));
    Tensor y = zeros({C, h, w}, x.dtype());
    Tensor src = x;
    on_values(y, [&](auto* out) {
      const auto* in = src.data<std::remove_pointer_t<decltype(out)>>();
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < h; ++i) {
          const int64_t r = top + i - padding;
          if (r < 0 || r >= H) continue;
          for (int64_t j = 0; j < w; ++j) {
            const int64_t col = left + j - padding;
            if (col >= 0 && col < W) out[(c * h + i) * w + j] = in[(c * H + r) * W + col];
          }
        }
    });
    return y;
  };
}

Transform random_horizontal_flip(double p) {
  require(p >= 0 && p <= 1, "random_horizontal_flip: p " + std::to_string(p) + ": expected in [0, 1]");
  return [p](const Tensor& x, Generator& gen) {
    const auto chw_ = chw(x, "random_horizontal_flip");
    const int64_t C = chw_[0], H = chw_[1], W = chw_[2];
    if (gen.uniform() >= p) return x;
    Tensor y = copy_of(x);
    on_values(y, [&](auto* v) {
      for (int64_t row = 0; row < C * H; ++row) std::reverse(v + row * W, v + (row + 1) * W);
    });
    return y;
  };
}

Transform normalize(std::vector<double> mean, std::vector<double> std) {
  require(!mean.empty() && mean.size() == std.size(),
          "normalize: expected one mean and one std per channel, got " + std::to_string(mean.size()) + " and " +
              std::to_string(std.size()));
  for (double s : std) require(s > 0, "normalize: every std must be positive, got " + std::to_string(s));
  return [mean = std::move(mean), std = std::move(std)](const Tensor& x, Generator&) {
    const auto chw_ = chw(x, "normalize");
    const int64_t C = chw_[0], H = chw_[1], W = chw_[2];
    if (C != static_cast<int64_t>(mean.size()))
      throw ShapeError("normalize: " + std::to_string(mean.size()) + " channels' mean and std for an image of " +
                       std::to_string(C) + " channels");
    Tensor y = copy_of(x);
    on_values(y, [&](auto* v) {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < H * W; ++i) v[c * H * W + i] = (v[c * H * W + i] - mean[c]) / std[c];
    });
    return y;
  };
}

Transform random_erasing(double p, std::array<double, 2> scale, std::array<double, 2> ratio, double value) {
  require(p >= 0 && p <= 1 && scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1 && ratio[0] > 0 &&
              ratio[0] <= ratio[1],
          fmt::format("random_erasing: p {}, scale ({}, {}), ratio ({}, {}): expected p in [0, 1], 0 < scale[0] <= "
                      "scale[1] <= 1 and 0 < ratio[0] <= ratio[1]",
                      p, scale[0], scale[1], ratio[0], ratio[1]));
  return [=](const Tensor& x, Generator& gen) {
    const auto chw_ = chw(x, "random_erasing");
    const int64_t C = chw_[0], H = chw_[1], W = chw_[2];
    if (gen.uniform() >= p) return x;
    const double area = static_cast<double>(H * W);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * gen.uniform(scale[0], scale[1]);
      const double aspect = std::exp(gen.uniform(std::log(ratio[0]), std::log(ratio[1])));
      const auto h = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
      const auto w = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
      if (h < 1 || w < 1 || h >= H || w >= W) continue;
      const auto top = static_cast<int64_t>(gen.uniform() * static_cast<double>(H - h + 1));
      const auto left = static_cast<int64_t>(gen.uniform() * static_cast<double>(W - w + 1));
      Tensor y = copy_of(x);
      on_values(y, [&](auto* v) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = top; i < top + h; ++i)
            for (int64_t j = left; j < left + w; ++j) v[(c * H + i) * W + j] = static_cast<std::remove_pointer_t<decltype(v)>>(value);
      });
      return y;
    }
    return x;
  };
}

}  // namespace xg::data
