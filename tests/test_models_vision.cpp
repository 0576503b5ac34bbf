// The image models (models/resnet.h, models/vit.h, models/cnn.h): shapes,
// parameter counts against the configurations' own count, float64 gradient
// checks of tiny complete models, names, initialisation, batch norm under
// train() and eval(), the non-causal block and the class attention, and the
// configurations' checks and checkpoint metadata.
#include <algorithm>
#include <cmath>

#include "models/cnn.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "tests/helpers.h"

using namespace xg;
using models::CNN;
using models::CNNConfig;
using models::ResNet;
using models::ResNetConfig;
using models::ViT;
using models::ViTConfig;
using xgt::contains;

namespace {

ResNetConfig tiny_resnet(bool preact) {
  ResNetConfig c;
  c.depth = 8;
  c.width = 2;
  c.in_channels = 2;
  c.classes = 3;
  c.preact = preact;
  c.seed = 5;
  return c;
}

ViTConfig tiny_vit(double dropout = 0) {
  ViTConfig c;
  c.image = 6;
  c.patch = 3;
  c.in_channels = 2;
  c.classes = 3;
  c.d_model = 4;
  c.heads = 2;
  c.layers = 2;
  c.d_ff = 6;
  c.dropout = dropout;
  c.seed = 6;
  return c;
}

CNNConfig tiny_cnn(double dropout = 0) {
  CNNConfig c;
  c.image = 8;
  c.in_channels = 2;
  c.classes = 3;
  c.channels1 = 2;
  c.channels2 = 3;
  c.hidden = 4;
  c.dropout = dropout;
  c.seed = 7;
  return c;
}

Tensor images(const Shape& s, uint64_t seed, Dtype d = f64) {
  Generator g(seed);
  return randn(s, g, d);
}

std::map<std::string, Tensor> names_of(const nn::Module& m) { return m.state_dict(); }

// Every parameter of `m` gradient-checked in float64 through its loss
// against labels, in the module's current mode; 8 elements a tensor.
void check_model_gradients(nn::Module& m, const Tensor& x, const std::vector<int64_t>& labels) {
  GradcheckOptions o;
  o.max_samples_per_input = 8;
  auto r = gradcheck([&] { return cross_entropy(m.forward(x), labels); }, m.parameters(), o);
  INFO(r.message);
  CHECK(r.ok);
  int64_t sampled = 0;  // every tensor checked: min(8, its size) elements each
  for (const Tensor& p : m.parameters()) sampled += std::min<int64_t>(8, p.numel());
  CHECK(r.checked == sampled);
}

}  // namespace

// ---- shapes and counts ----------------------------------------------------------

TEST_CASE("vision models: logits (N, classes) from images of the configured shape") {
  for (bool preact : {false, true}) {
    ResNet r(tiny_resnet(preact));
    CHECK(r.forward(images({3, 2, 9, 7}, 1, f32)).shape() == Shape{3, 3});  // any image size: global pooling
  }
  ViT v(tiny_vit());
  CHECK(v.forward(images({2, 2, 6, 6}, 2, f32)).shape() == Shape{2, 3});
  CNN c(tiny_cnn());
  CHECK(c.forward(images({4, 2, 8, 8}, 3, f32)).shape() == Shape{4, 3});
}

TEST_CASE("vision models: parameter_count() equals the built model's count") {
  ResNetConfig deep;
  deep.depth = 32;
  deep.width = 8;
  deep.in_channels = 3;
  for (const ResNetConfig& c : {ResNetConfig{}, deep, tiny_resnet(false), tiny_resnet(true)})
    for (bool preact : {false, true}) {
      ResNetConfig k = c;
      k.preact = preact;
      CAPTURE(k.depth);
      CAPTURE(preact);
      CHECK(static_cast<double>(ResNet(k).num_parameters()) == k.parameter_count());
    }
  ViTConfig p7;
  p7.patch = 7;
  for (const ViTConfig& c : {ViTConfig{}, p7, tiny_vit()})
    CHECK(static_cast<double>(ViT(c).num_parameters()) == c.parameter_count());
  CNNConfig odd = tiny_cnn();
  odd.image = 11;  // pooled twice with floor: 11 -> 5 -> 2
  for (const CNNConfig& c : {CNNConfig{}, tiny_cnn(), odd})
    CHECK(static_cast<double>(CNN(c).num_parameters()) == c.parameter_count());
}

