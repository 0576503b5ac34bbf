// nn/module.h: the module tree, names, modes, dtype conversion, state dicts.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>

#include "test_nn_helpers.h"

using namespace xg;
using xgnt::contains;

namespace {

struct Block : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::LayerNorm> norm;
  explicit Block(Generator& g) {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 4, g));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(4));
  }
  Tensor forward(const Tensor& x) override { return norm->forward(relu(fc->forward(x))); }
  std::string type_name() const override { return "Block"; }
};

struct Net : nn::Module {
  Tensor scale;
  std::shared_ptr<nn::ModuleList> layers;
  std::shared_ptr<nn::Linear> head;
  explicit Net(uint64_t seed) {
    Generator g(seed);
    scale = register_parameter("scale", randn({4}, g));
    register_buffer("steps", full({1}, 3.0));
    layers = register_module("layers", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) layers->push_back(std::make_shared<Block>(g));
    head = register_module("head", std::make_shared<nn::Linear>(4, 2, g));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x * scale;
    for (const auto& l : *layers) h = l->forward(h);
    return head->forward(h);
  }
  std::string type_name() const override { return "Net"; }
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& p : v) out.push_back(p.first);
  return out;
}

}  // namespace

TEST_CASE("nn Module: named_parameters gives dotted paths in registration order, and the count") {
  Net net(1);
  std::vector<std::string> expected = {
      "scale",
      "layers.0.fc.weight", "layers.0.fc.bias", "layers.0.norm.weight", "layers.0.norm.bias",
      "layers.1.fc.weight", "layers.1.fc.bias", "layers.1.norm.weight", "layers.1.norm.bias",
      "head.weight", "head.bias"};
  CHECK(names(net.named_parameters()) == expected);
  CHECK(net.parameters().size() == expected.size());
  CHECK(net.num_parameters() == 4 + 2 * (16 + 4 + 4 + 4) + 8 + 2);
  CHECK(names(net.named_buffers()) == std::vector<std::string>{"steps"});
  {
    std::vector<std::string> kids;
    for (auto& c : net.named_children()) kids.push_back(c.first);
    CHECK(kids == std::vector<std::string>{"layers", "head"});
  }
  for (auto& p : net.parameters()) CHECK(p.requires_grad());
  CHECK(net.layers->at<Block>(1)->fc->path() == "layers.1.fc");
}

TEST_CASE("nn Module: train() and eval() recurse") {
  Net net(1);
  CHECK(net.is_training());
  net.eval();
  CHECK_FALSE(net.is_training());
  CHECK_FALSE(net.layers->is_training());
  CHECK_FALSE(net.layers->at<Block>(0)->fc->is_training());
  net.train();
  CHECK(net.layers->at<Block>(1)->norm->is_training());
  net.train(false);
  CHECK_FALSE(net.head->is_training());
}

TEST_CASE("nn EvalGuard: eval inside the scope, the previous mode after it, an exception included") {
  Net net(1);
  {
    nn::EvalGuard guard(net);
    CHECK_FALSE(net.is_training());
    CHECK_FALSE(net.layers->at<Block>(0)->fc->is_training());
  }
  CHECK(net.is_training());
  CHECK(net.layers->at<Block>(0)->fc->is_training());
  try {
    nn::EvalGuard guard(net);
    throw std::runtime_error("inside");
  } catch (const std::runtime_error&) {
  }
  CHECK(net.layers->at<Block>(1)->norm->is_training());
  net.eval();
  { nn::EvalGuard guard(net); }
  CHECK_FALSE(net.is_training());  // a module in eval mode stays there
}

TEST_CASE("nn Module: duplicate names, dotted names and non-leaves throw naming the name") {
  Net net(1);
  std::string msg = XGN_THROW_MESSAGE(net.register_parameter("scale", zeros({1})), std::invalid_argument);
  CHECK(contains(msg, "'scale'"));
  msg = XGN_THROW_MESSAGE(net.register_buffer("head", zeros({1})), std::invalid_argument);
  CHECK(contains(msg, "'head'"));
  msg = XGN_THROW_MESSAGE(net.register_module("steps", std::make_shared<nn::LayerNorm>(2)), std::invalid_argument);
  CHECK(contains(msg, "'steps'"));
  msg = XGN_THROW_MESSAGE(net.register_module("a.b", std::make_shared<nn::LayerNorm>(2)), std::invalid_argument);
  CHECK(contains(msg, "'a.b'"));
  msg = XGN_THROW_MESSAGE(net.register_parameter("", zeros({1})), std::invalid_argument);
  CHECK(contains(msg, "is empty"));
  Tensor leaf = zeros({2}).requires_grad_();
  msg = XGN_THROW_MESSAGE(net.register_parameter("made", leaf * 2.0), std::invalid_argument);
  CHECK(contains(msg, "'made'"));
  // Nothing was added by the failed calls.
  CHECK(net.named_parameters().size() == 11);
}

