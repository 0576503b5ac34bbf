#include "models/image_model.h"

#include <cmath>
#include <stdexcept>

#include "autograd/serialize.h"
#include "nn/init.h"

namespace xg::models {

void init_convolutions_fan_out(nn::Module& m, Generator& gen) {
  for (auto& [name, p] : m.named_parameters()) {
    if (p.dim() != 4) continue;
    const double fan_out = static_cast<double>(nn::init::fans(p).second);
    nn::init::normal_(p, gen, 0.0, std::sqrt(2.0 / fan_out));
  }
}

const std::vector<std::pair<std::string, ImageKind>>& image_kinds() {
  static const std::vector<std::pair<std::string, ImageKind>> kinds = {
      {"resnet", ImageKind::resnet}, {"vit", ImageKind::vit}, {"cnn", ImageKind::cnn}};
  return kinds;
}

const std::string& image_kind_word(ImageKind kind) {
  for (const auto& [word, k] : image_kinds())
    if (k == kind) return word;
  throw std::logic_error("image_kind_word: a kind with no word");
}

namespace {
std::string kind_words() {
  std::string words;
  for (const auto& [word, kind] : image_kinds()) words += (words.empty() ? "" : ", ") + word;
  return words;
}

// The kind `word` names, or null.
const ImageKind* find_kind(const std::string& word) {
  for (const auto& [w, kind] : image_kinds())
    if (w == word) return &kind;
  return nullptr;
}

// "WHAT 'WORD': expected one of resnet, vit, cnn".
std::string not_a_kind(const std::string& what, const std::string& word) {
  return what + " " + quote_text(word) + ": expected one of " + kind_words();
}
}  // namespace

ImageKind image_kind(const std::string& word, const std::string& what) {
  if (const ImageKind* kind = find_kind(word)) return *kind;
  throw std::invalid_argument(not_a_kind(what, word));
}

ImageModelConfig ImageModelConfig::choose(ImageKind kind, const ResNetConfig& resnet, const ViTConfig& vit,
                                          const CNNConfig& cnn) {
  if (kind == ImageKind::vit) return vit;
  if (kind == ImageKind::cnn) return cnn;
  return resnet;
}

ImageKind ImageModelConfig::kind() const {
  return vit() ? ImageKind::vit : cnn() ? ImageKind::cnn : ImageKind::resnet;
}

Metadata ImageModelConfig::to_metadata() const {
  Metadata m = std::visit([](const auto& c) { return c.to_metadata(); }, family);
  m["model"] = image_kind_word(kind());
  return m;
}

ImageModelConfig ImageModelConfig::from_metadata(const Metadata& m, const std::string& path) {
  const auto it = m.find("model");
  if (it == m.end()) throw FormatError("checkpoint " + path + ": metadata 'model' is missing: expected one of " + kind_words());
  const ImageKind* kind = find_kind(it->second);
  if (!kind) throw FormatError(not_a_kind("checkpoint " + path + ": metadata 'model'", it->second));
  if (*kind == ImageKind::vit) return ViTConfig::from_metadata(m, path);
  if (*kind == ImageKind::cnn) return CNNConfig::from_metadata(m, path);
  return ResNetConfig::from_metadata(m, path);
}

void ImageModelConfig::validate() const {
  std::visit([](const auto& c) { c.validate(); }, family);
}

void ImageModelConfig::set_seed(uint64_t seed) {
  std::visit([seed](auto& c) { c.seed = seed; }, family);
}

int64_t ImageModelConfig::in_channels() const {
  return std::visit([](const auto& c) { return c.in_channels; }, family);
}

int64_t ImageModelConfig::image_side() const {
  if (const ViTConfig* v = vit()) return v->image;
  if (const CNNConfig* c = cnn()) return c->image;
  return 0;
}

double ImageModelConfig::dropout() const {
  if (const ViTConfig* v = vit()) return v->dropout;
  if (const CNNConfig* c = cnn()) return c->dropout;
  return 0;
}

ImageModel make_image_model(const ImageModelConfig& config) {
  config.validate();
  ImageModel out;
  out.config = config;
  if (const ViTConfig* v = config.vit()) {
    auto vit = std::make_shared<ViT>(*v);
    out.vit = vit.get();
    out.dropout = &vit->dropout_generator();
    out.module = vit;
  } else if (const CNNConfig* c = config.cnn()) {
    auto cnn = std::make_shared<CNN>(*c);
    out.dropout = &cnn->dropout_generator();
    out.module = cnn;
  } else {
    out.module = std::make_shared<ResNet>(*config.resnet());
  }
  return out;
}

ImageModel load_image_model(const Metadata& metadata, const std::map<std::string, Tensor>& weights,
                            const std::string& path) {
  ImageModel m = make_image_model(ImageModelConfig::from_metadata(metadata, path));
  try {
    m.module->load_state_dict(weights);
  } catch (const std::invalid_argument& e) {
    throw FormatError("checkpoint " + path + ": " + e.what());
  }
  return m;
}

}  // namespace xg::models