TEST_CASE("resnet: torchvision's names, the projection only where the shape changes") {
  ResNetConfig c = tiny_resnet(false);
  c.depth = 14;  // two blocks a stage: the second has the identity shortcut
  const auto s = names_of(ResNet(c));
  for (const char* k : {"conv1.weight", "bn1.weight", "bn1.running_var", "bn1.num_batches_tracked",
                        "layer1.0.conv1.weight", "layer1.1.bn2.bias", "layer2.0.downsample.0.weight",
                        "layer2.0.downsample.1.running_mean", "layer3.1.conv2.weight", "fc.weight", "fc.bias"}) {
    CAPTURE(k);
    CHECK(s.count(k) == 1);
  }
  CHECK(s.count("layer1.0.downsample.0.weight") == 0);  // stride 1, same width
  CHECK(s.count("layer2.1.downsample.0.weight") == 0);
  CHECK(s.count("conv1.bias") == 0);
  CHECK(s.at("layer2.0.downsample.0.weight").shape() == Shape{4, 2, 1, 1});
  CHECK(s.at("layer3.0.conv1.weight").shape() == Shape{8, 4, 3, 3});
  CHECK(s.at("bn1.num_batches_tracked").dtype() == Dtype::i64);

  c.preact = true;
  const auto p = names_of(ResNet(c));
  CHECK(p.count("bn1.weight") == 0);                     // no BN after the stem
  CHECK(p.at("final_bn.weight").shape() == Shape{8});    // before the pooling
  CHECK(p.at("layer2.0.bn1.weight").shape() == Shape{2});  // before conv1: the block's input channels
  CHECK(p.count("layer2.0.downsample.0.weight") == 1);
  CHECK(p.count("layer2.0.downsample.1.weight") == 0);  // the projection has no BN of its own
}

TEST_CASE("vit and cnn: their names and shapes") {
  const auto v = names_of(ViT(tiny_vit()));
  CHECK(v.at("patch_embed.proj.weight").shape() == Shape{4, 2, 3, 3});
  CHECK(v.at("cls_token").shape() == Shape{1, 1, 4});
  CHECK(v.at("pos_embed").shape() == Shape{1, 5, 4});  // 4 patches and the class token
  for (const char* k : {"blocks.1.attn.w_q.weight", "blocks.0.ln1.weight", "blocks.0.ff.linear2.bias", "norm.weight",
                        "head.weight"}) {
    CAPTURE(k);
    CHECK(v.count(k) == 1);
  }
  const auto c = names_of(CNN(tiny_cnn()));
  CHECK(c.at("fc1.weight").shape() == Shape{4, 3 * 2 * 2});
  CHECK(c.at("bn2.running_mean").shape() == Shape{3});
  CHECK(c.count("conv1.bias") == 0);
}

// ---- gradients ------------------------------------------------------------------

TEST_CASE("resnet: float64 gradcheck of tiny complete models, plain and pre-activation, train and eval") {
  const Tensor x = images({3, 2, 5, 4}, 11);
  for (bool preact : {false, true})
    for (bool training : {true, false}) {
      CAPTURE(preact);
      CAPTURE(training);
      ResNet m(tiny_resnet(preact));
      m.to(f64);
      m.forward(x);  // running statistics away from their initial values
      m.train(training);
      check_model_gradients(m, x, {0, 2, 1});
    }
}

TEST_CASE("vit and cnn: float64 gradcheck of tiny complete models") {
  ViT v(tiny_vit());
  v.to(f64);
  check_model_gradients(v, images({2, 2, 6, 6}, 12), {1, 2});
  for (bool training : {true, false}) {
    CAPTURE(training);
    CNN c(tiny_cnn());
    c.to(f64);
    c.forward(images({3, 2, 8, 8}, 14));
    c.train(training);
    check_model_gradients(c, images({3, 2, 8, 8}, 13), {0, 1, 2});
  }
}

