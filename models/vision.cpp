#include "models/vision.h"

#include <cmath>

#include "nn/init.h"

namespace xg::models {

Conv2dOptions padded(int64_t padding) {
  Conv2dOptions o;
  o.padding = {padding, padding};
  return o;
}

void require_images(const Tensor& x, int64_t channels, int64_t side, const std::string& who) {
  const bool ok = x.defined() && x.dim() == 4 && x.size(1) == channels &&
                  (side == 0 || (x.size(2) == side && x.size(3) == side));
  if (ok) return;
  const std::string pixels = side > 0 ? " and H = W = " + std::to_string(side) : "";
  throw ShapeError(who + ": expected images (N, C, H, W) with C = " + std::to_string(channels) + pixels + ", got " +
                   (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor")));
}

void init_convolutions_fan_out(nn::Module& m, Generator& gen) {
  for (auto& [name, p] : m.named_parameters()) {
    if (p.dim() != 4) continue;
    const double fan_out = static_cast<double>(nn::init::fans(p).second);
    nn::init::normal_(p, gen, 0.0, std::sqrt(2.0 / fan_out));
  }
}

}  // namespace xg::models