TEST_CASE("nn Module: the default forward throws std::logic_error naming the type") {
  nn::ModuleList list;
  std::string msg = XGN_THROW_MESSAGE(list.forward(zeros({1})), std::logic_error);
  CHECK(contains(msg, "ModuleList"));
}

TEST_CASE("nn Module: a layer's shape error names its path and the input shape") {
  Net net(1);
  std::string msg = XGN_THROW_MESSAGE(net.head->forward(zeros({3, 5})), std::invalid_argument);
  CHECK(contains(msg, "'head'"));
  CHECK(contains(msg, "(3,5)"));
  CHECK(contains(msg, "in=4"));
}

TEST_CASE("nn Module: to(f64) converts parameters and buffers in place, and back is exact") {
  Net net(1);
  auto before = net.state_dict();
  std::map<std::string, Tensor> copies;
  for (auto& [k, t] : before) copies[k] = t.clone();
  Tensor scale_handle = net.scale;  // another handle sees the conversion
  Tensor x = xgnt::input({2, 4}, 5, f32);
  Tensor y32 = net.forward(x);
  sum(y32).backward();

  net.to(f64);
  for (auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK(p.dtype() == f64);
    CHECK_FALSE(p.grad().defined());  // gradients of the old dtype are dropped
  }
  CHECK(net.named_buffers()[0].second.dtype() == f64);
  CHECK(scale_handle.dtype() == f64);
  Tensor y64 = net.forward(x.to(f64));
  CHECK(y64.dtype() == f64);
  auto a = y32.to_vector(), b = y64.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));

  net.to(f32);
  for (auto& [k, t] : net.state_dict()) {
    INFO(k);
    CHECK(bit_equal(t, copies.at(k)));
  }
}

TEST_CASE("nn Module: state dict round trip through save/load is bit-identical") {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/nn_module_roundtrip.safetensors";
  Net a(1), b(2);
  CHECK_FALSE(bit_equal(a.head->weight(), b.head->weight()));
  a.save(path);
  b.load(path);
  auto sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == 12);  // 11 parameters + 1 buffer
  REQUIRE(sb.size() == sa.size());
  for (auto& [k, t] : sa) {
    INFO(k);
    CHECK(bit_equal(t, sb.at(k)));
  }
  // In place: handles held before load see the loaded values.
  Tensor x = xgnt::input({3, 4}, 9, f32);
  CHECK(bit_equal(a.forward(x), b.forward(x)));
}

TEST_CASE("nn Module: load_state_dict rejects missing, unexpected, mis-shaped and mis-typed keys") {
  Net net(1);
  auto good = Net(2).state_dict();
  Tensor head_before = net.head->weight().clone();

  SUBCASE("missing key (strict), reported and left as it is when not strict") {
    auto s = good;
    s.erase("layers.1.norm.bias");
    std::string msg = XGN_THROW_MESSAGE(net.load_state_dict(s), std::invalid_argument);
    CHECK(contains(msg, "missing"));
    CHECK(contains(msg, "layers.1.norm.bias"));
    const Tensor bias_before = net.state_dict().at("layers.1.norm.bias").clone();
    const nn::LoadResult r = net.load_state_dict(s, /*strict=*/false);  // PyTorch's _IncompatibleKeys
    CHECK(r.missing_keys == std::vector<std::string>{"layers.1.norm.bias"});
    CHECK(r.unexpected_keys.empty());
    CHECK(bit_equal(net.state_dict().at("layers.1.norm.bias"), bias_before));
    CHECK(bit_equal(net.head->weight(), good.at("head.weight")));
  }
  SUBCASE("unexpected key (strict), accepted when not strict") {
    auto s = good;
    s["decoder.extra"] = zeros({2});
    std::string msg = XGN_THROW_MESSAGE(net.load_state_dict(s), std::invalid_argument);
    CHECK(contains(msg, "unexpected"));
    CHECK(contains(msg, "decoder.extra"));
    CHECK(bit_equal(net.head->weight(), head_before));  // nothing copied on failure
    const nn::LoadResult r = net.load_state_dict(s, /*strict=*/false);
    CHECK(r.unexpected_keys == std::vector<std::string>{"decoder.extra"});
    CHECK(r.missing_keys.empty());
    CHECK(bit_equal(net.head->weight(), good.at("head.weight")));
  }
  SUBCASE("wrong shape") {
    auto s = good;
    s["head.weight"] = zeros({3, 4});
    std::string msg = XGN_THROW_MESSAGE(net.load_state_dict(s), std::invalid_argument);
    CHECK(contains(msg, "head.weight"));
    CHECK(contains(msg, "(3,4)"));
    CHECK(contains(msg, "(2,4)"));
    CHECK(bit_equal(net.head->weight(), head_before));
  }
  SUBCASE("wrong shape, not strict: still refused, naming the key") {
    auto s = good;
    s["head.weight"] = zeros({3, 4});
    CHECK(contains(XGN_THROW_MESSAGE(net.load_state_dict(s, false), std::invalid_argument), "head.weight"));
  }
  SUBCASE("another dtype: converted as PyTorch's copy_ does") {
    auto s = good;
    s["scale"] = tensor({0.5, 1.25, -2, 3}, {4}, f64);
    net.load_state_dict(s);
    CHECK(net.state_dict().at("scale").dtype() == f32);
    CHECK(net.state_dict().at("scale").to_vector() == std::vector<double>{0.5, 1.25, -2, 3});
  }
}

