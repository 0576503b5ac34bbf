// The Vision Transformer of Dosovitskiy et al., "An Image is Worth 16x16
// Words" (2020), built from nn/ only: the image cut into patches by a
// strided convolution, a learned class token prepended, learned positions
// added, pre-norm encoder blocks (GPT's block without its causal mask), a
// final LayerNorm and a Linear head on the class token. Names as timm's
// where the blocks allow: patch_embed.proj, cls_token, pos_embed,
// blocks.i..., norm, head.
//
//   xg::models::ViTConfig c;  c.image = 28;  c.patch = 4;
//   xg::models::ViT vit(c);
//   Tensor logits = vit.forward(images);  // (N,C,H,W) -> (N, classes)
#pragma once

#include <memory>
#include <string>

#include "models/config.h"
#include "models/gpt.h"
#include "nn/nn.h"

namespace xg::models {

// The architecture of a ViT, its dropout and its seed.
struct ViTConfig {
  int64_t image = 28;       // H = W of the input images
  int64_t patch = 4;        // side of a patch; divides image. P = (image / patch)^2 patches
  int64_t in_channels = 1;  // C of the input images
  int64_t classes = 10;     // logits per image
  int64_t d_model = 128;    // C of the tokens
  int64_t heads = 4;        // H
  int64_t layers = 6;       // encoder blocks
  int64_t d_ff = 256;       // width of each block's feed-forward
  double dropout = 0;       // p of every dropout layer, in [0, 1); none by default, as timm's and torchvision's ViTs
  uint64_t seed = 0;        // initialisation and dropout
  void validate() const;    // throws std::invalid_argument naming the bad field and its range
  int64_t patches() const { return (image / patch) * (image / patch); }  // P
  double parameter_count() const;  // without building the model
  // The architecture as checkpoint metadata: cfg.image, cfg.patch,
  // cfg.in_channels, cfg.classes, cfg.d_model, cfg.heads, cfg.layers,
  // cfg.d_ff (dropout and seed are the run's, not the shape's).
  Metadata to_metadata() const;
  // Those keys read back within ModelLimits, then validate()d, dropout 0;
  // throws FormatError naming `path`, the key and the accepted range.
  static ViTConfig from_metadata(const Metadata& metadata, const std::string& path);
};

// Patches to tokens: proj, a Conv2d with kernel = stride = patch, then the
// (N, C, h, w) grid read row by row as (N, P, C).
class PatchEmbed : public nn::Module {
 public:
  // proj initialised as torch.nn.Conv2d, from `init`.
  PatchEmbed(int64_t in_channels, int64_t d_model, int64_t patch, Generator& init);
  Tensor forward(const Tensor& x) override;  // (N, in, H, W) -> (N, P, C)
  std::string type_name() const override { return "PatchEmbed"; }  // "PatchEmbed"
  std::shared_ptr<nn::Conv2d> proj;  // weight (C, in, patch, patch), bias (C)
};

// The Vision Transformer: patches as tokens, a class token, learned
// positions, pre-norm encoder blocks, and a head on the class token.
class ViT : public nn::Module {
 public:
  // cfg.validate()d; convolution, blocks and head as their layers initialise
  // them, class token and positions N(0, 0.02), all drawn from cfg.seed.
  explicit ViT(const ViTConfig& cfg);
  std::string type_name() const override { return "ViT"; }
  const ViTConfig& config() const { return cfg_; }  // as given
  // The generator behind every dropout layer (its state goes into checkpoints).
  Generator& dropout_generator() { return *drop_gen_; }
  // images (N, in_channels, image, image) -> logits (N, classes); other
  // shapes throw ShapeError naming the model.
  Tensor forward(const Tensor& x) override;
  // The last block's attention from the class token to each patch, per head:
  // (N, H, P), patches row by row; with the class token's weight on itself
  // each row of (H, P + 1) sums to 1. Runs the model in eval mode without
  // recording (the mode is restored).
  Tensor class_attention(const Tensor& x);

  std::shared_ptr<PatchEmbed> patch_embed;  // images -> (N, P, C)
  Tensor& cls_token() { return cls_token_; }  // (1, 1, C)
  Tensor& pos_embed() { return pos_embed_; }  // (1, P + 1, C), the class token's first
  std::shared_ptr<nn::Dropout> pos_drop;      // on the tokens after the positions
  std::shared_ptr<nn::ModuleList> blocks;     // `layers` non-causal GPTBlocks
  std::shared_ptr<nn::LayerNorm> norm;        // after the last block
  std::shared_ptr<nn::Linear> head;           // C -> classes, on the class token

 private:
  Tensor tokens(const Tensor& x);  // images -> the last block's output (N, P + 1, C)
  ViTConfig cfg_;
  std::shared_ptr<Generator> drop_gen_;
  Tensor cls_token_, pos_embed_;
};

}  // namespace xg::models
