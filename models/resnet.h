// The CIFAR-style residual network of He et al., "Deep Residual Learning for
// Image Recognition" (2015, section 4.2), and its pre-activation variant
// ("Identity Mappings in Deep Residual Networks", 2016), built from nn/ only.
// Names follow torchvision's ResNet, so that a PyTorch model of the same
// architecture loads the state dict: conv1, bn1, layer1.0.conv1,
// layer1.0.bn1, ..., layer2.0.downsample.0 / .1, fc.
//
//   xg::models::ResNetConfig c;  c.depth = 20;  c.in_channels = 1;
//   xg::models::ResNet net(c);
//   Tensor logits = net.forward(images);  // (N,C,H,W) -> (N, classes)
#pragma once

#include <memory>
#include <string>

#include "models/config.h"
#include "nn/nn.h"

namespace xg::models {

// The architecture of a ResNet and its seed.
struct ResNetConfig {
  int64_t depth = 20;       // 6n + 2 layers with weights (n >= 1): 20, 32, 44, 56, 110, ...
  int64_t width = 16;       // channels of the first stage; the stages have width, 2 width, 4 width
  int64_t in_channels = 1;  // C of the input images
  int64_t classes = 10;     // logits per image
  bool preact = false;      // true: pre-activation blocks (BN, ReLU, conv)
  uint64_t seed = 0;        // initialisation
  void validate() const;    // throws std::invalid_argument naming the bad field and its range
  int64_t blocks_per_stage() const { return (depth - 2) / 6; }  // n
  double parameter_count() const;  // without building the model
  // The architecture as checkpoint metadata: cfg.depth, cfg.width,
  // cfg.in_channels, cfg.classes, cfg.preact.
  Metadata to_metadata() const;
  // Those keys read back within ModelLimits, then validate()d; throws
  // FormatError naming `path`, the key and the accepted range.
  static ResNetConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// torchvision's BasicBlock: two 3x3 convolutions and a shortcut, the first
// convolution with the block's stride. When the shape changes (stride 2 or
// more channels) the shortcut is a projection (option B of the paper):
// `downsample`, a 1x1 convolution with that stride, followed by a BN in the
// plain network.
class BasicBlock : public nn::Module {
 public:
  // in -> out channels; weights drawn from `init` (the ResNet then
  // initialises its convolutions again, as torchvision does).
  BasicBlock(int64_t in, int64_t out, int64_t stride, bool preact, Generator& init);
  // (N, in, H, W) -> (N, out, H/stride, W/stride), rounded up.
  // Plain: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
  // Pre-activation: a = relu(bn1(x)); conv2(relu(bn2(conv1(a)))) + shortcut,
  // the shortcut being x itself or the projection of a.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;  // "BasicBlock(in=16, out=32, stride=2)"

  // The sublayers: conv1 and conv2, 3x3 without bias (a BN follows or
  // precedes each); bn1 and bn2, after conv1 and conv2 in the plain block,
  // before them in the pre-activation one; downsample, the projection, or
  // null for the identity.
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;

 private:
  int64_t in_, out_, stride_;
  bool preact_;
};

// A ResNet for small images: a 3x3 stem convolution, three stages of n
// BasicBlocks (the second and third halve the resolution and double the
// channels), global average pooling and a Linear classifier.
class ResNet : public nn::Module {
 public:
  // cfg.validate()d; convolutions drawn from cfg.seed by Kaiming's normal
  // (fan_out, ReLU gain), BN weight 1 and bias 0, Linear as torch.nn.Linear:
  // torchvision's initialisation.
  explicit ResNet(const ResNetConfig& cfg);
  std::string type_name() const override;  // "ResNet-20(width=16, preact=0)"
  const ResNetConfig& config() const { return cfg_; }  // as given
  // images (N, in_channels, H, W) -> logits (N, classes). A wrong rank or
  // channel count throws ShapeError naming the model.
  Tensor forward(const Tensor& x) override;

  // The submodules, registered under these names: conv1, the 3x3 stem
  // (in_channels -> width); bn1 after it (plain only, else null); the stages
  // layer1, layer2, layer3 of n BasicBlocks each; final_bn before the
  // pooling (pre-activation only, else null); avgpool to 1x1; fc, the
  // classifier (4 width -> classes).
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3;
  std::shared_ptr<nn::BatchNorm2d> final_bn;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;

 private:
  std::shared_ptr<nn::Sequential> stage(int64_t in, int64_t out, int64_t stride, Generator& init);
  ResNetConfig cfg_;
};

}  // namespace xg::models
