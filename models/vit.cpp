#include "models/vit.h"

#include <stdexcept>
#include <string>

#include "autograd/require.h"
#include "models/image_model.h"

namespace xg::models {

void ViTConfig::validate() const {
  auto need = [](bool ok, const std::string& what) { require(ok, what, "ViTConfig: "); };
  need(image > 0, "image must be positive, got " + std::to_string(image));
  need(patch > 0 && patch <= image && image % patch == 0,
       "patch must divide image " + std::to_string(image) + ", got " + std::to_string(patch));
  need(in_channels > 0, "in_channels must be positive, got " + std::to_string(in_channels));
  need(classes > 0, "classes must be positive, got " + std::to_string(classes));
  need(layers > 0, "layers must be positive, got " + std::to_string(layers));
  nn::require_heads_divide(d_model, heads, "ViTConfig: ");
  need(d_ff > 0, "d_ff must be positive, got " + std::to_string(d_ff));
  need(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout));
}

double ViTConfig::parameter_count() const {
  const double c = static_cast<double>(d_model), f = static_cast<double>(d_ff), p = static_cast<double>(patch);
  const double embed = static_cast<double>(in_channels) * c * p * p + c;
  const double tokens = c + (static_cast<double>(patches()) + 1) * c;  // class token and positions
  const double block = 2 * c + 4 * (c * c + c) + 2 * c + (c * f + f + f * c + c);
  const double k = static_cast<double>(classes);
  return embed + tokens + static_cast<double>(layers) * block + 2 * c + (c * k + k);
}

Metadata ViTConfig::to_metadata() const {
  auto str = [](int64_t v) { return std::to_string(v); };
  return {{"cfg.image", str(image)},     {"cfg.patch", str(patch)},     {"cfg.in_channels", str(in_channels)},
          {"cfg.classes", str(classes)}, {"cfg.d_model", str(d_model)}, {"cfg.heads", str(heads)},
          {"cfg.layers", str(layers)},   {"cfg.d_ff", str(d_ff)}};
}

ViTConfig ViTConfig::from_metadata(const Metadata& m, const std::string& path) {
  using L = ModelLimits;
  ViTConfig c;
  c.image = metadata_int(m, "cfg.image", path, 1, L::image);
  c.patch = metadata_int(m, "cfg.patch", path, 1, L::image);
  c.in_channels = metadata_int(m, "cfg.in_channels", path, 1, L::channels);
  c.classes = metadata_int(m, "cfg.classes", path, 1, L::classes);
  c.d_model = metadata_int(m, "cfg.d_model", path, 1, L::d_model);
  c.heads = metadata_int(m, "cfg.heads", path, 1, L::heads);
  c.layers = metadata_int(m, "cfg.layers", path, 1, L::layers);
  c.d_ff = metadata_int(m, "cfg.d_ff", path, 1, L::d_ff);
  c.dropout = 0;
  validate_read(c, path);
  return c;
}

PatchEmbed::PatchEmbed(int64_t in_channels, int64_t d_model, int64_t patch, Generator& init) {
  proj = register_module(
      "proj", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(in_channels, d_model, patch).stride(patch), init));
}

Tensor PatchEmbed::forward(const Tensor& x) {
  const auto named = scope();
  return transpose(flatten(proj->forward(x), 2), 1, 2);  // (N, C, h, w) -> (N, C, P) -> (N, P, C)
}

ViT::ViT(const ViTConfig& cfg) try : cfg_(cfg) {
  cfg.validate();
  check_fits_in_memory(cfg.parameter_count());
  Generator init(cfg.seed);
  drop_gen_ = std::make_shared<Generator>(cfg.seed ^ 0x9e3779b97f4a7c15ULL);
  const int64_t c = cfg.d_model;
  patch_embed = register_module("patch_embed", std::make_shared<PatchEmbed>(cfg.in_channels, c, cfg.patch, init));
  cls_token_ = register_parameter("cls_token", randn({1, 1, c}, init, f32, 0.0, 0.02));
  pos_embed_ = register_parameter("pos_embed", randn({1, cfg.patches() + 1, c}, init, f32, 0.0, 0.02));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(cfg.dropout, drop_gen_));
  // GPT's pre-norm block is the encoder block; it reads only these fields.
  GPTConfig block;
  block.d_model = c, block.heads = cfg.heads, block.d_ff = cfg.d_ff, block.dropout = cfg.dropout;
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.layers; ++i)
    blocks->push_back(std::make_shared<GPTBlock>(block, init, drop_gen_, /*causal=*/false));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(c));
  head = register_module("head", std::make_shared<nn::Linear>(c, cfg.classes, init));
} catch (const std::bad_alloc&) {
  out_of_memory("the ViT", cfg.parameter_count());
}

Tensor ViT::tokens(const Tensor& x) {
  require_input(x, {4}, cfg_.in_channels, "(N,C,H,W)", cfg_.image);
  Tensor patches = patch_embed->forward(x);  // (N, P, C)
  Tensor cls = broadcast_like(cls_token_, 0, patches, 0);  // (N, 1, C)
  Tensor h = pos_drop->forward(concat({cls, patches}, 1) + pos_embed_);  // (N, P + 1, C)
  for (size_t i = 0; i < blocks->size(); ++i) h = blocks->at<GPTBlock>(i)->forward(h);
  return h;
}

Tensor ViT::forward(const Tensor& x) {
  const auto named = scope();
  Tensor h = norm->forward(tokens(x));
  return head->forward(reshape(slice(h, 1, 0, 1), {x.size(0), cfg_.d_model}));  // the class token (N, C)
}

Tensor ViT::class_attention(const Tensor& x) {
  NoGradGuard no_grad;
  nn::EvalGuard eval_mode(*this);
  auto& attn = *blocks->at<GPTBlock>(blocks->size() - 1)->attn;
  attn.set_store_attention(true);
  try {
    tokens(x);
  } catch (...) {
    attn.set_store_attention(false);
    throw;
  }
  attn.set_store_attention(false);
  Tensor w = attn.attention_weights(/*average_heads=*/false);  // (N, H, P + 1, P + 1)
  Tensor row = slice(slice(w, 2, 0, 1), 3, 1, cfg_.patches() + 1);  // (N, H, 1, P)
  return reshape(row, {x.size(0), cfg_.heads, cfg_.patches()});
}

}  // namespace xg::models