TEST_CASE("vision models: second order with respect to the images alone (gradient penalties)") {
  GradcheckOptions o;
  o.max_samples_per_input = 6;
  o.mixed_partials = false;
  ResNet r(tiny_resnet(true));
  ViT v(tiny_vit());
  CNN c(tiny_cnn());
  std::vector<std::pair<nn::Module*, Shape>> models = {{&r, {2, 2, 4, 4}}, {&v, {2, 2, 6, 6}}, {&c, {2, 2, 8, 8}}};
  for (auto& [m, shape] : models) {
    CAPTURE(m->type_name());
    m->to(f64);
    m->eval();
    Tensor x = images(shape, 15).requires_grad_();
    auto res = gradgradcheck([m = m](const std::vector<Tensor>& in) { return m->forward(in[0]); }, {x}, o);
    INFO(res.message);
    CHECK(res.ok);
    CHECK(res.checked > 0);
  }
}

TEST_CASE("vision models: every parameter gets a gradient") {
  ResNet r(tiny_resnet(false));
  ViT v(tiny_vit());
  CNN c(tiny_cnn());
  std::vector<std::pair<nn::Module*, Shape>> models = {{&r, {2, 2, 4, 4}}, {&v, {2, 2, 6, 6}}, {&c, {2, 2, 8, 8}}};
  for (auto& [m, shape] : models) {
    cross_entropy(m->forward(images(shape, 16, f32)), std::vector<int64_t>{0, 1}).backward();
    for (auto& [name, p] : m->named_parameters()) {
      CAPTURE(name);
      REQUIRE(p.grad().defined());
      double norm = 0;
      for (double g : p.grad().to_vector()) norm += g * g;
      if (!contains(name, "w_k.bias")) CHECK(norm > 0);  // the softmax ignores the key bias
    }
  }
}

// ---- initialisation and modes ---------------------------------------------------

TEST_CASE("resnet: torchvision's initialisation, one seed one model") {
  ResNetConfig c;  // width 16: layer3's convolutions have 64 x 64 x 9 weights
  ResNet a(c), b(c);
  c.seed = 1;
  ResNet other(c);
  const auto sa = a.state_dict(), sb = b.state_dict(), so = other.state_dict();
  CHECK(sa.at("layer3.1.conv2.weight").to_vector() == sb.at("layer3.1.conv2.weight").to_vector());
  CHECK(sa.at("layer3.1.conv2.weight").to_vector() != so.at("layer3.1.conv2.weight").to_vector());
  const auto w = sa.at("layer3.1.conv2.weight").to_vector();
  double sq = 0;
  for (double v : w) sq += v * v;
  // kaiming_normal_(fan_out, relu): std sqrt(2 / (64 * 9)); 36864 draws put
  // the sample std within 2% of it.
  CHECK(std::sqrt(sq / static_cast<double>(w.size())) == doctest::Approx(std::sqrt(2.0 / 576)).epsilon(0.02));
  for (double v : sa.at("layer2.0.bn1.weight").to_vector()) CHECK(v == 1.0);
  for (double v : sa.at("layer2.0.downsample.1.bias").to_vector()) CHECK(v == 0.0);
  const auto fc = sa.at("fc.weight").to_vector();  // torch.nn.Linear's U(-1/8, 1/8) for 64 inputs
  for (double v : fc) CHECK(std::abs(v) <= 0.125);
}

TEST_CASE("resnet and cnn: train() normalises by the batch and updates the running statistics, eval() does neither") {
  ResNet r(tiny_resnet(false));
  CNN c(tiny_cnn());
  std::vector<std::pair<nn::Module*, Shape>> models = {{&r, {4, 2, 5, 5}}, {&c, {4, 2, 8, 8}}};
  for (auto& [m, shape] : models) {
    CAPTURE(m->type_name());
    m->to(f64);
    const Tensor x = images(shape, 17) * 3.0 + 1.0;
    const auto tracked = [&] { return m->state_dict().at("bn1.num_batches_tracked").data<int64_t>()[0]; };
    const auto mean = [&] { return m->state_dict().at("bn1.running_mean").to_vector(); };
    const auto before = mean();
    const Tensor y_train = m->forward(x);
    CHECK(tracked() == 1);
    CHECK(mean() != before);
    m->eval();
    const auto after = mean();
    const Tensor y_eval = m->forward(x);
    CHECK(tracked() == 1);
    CHECK(mean() == after);
    CHECK(y_eval.to_vector() != y_train.to_vector());
    // In evaluation an image's logits do not depend on the rest of its batch.
    const Tensor first = m->forward(slice(x, 0, 0, 1));
    xgt::check_close({first}, {slice(y_eval, 0, 0, 1)}, 1e-12);
    m->train();
    CHECK(m->forward(slice(x, 0, 0, 2)).to_vector() != slice(y_train, 0, 0, 2).to_vector());
  }
}

