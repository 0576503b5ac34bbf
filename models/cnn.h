// A small convolutional network, the "2 conv + 2 FC" of Fashion-MNIST's
// benchmark table: two stages of 3x3 convolution, batch norm, ReLU and 2x2
// max pooling, then a hidden Linear layer with ReLU and dropout, and the
// classifier.
//
//   xg::models::CNNConfig c;  c.image = 28;
//   xg::models::CNN cnn(c);
//   Tensor logits = cnn.forward(images);  // (N,C,H,W) -> (N, classes)
#pragma once

#include <memory>
#include <string>

#include "models/config.h"
#include "nn/nn.h"

namespace xg::models {

// The architecture of a CNN, its dropout and its seed.
struct CNNConfig {
  int64_t image = 28;       // H = W of the input images, at least 4 (two poolings halve it)
  int64_t in_channels = 1;  // C of the input images
  int64_t classes = 10;     // logits per image
  int64_t channels1 = 32;   // channels of the first convolution
  int64_t channels2 = 64;   // channels of the second
  int64_t hidden = 128;     // width of the hidden Linear layer
  double dropout = 0.25;    // p of the dropout after the hidden layer, in [0, 1)
  uint64_t seed = 0;        // initialisation and dropout
  void validate() const;    // throws std::invalid_argument naming the bad field and its range
  int64_t pooled() const { return image / 4; }  // side of the second stage's output
  double parameter_count() const;  // without building the model
  // The architecture as checkpoint metadata: cfg.image, cfg.in_channels,
  // cfg.classes, cfg.channels1, cfg.channels2, cfg.hidden.
  Metadata to_metadata() const;
  // Those keys read back within ModelLimits, then validate()d, dropout 0;
  // throws FormatError naming `path`, the key and the accepted range.
  static CNNConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// Two convolution stages and two fully connected layers.
class CNN : public nn::Module {
 public:
  // cfg.validate()d; every layer initialised as torch.nn's, from cfg.seed.
  explicit CNN(const CNNConfig& cfg);
  std::string type_name() const override { return "CNN"; }
  const CNNConfig& config() const { return cfg_; }  // as given
  // The generator behind the dropout layer (its state goes into checkpoints).
  Generator& dropout_generator() { return *drop_gen_; }
  // images (N, in_channels, image, image) -> logits (N, classes); other
  // shapes throw ShapeError naming the model.
  Tensor forward(const Tensor& x) override;

  // The stages: conv1 and conv2, 3x3 convolutions with padding 1 and no
  // bias (the BN after each has one), and bn1 and bn2.
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::MaxPool2d> pool;  // 2x2, stride 2, after each stage
  std::shared_ptr<nn::Linear> fc1;      // channels2 pooled^2 -> hidden
  std::shared_ptr<nn::Dropout> drop;    // after fc1's ReLU
  std::shared_ptr<nn::Linear> fc2;      // hidden -> classes

 private:
  CNNConfig cfg_;
  std::shared_ptr<Generator> drop_gen_;
};

}  // namespace xg::models
