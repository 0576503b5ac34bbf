#include "models/vision.h"

#include <cmath>

#include "nn/init.h"

namespace xg::models {

void init_convolutions_fan_out(nn::Module& m, Generator& gen) {
  for (auto& [name, p] : m.named_parameters()) {
    if (p.dim() != 4) continue;
    const double fan_out = static_cast<double>(nn::init::fans(p).second);
    nn::init::normal_(p, gen, 0.0, std::sqrt(2.0 / fan_out));
  }
}

}  // namespace xg::models