TEST_CASE("vit and cnn: dropout in training, none in evaluation") {
  ViT v(tiny_vit(0.5));
  CNN c(tiny_cnn(0.5));
  std::vector<std::pair<nn::Module*, Shape>> models = {{&v, {2, 2, 6, 6}}, {&c, {3, 2, 8, 8}}};
  for (auto& [m, shape] : models) {
    CAPTURE(m->type_name());
    const Tensor x = images(shape, 18, f32);
    m->eval();
    CHECK(m->forward(x).to_vector() == m->forward(x).to_vector());
    m->train();
    CHECK(m->forward(x).to_vector() != m->forward(x).to_vector());
  }
}

// ---- the encoder block and the class attention ----------------------------------

TEST_CASE("vit: its blocks are not causal, a causal GPTBlock's are") {
  Generator init(1);
  auto drop = std::make_shared<Generator>(2);
  models::GPTConfig c;
  c.d_model = 4, c.heads = 2, c.d_ff = 8;
  models::GPTBlock causal(c, init, drop), open(c, init, drop, /*causal=*/false);
  CHECK(causal.causal());
  CHECK(!open.causal());
  const Tensor x = images({1, 3, 4}, 19, f32);
  Tensor changed = x.detach().clone();
  changed.set({0, 2, 0}, 5.0);  // only the last position differs
  auto first = [](const Tensor& y) { return slice(y, 1, 0, 1).to_vector(); };
  CHECK(first(causal.forward(x)) == first(causal.forward(changed)));
  CHECK(first(open.forward(x)) != first(open.forward(changed)));
  nn::MultiHeadAttention::KVCache kv;
  CHECK(XG_THROW_MESSAGE(open.forward_step(x, kv), std::logic_error) ==
        "GPTBlock::forward_step: a non-causal block has no incremental form");
}

TEST_CASE("vit: class_attention is the last block's attention of the class token over the patches") {
  ViT v(tiny_vit(0.3));
  const Tensor x = images({2, 2, 6, 6}, 20, f32);
  const Tensor a = v.class_attention(x);
  REQUIRE(a.shape() == Shape{2, 2, 4});  // (N, H, P)
  CHECK(v.is_training());                // the mode is given back
  CHECK(!a.requires_grad());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t h = 0; h < 2; ++h) {
      double total = 0;
      for (int64_t p = 0; p < 4; ++p) {
        const double w = a.at({n, h, p});
        CHECK(w > 0);
        total += w;
      }
      CHECK(total < 1);  // the rest is the class token's weight on itself
    }
  // Deterministic despite dropout: it runs in evaluation mode.
  CHECK(v.class_attention(x).to_vector() == a.to_vector());
}

// ---- configurations and errors --------------------------------------------------

