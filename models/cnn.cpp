#include "models/cnn.h"

#include <stdexcept>
#include <string>

#include "autograd/require.h"
#include "models/image_model.h"

namespace xg::models {

void CNNConfig::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "CNNConfig: "); };
  need(image >= 4, "image must be at least 4 (two 2x2 poolings), got " + std::to_string(image));
  need(in_channels > 0, "in_channels must be positive, got " + std::to_string(in_channels));
  need(classes > 0, "classes must be positive, got " + std::to_string(classes));
  need(channels1 > 0, "channels1 must be positive, got " + std::to_string(channels1));
  need(channels2 > 0, "channels2 must be positive, got " + std::to_string(channels2));
  need(hidden > 0, "hidden must be positive, got " + std::to_string(hidden));
  need(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout));
}

double CNNConfig::parameter_count() const {
  const double c0 = static_cast<double>(in_channels), c1 = static_cast<double>(channels1),
               c2 = static_cast<double>(channels2), h = static_cast<double>(hidden), k = static_cast<double>(classes);
  const double flat = c2 * static_cast<double>(pooled()) * static_cast<double>(pooled());
  return (c0 * c1 * 9 + 2 * c1) + (c1 * c2 * 9 + 2 * c2) + (flat * h + h) + (h * k + k);
}

Metadata CNNConfig::to_metadata() const {
  auto str = [](int64_t v) { return std::to_string(v); };
  return {{"cfg.image", str(image)},         {"cfg.in_channels", str(in_channels)}, {"cfg.classes", str(classes)},
          {"cfg.channels1", str(channels1)}, {"cfg.channels2", str(channels2)},     {"cfg.hidden", str(hidden)}};
}

CNNConfig CNNConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  CNNConfig c;
  c.image = metadata_int(m, "cfg.image", path, 4, L::image);
  c.in_channels = metadata_int(m, "cfg.in_channels", path, 1, L::channels);
  c.classes = metadata_int(m, "cfg.classes", path, 1, L::classes);
  c.channels1 = metadata_int(m, "cfg.channels1", path, 1, L::channels);
  c.channels2 = metadata_int(m, "cfg.channels2", path, 1, L::channels);
  c.hidden = metadata_int(m, "cfg.hidden", path, 1, L::channels);
  c.dropout = 0;
  validate_read(c, path);
  return c;
}

CNN::CNN(const CNNConfig& cfg) try : cfg_(cfg) {
  cfg.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  drop_gen_ = std::make_shared<Generator>(cfg.seed ^ 0x9e3779b97f4a7c15ULL);
  const int64_t c0 = cfg.in_channels, c1 = cfg.channels1, c2 = cfg.channels2;
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(c0, c1, 3).padding(1).bias(false), init));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(c1));
  conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(c1, c2, 3).padding(1).bias(false), init));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(c2));
  pool = register_module("pool", std::make_shared<nn::MaxPool2d>(2));
  const int64_t flat = c2 * cfg.pooled() * cfg.pooled();
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(flat, cfg.hidden, init));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, drop_gen_));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(cfg.hidden, cfg.classes, init));
} catch (const std::bad_alloc&) {
  out_of_memory("the CNN", cfg.parameter_count());
}

Tensor CNN::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, cfg_.in_channels, "(N,C,H,W)", cfg_.image);
  // One op per statement, so that each intermediate is freed once the next
  // exists (a temporary lives to the end of its full expression).
  Tensor h = conv1->forward(x);  // (N, c1, image, image)
  h = bn1->forward_relu(h);
  h = pool->forward(h);  // (N, c1, image/2, image/2)
  h = conv2->forward(h);
  h = bn2->forward_relu(h);
  h = pool->forward(h);  // (N, c2, pooled, pooled)
  h = drop->forward(relu(fc1->forward(flatten(h))));  // (N, hidden)
  return fc2->forward(h);
}

}  // namespace xg::models
