#include "models/resnet.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/require.h"
#include "models/image_model.h"

namespace xg::models {

void ResNetConfig::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "ResNetConfig: "); };
  need(depth >= 8 && (depth - 2) % 6 == 0,
       "depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...), got " + std::to_string(depth));
  need(width > 0, "width must be positive, got " + std::to_string(width));
  need(in_channels > 0, "in_channels must be positive, got " + std::to_string(in_channels));
  need(classes > 0, "classes must be positive, got " + std::to_string(classes));
}

namespace {

// Parameters of a BN layer over c channels (weight and bias), of a k x k
// convolution without bias, and of a BasicBlock.
double bn(double c) { return 2 * c; }
double conv(double in, double out, double k) { return in * out * k * k; }
double block(double in, double out, bool projection, bool preact) {
  const double norms = preact ? bn(in) + bn(out) : 2 * bn(out);
  const double shortcut = projection ? conv(in, out, 1) + (preact ? 0 : bn(out)) : 0;
  return conv(in, out, 3) + conv(out, out, 3) + norms + shortcut;
}

}  // namespace

double ResNetConfig::parameter_count() const {
  const double w = static_cast<double>(width), n = static_cast<double>(blocks_per_stage());
  double total = conv(static_cast<double>(in_channels), w, 3) + (preact ? bn(4 * w) : bn(w));
  for (double c : {w, 2 * w, 4 * w}) {
    const double in = c == w ? w : c / 2;
    total += block(in, c, in != c, preact) + (n - 1) * block(c, c, false, preact);
  }
  return total + 4 * w * static_cast<double>(classes) + static_cast<double>(classes);
}

Metadata ResNetConfig::to_metadata() const {
  return {{"cfg.depth", std::to_string(depth)},
          {"cfg.width", std::to_string(width)},
          {"cfg.in_channels", std::to_string(in_channels)},
          {"cfg.classes", std::to_string(classes)},
          {"cfg.preact", std::to_string(preact)}};
}

ResNetConfig ResNetConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  ResNetConfig c;
  c.depth = metadata_int(m, "cfg.depth", path, 8, L::depth);
  c.width = metadata_int(m, "cfg.width", path, 1, L::channels);
  c.in_channels = metadata_int(m, "cfg.in_channels", path, 1, L::channels);
  c.classes = metadata_int(m, "cfg.classes", path, 1, L::classes);
  c.preact = metadata_int(m, "cfg.preact", path, 0, 1) != 0;
  validate_read(c, path);
  return c;
}

// ---- the block ----------------------------------------------------------------

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, bool preact, Generator& init)
    : in_(in), out_(out), stride_(stride), preact_(preact) {
  conv1 = register_module(
      "conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false), init));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(preact ? in : out));
  conv2 = register_module("conv2",
                          std::make_shared<nn::Conv2d>(nn::Conv2dOptions(out, out, 3).padding(1).bias(false), init));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
  if (stride != 1 || in != out) {
    downsample = register_module("downsample", std::make_shared<nn::Sequential>());
    downsample->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false), init));
    // Pre-activation projects the already normalised input: no BN of its own.
    if (!preact) downsample->push_back(std::make_shared<nn::BatchNorm2d>(out));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  const auto named = scope();
  // One op per statement: a temporary lives to the end of its full
  // expression, so nesting the calls would keep every intermediate of the
  // block alive at once (without the tape, as in evaluation, nothing else
  // holds them).
  if (preact_) {
    Tensor a = bn1->forward_relu(x);
    const Tensor shortcut = downsample ? downsample->forward(a) : x;
    Tensor h = conv1->forward(a);
    a = Tensor();
    h = bn2->forward_relu(h);
    h = conv2->forward(h);
    return h + shortcut;
  }
  Tensor h = conv1->forward(x);
  h = bn1->forward_relu(h);
  h = conv2->forward(h);
  h = bn2->forward(h);
  h = h + (downsample ? downsample->forward(x) : x);
  return relu(h);
}

std::string BasicBlock::type_name() const {
  return "BasicBlock(in=" + std::to_string(in_) + ", out=" + std::to_string(out_) +
         ", stride=" + std::to_string(stride_) + (preact_ ? ", preact)" : ")");
}

// ---- the network --------------------------------------------------------------

ResNet::ResNet(const ResNetConfig& cfg) try : cfg_(cfg) {
  cfg.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  const int64_t w = cfg.width;
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(cfg.in_channels, w, 3).padding(1).bias(false), init));
  if (!cfg.preact) bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(w));
  layer1 = register_module("layer1", stage(w, w, 1, init));
  layer2 = register_module("layer2", stage(w, 2 * w, 2, init));
  layer3 = register_module("layer3", stage(2 * w, 4 * w, 2, init));
  if (cfg.preact) final_bn = register_module("final_bn", std::make_shared<nn::BatchNorm2d>(4 * w));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc = register_module("fc", std::make_shared<nn::Linear>(4 * w, cfg.classes, init));
  init_convolutions_fan_out(*this, init);
} catch (const std::bad_alloc&) {
  out_of_memory("the ResNet", cfg.parameter_count());
}

std::shared_ptr<nn::Sequential> ResNet::stage(int64_t in, int64_t out, int64_t stride, Generator& init) {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<BasicBlock>(in, out, stride, cfg_.preact, init));
  for (int64_t i = 1; i < cfg_.blocks_per_stage(); ++i)
    s->push_back(std::make_shared<BasicBlock>(out, out, 1, cfg_.preact, init));
  return s;
}

std::string ResNet::type_name() const {
  return "ResNet-" + std::to_string(cfg_.depth) + "(width=" + std::to_string(cfg_.width) +
         ", preact=" + std::to_string(cfg_.preact) + ")";
}

Tensor ResNet::forward(const Tensor& x) {
  const auto named = scope();
  require_input(x, {4}, cfg_.in_channels, "(N,C,H,W)");
  Tensor h = conv1->forward(x);  // (N, w, H, W)
  if (bn1) h = bn1->forward_relu(h);
  h = layer1->forward(h);
  h = layer2->forward(h);
  h = layer3->forward(h);  // (N, 4w, H/4, W/4)
  if (final_bn) h = final_bn->forward_relu(h);
  return fc->forward(flatten(avgpool->forward(h)));  // (N, 4w) -> (N, classes)
}

}  // namespace xg::models