TEST_CASE("vision configs: each bad field named with its range") {
  ResNetConfig r;
  r.depth = 21;
  CHECK(XG_THROW_MESSAGE(ResNet{r}, std::invalid_argument) ==
        "ResNetConfig: depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...), got 21");
  r.depth = 2;
  CHECK(contains(XG_THROW_MESSAGE(r.validate(), std::invalid_argument), "got 2"));
  r = ResNetConfig{};
  r.width = 0;
  CHECK(XG_THROW_MESSAGE(r.validate(), std::invalid_argument) == "ResNetConfig: width must be positive, got 0");
  ViTConfig v;
  v.patch = 5;
  CHECK(XG_THROW_MESSAGE(ViT{v}, std::invalid_argument) == "ViTConfig: patch must divide image 28, got 5");
  v = ViTConfig{};
  v.heads = 3;
  CHECK(XG_THROW_MESSAGE(v.validate(), std::invalid_argument) ==
        "ViTConfig: d_model 128 must be a positive multiple of heads 3");
  v = ViTConfig{};
  v.dropout = 1;
  CHECK(contains(XG_THROW_MESSAGE(v.validate(), std::invalid_argument), "ViTConfig: dropout must be in [0, 1)"));
  CNNConfig c;
  c.image = 3;
  CHECK(XG_THROW_MESSAGE(CNN{c}, std::invalid_argument) ==
        "CNNConfig: image must be at least 4 (two 2x2 poolings), got 3");
  c = CNNConfig{};
  c.hidden = -1;
  CHECK(XG_THROW_MESSAGE(c.validate(), std::invalid_argument) == "CNNConfig: hidden must be positive, got -1");
}

TEST_CASE("vision models: images of the wrong shape are refused naming the model") {
  ResNet r(tiny_resnet(false));
  CHECK(XG_THROW_MESSAGE(r.forward(images({2, 3, 4, 4}, 21, f32)), ShapeError) ==
        "ResNet-8(width=2, preact=0): expected an input (N,C,H,W) with C=2, got (2,3,4,4)");
  ViT v(tiny_vit());
  CHECK(XG_THROW_MESSAGE(v.forward(images({2, 2, 8, 8}, 21, f32)), ShapeError) ==
        "ViT: expected an input (N,C,H,W) with C=2 and H=W=6, got (2,2,8,8)");
  CNN c(tiny_cnn());
  CHECK(contains(XG_THROW_MESSAGE(c.forward(images({2, 8, 8}, 21, f32)), ShapeError), "got (2,8,8)"));
}

TEST_CASE("vision configs: round trip through checkpoint metadata, and a corrupt value names the key") {
  ResNetConfig r = tiny_resnet(true);
  const ResNetConfig rb = ResNetConfig::from_metadata(r.to_metadata(), "r.safetensors");
  CHECK(rb.to_metadata() == r.to_metadata());
  CHECK(rb.preact);
  CHECK(rb.parameter_count() == r.parameter_count());
  ViTConfig v = tiny_vit(0.2);
  const ViTConfig vb = ViTConfig::from_metadata(v.to_metadata(), "v.safetensors");
  CHECK(vb.to_metadata() == v.to_metadata());
  CHECK(vb.dropout == 0);  // the run's, not the shape's
  CNNConfig c = tiny_cnn(0.2);
  CHECK(CNNConfig::from_metadata(c.to_metadata(), "c.safetensors").to_metadata() == c.to_metadata());

  Metadata bad = r.to_metadata();
  bad["cfg.width"] = "-4";
  CHECK(XG_THROW_MESSAGE(ResNetConfig::from_metadata(bad, "r.safetensors"), FormatError) ==
        "checkpoint r.safetensors: metadata 'cfg.width' is '-4', expected a whole number from 1 to 16384");
  bad = r.to_metadata();
  bad["cfg.depth"] = "21";  // within the bounds, refused by validate()
  CHECK(XG_THROW_MESSAGE(ResNetConfig::from_metadata(bad, "r.safetensors"), FormatError) ==
        "checkpoint r.safetensors: ResNetConfig: depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...), "
        "got 21");
  Metadata vbad = v.to_metadata();
  vbad["cfg.patch"] = "4";  // does not divide 6
  CHECK(contains(XG_THROW_MESSAGE(ViTConfig::from_metadata(vbad, "v.safetensors"), FormatError), "patch must divide"));
  vbad.erase("cfg.heads");
  CHECK(contains(XG_THROW_MESSAGE(ViTConfig::from_metadata(vbad, "v.safetensors"), FormatError), "'cfg.heads'"));
  Metadata cbad = c.to_metadata();
  cbad["cfg.channels2"] = "x";
  CHECK(contains(XG_THROW_MESSAGE(CNNConfig::from_metadata(cbad, "c.safetensors"), FormatError),
                 "'cfg.channels2' is 'x'"));
}
