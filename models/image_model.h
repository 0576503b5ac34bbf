// An image classifier of one of three families, the CIFAR ResNet, the Vision
// Transformer and the small CNN, behind one configuration: what a training
// job, an inference program and an exporter need, whichever model a run or
// a checkpoint has. The families' words are read and written here only.
//
//   xg::models::ViTConfig vit;  vit.patch = 7;
//   xg::models::ImageModel m = xg::models::make_image_model(vit);  // an ImageModelConfig holds any family
//   Metadata keys = m.config.to_metadata();                       // "model" = "vit" and the cfg.* keys
//   auto back = xg::models::load_image_model(keys, m.module->state_dict(), "in memory");
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "models/cnn.h"
#include "models/resnet.h"
#include "models/vit.h"

namespace xg::models {

// What the three share: torchvision's initialisation of convolutions. Every
// 4-D parameter of `m` (the convolution weights) drawn again from
// N(0, sqrt(2 / fan_out)), fan_out = out kh kw: kaiming_normal_(mode="fan_out",
// nonlinearity="relu").
void init_convolutions_fan_out(nn::Module& m, Generator& gen);

// The three families.
enum class ImageKind { resnet, vit, cnn };
// Their words, as a program's --model and a checkpoint's "model" key spell
// them, in this order: resnet, vit, cnn.
const std::vector<std::pair<std::string, ImageKind>>& image_kinds();
const std::string& image_kind_word(ImageKind kind);  // "resnet", "vit" or "cnn"
// The kind a word names; std::invalid_argument "WHAT 'WORD': expected one
// of resnet, vit, cnn" for any other word.
ImageKind image_kind(const std::string& word, const std::string& what = "model");

// Any family's configuration, as a run or a checkpoint has it.
struct ImageModelConfig {
  std::variant<ResNetConfig, ViTConfig, CNNConfig> family;  // the chosen family's configuration
  ImageModelConfig() = default;                             // the default ResNet
  ImageModelConfig(const ResNetConfig& c) : family(c) {}    // implicit: each configuration is one
  ImageModelConfig(const ViTConfig& c) : family(c) {}       // implicit, as the ResNet's
  ImageModelConfig(const CNNConfig& c) : family(c) {}       // implicit, as the ResNet's
  // `kind`'s configuration of the three: a program's options hold all, since
  // its command line sets options of each before --model chooses.
  static ImageModelConfig choose(ImageKind kind, const ResNetConfig& resnet, const ViTConfig& vit,
                                 const CNNConfig& cnn);
  ImageKind kind() const;
  const ResNetConfig* resnet() const { return std::get_if<ResNetConfig>(&family); }  // null unless a ResNet
  const ViTConfig* vit() const { return std::get_if<ViTConfig>(&family); }           // null unless a ViT
  const CNNConfig* cnn() const { return std::get_if<CNNConfig>(&family); }           // null unless a CNN
  // The chosen configuration's cfg.* keys, and "model" = its word.
  Metadata to_metadata() const;
  // The family "model" names, its keys read by its from_metadata; throws
  // FormatError naming `path`, the key and the accepted words.
  static ImageModelConfig from_metadata(const Metadata& metadata, const std::string& path);
  void validate() const;            // the chosen configuration's validate()
  void set_seed(uint64_t seed);     // initialisation (and dropout, where the family has it)
  int64_t in_channels() const;      // C of the input images
  int64_t image_side() const;       // H = W the model takes; 0 for the ResNet, which takes any
  double dropout() const;           // the dropout probability; 0 for the ResNet, which has none
};

// A built classifier: forward (N, C, H, W) -> (N, classes) logits.
struct ImageModel {
  ImageModelConfig config;               // as built
  std::shared_ptr<nn::Module> module;    // the model itself, to train, save, load and export
  ViT* vit = nullptr;                    // the module as a ViT, when it is one (its attention)
  Generator* dropout = nullptr;          // its dropout layers' generator, if it has dropout
  ImageKind kind() const { return config.kind(); }  // the family
};
ImageModel make_image_model(const ImageModelConfig& config);  // builds the chosen model (validates)
// The classifier a checkpoint's metadata describes (from_metadata), with
// `weights` loaded (strict); FormatError naming `path` for either.
ImageModel load_image_model(const Metadata& metadata, const std::map<std::string, Tensor>& weights,
                            const std::string& path);

}  // namespace xg::models