TEST_CASE("nn Module: load() from a file that does not match throws FormatError naming file and key") {
  const std::string path = std::string(XG_TEST_TMPDIR) + "/nn_module_mismatch.safetensors";
  Generator g(1);
  nn::Linear small(4, 3, g);
  small.save(path);
  Net net(1);
  std::string msg = XGN_THROW_MESSAGE(net.load(path), FormatError);
  CHECK(contains(msg, path));
  CHECK(contains(msg, "head.weight"));
  CHECK_THROWS_AS(net.load(std::string(XG_TEST_TMPDIR) + "/nn_no_such_file.safetensors"), FormatError);
}

TEST_CASE("nn Module: a tied parameter is listed once, zero_grad drops every gradient") {
  struct Tied : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    Tied() {
      Generator g(3);
      a = register_module("a", std::make_shared<nn::Linear>(3, 3, g));
      b = register_module("b", std::make_shared<nn::Linear>(3, 3, g, /*bias=*/false));
      register_parameter("shared", a->weight());
    }
  } m;
  // Own parameters come before children's, so the tied weight keeps the name "shared".
  CHECK(names(m.named_parameters()) == std::vector<std::string>{"shared", "a.bias", "b.weight"});
  CHECK(m.num_parameters() == 9 + 3 + 9);
  CHECK(m.state_dict().count("shared") == 1);  // the state dict keeps every name
  Tensor y = m.b->forward(m.a->forward(xgnt::input({2, 3}, 1, f32)));
  sum(y).backward();
  CHECK(m.a->weight().grad().defined());
  m.zero_grad();
  for (auto& p : m.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("nn Module: weights tied the nanoGPT way, by assignment, are one parameter under both names") {
  struct TinyLM : nn::Module {
    std::shared_ptr<nn::Embedding> wte;
    std::shared_ptr<nn::Linear> lm_head;
    TinyLM() {
      Generator g(5);
      wte = register_module("wte", std::make_shared<nn::Embedding>(7, 4, g));
      lm_head = register_module("lm_head", std::make_shared<nn::Linear>(4, 7, g, /*bias=*/false));
      wte->weight() = lm_head->weight();  // self.transformer.wte.weight = self.lm_head.weight
    }
  } m;
  CHECK(m.parameters().size() == 1);  // the orphan table is gone
  CHECK(names(m.named_parameters()) == std::vector<std::string>{"wte.weight"});
  CHECK((m.wte->weight().impl() == m.lm_head->weight().impl()));
  Tensor logits = m.lm_head->forward(m.wte->forward(from_ints({1, 3, 6}, {3})));  // (3,7)
  cross_entropy(logits, std::vector<int64_t>{3, 6, 0}).backward();
  const Tensor g = m.lm_head->weight().grad();
  REQUIRE(g.defined());
  // Both uses add into the one gradient: the embedding rows 1, 3 and 6 among them.
  CHECK(g.to_vector() != std::vector<double>(28, 0.0));
  m.lm_head->weight().fill_(0.5);
  const auto sd = m.state_dict();  // both names, one tensor, as PyTorch's state dict
  CHECK(sd.at("wte.weight").to_vector() == std::vector<double>(28, 0.5));
  CHECK(sd.at("lm_head.weight").to_vector() == std::vector<double>(28, 0.5));
}
