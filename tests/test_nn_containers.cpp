// nn/containers.h
#include <doctest/doctest.h>

#include <memory>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn Sequential: children named 0,1,..., forward chains, gradcheck in float64") {
  Generator g(1);
  nn::Sequential seq{std::make_shared<nn::Linear>(4, 6, g), std::make_shared<nn::LayerNorm>(6)};
  seq.push_back(std::make_shared<nn::Linear>(6, 3, g));
  std::vector<std::string> names;
  for (auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
  CHECK(seq.size() == 3);

  seq.to(f64);
  Tensor x = xgnt::input({5, 4}, 2).requires_grad_();
  xgnt::check_grad([&] { return seq.forward(x); }, seq.parameters(), {x});
  xgnt::check_all_params_get_grad(seq, seq.forward(x));

  nn::Sequential empty;
  Tensor z = zeros({2});
  CHECK(bit_equal(empty.forward(z), z));
}

TEST_CASE("nn Sequential append and register_module<M>: made in place, registered in order, as PyTorch names them") {
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::Sequential> head;
    Net() {
      fc = register_module<nn::Linear>("fc", 4, 6, /*bias=*/false);
      head = register_module<nn::Sequential>("head");
      head->append<nn::ReLU>().append<nn::Linear>(6, 3);
    }
  };
  Net net;
  std::vector<std::string> names;
  for (auto& [n, p] : net.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"fc.weight", "head.1.weight", "head.1.bias"});
  CHECK(net.head->size() == 2);
  CHECK(!net.fc->bias().defined());
  CHECK(net.fc->path() == "fc");
  // what register_module(name, ptr) refuses, the in-place form refuses too
  struct Twice : nn::Module {
    Twice() {
      register_module<nn::ReLU>("a");
      register_module<nn::ReLU>("a");
    }
  };
  CHECK_THROWS_AS(Twice(), std::invalid_argument);
}

TEST_CASE("nn Sequential, ModuleList and register_module take modules made as temporaries, moved in, as LibTorch's") {
  Generator g(3);
  struct Block : nn::Module {  // a user's module with a child of its own, moved as a whole
    std::shared_ptr<nn::Linear> fc;
    Block(int64_t in, int64_t out, Generator& g) { fc = register_module("fc", nn::Linear(in, out, g, /*bias=*/false)); }
    Tensor forward(const Tensor& x) override { return relu(fc->forward(x)); }
  };
  nn::Linear first(4, 6, g);
  const Tensor w0 = first.weight(), b0 = first.bias();
  auto shared = std::make_shared<nn::Linear>(5, 3, g);
  nn::Sequential seq(std::move(first), nn::ReLU(), Block(6, 5, g), shared);
  std::vector<std::string> names;
  for (auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.fc.weight", "3.weight", "3.bias"});
  const auto children = seq.named_children();
  CHECK(children[3].second.get() == static_cast<nn::Module*>(shared.get()));  // a shared_ptr is kept, not copied
  CHECK(children[2].second->named_children().at(0).second->path() == "2.fc");
  // The moved layer's registered tensors are the ones it was made with, and
  // its weight() still reaches its registered entry: assigning re-registers.
  auto moved = std::dynamic_pointer_cast<nn::Linear>(children[0].second);
  CHECK(seq.state_dict().at("0.weight").data<float>() == w0.data<float>());
  const Tensor x = xgnt::input({2, 4}, 5, f32);
  const Tensor w2 = seq.state_dict().at("2.fc.weight");
  const Tensor want = linear(relu(linear(relu(linear(x, w0, b0)), w2)), shared->weight(), shared->bias());
  CHECK(bit_equal(seq.forward(x), want));
  const Tensor w = xgnt::input({6, 4}, 6, f32);
  moved->weight() = w;
  CHECK(seq.state_dict().at("0.weight").data<float>() == w.data<float>());
  seq.push_back(nn::Tanh());
  CHECK(seq.size() == 5);
  // A single container passed with std::move is moved into the new one, not
  // nested in it, as LibTorch's copy of a Sequential: the keys stay
  // "0.weight", not "0.0.weight". So is one registered as a temporary.
  nn::Sequential inner{nn::Linear(4, 6, g), nn::ReLU()};
  nn::Sequential outer(std::move(inner));
  CHECK(outer.size() == 2);
  CHECK(outer.named_parameters().at(0).first == "0.weight");
  nn::ModuleList inner_list{nn::Linear(4, 6, g)};
  nn::ModuleList outer_list(std::move(inner_list));
  CHECK(outer_list.size() == 1);
  CHECK(outer_list.named_parameters().at(0).first == "0.weight");
  struct Holder : nn::Module {
    std::shared_ptr<nn::Sequential> body;
    explicit Holder(Generator& g) { body = register_module("body", nn::Sequential{nn::Linear(4, 6, g), nn::ReLU()}); }
  };
  Holder holder(g);
  CHECK(holder.named_parameters().at(0).first == "body.0.weight");
  // shared_ptrs in braces, for both containers (docs/nn.md)
  nn::ModuleList shared_list{std::make_shared<nn::Linear>(4, 3, g), std::make_shared<nn::ReLU>()};
  nn::Sequential shared_seq{std::make_shared<nn::Linear>(4, 3, g), std::make_shared<nn::ReLU>()};
  CHECK(shared_list.size() == 2);
  CHECK(shared_seq.size() == 2);

  // Layers without a bias keep none once moved, and compute as their twins
  // made in place from the same seed: in braces, the modules are made in
  // order (in parentheses C++ leaves the order of a call's arguments open).
  Generator g1(9), g2(9);
  nn::ModuleList list{nn::Linear(4, 3, g1, /*bias=*/false),
                      nn::MultiheadAttention(nn::MultiheadAttentionOptions(4, 2).bias(false), g1)};
  nn::Linear lin(4, 3, g2, /*bias=*/false);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(4, 2).bias(false), g2);
  auto lin_moved = list.at<nn::Linear>(0);
  auto mha_moved = list.at<nn::MultiheadAttention>(1);
  CHECK(!lin_moved->bias().defined());
  CHECK(!mha_moved->in_proj_bias().defined());
  CHECK(bit_equal(lin_moved->forward(x), lin.forward(x)));
  const Tensor q = xgnt::input({3, 2, 4}, 7, f32);
  CHECK(bit_equal(mha_moved->forward(q, q, q).output, mha.forward(q, q, q).output));
  CHECK(list.named_parameters().size() == 3);  // 0.weight, 1.in_proj_weight, 1.out_proj.weight

  // register_module(name, M(...)), M deduced, as LibTorch writes it.
  struct Net : nn::Module {
    std::shared_ptr<nn::Linear> fc;
    Net() { fc = register_module("fc", nn::Linear(4, 3)); }
  };
  Net net;
  CHECK(net.fc->path() == "fc");
  CHECK(net.named_parameters().at(0).first == "fc.weight");
  // A module registered in a parent is not moved out of it: the parent keeps it whole.
  CHECK(XG_THROW_MESSAGE(nn::Sequential{std::move(*net.fc)}, std::logic_error) ==
        "Linear(in=4, out=3) 'fc': a module registered in a parent cannot be moved out of it (the parent would keep "
        "an empty shell); share it through its std::shared_ptr instead");
  CHECK(net.named_parameters().size() == 2);
}

TEST_CASE("nn default_generator: layers and dropouts given no Generator draw from it, manual_seed replays it") {
  const Tensor x = ones({256});
  auto draw = [&](uint64_t seed) {
    manual_seed(seed);
    nn::Linear fc(4, 3);
    nn::Conv2d conv(2, 2, 3);
    const Tensor mask = nn::Dropout(0.5).forward(x);
    const Tensor slopes = nn::RReLU().forward(-x);
    return std::vector<Tensor>{fc.weight(), conv.weight(), mask, slopes, dropout(x)};
  };
  const auto a = draw(7), b = draw(7), c = draw(8);
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(bit_equal(a[i], b[i]));
    CHECK(!bit_equal(a[i], c[i]));
  }
  // a Generator given explicitly leaves the default's stream where it was
  manual_seed(7);
  Generator own(1);
  nn::Linear mine(4, 3, own);
  CHECK(!bit_equal(mine.weight(), a[0]));
  CHECK(bit_equal(nn::Linear(4, 3).weight(), a[0]));
}

TEST_CASE("nn Sequential: a module without forward(x) names its type") {
  Generator g(1);
  nn::Sequential seq{std::make_shared<nn::Linear>(4, 4, g), std::make_shared<nn::ModuleList>()};
  std::string msg = XGN_THROW_MESSAGE(seq.forward(zeros({1, 4})), std::logic_error);
  CHECK(xgnt::contains(msg, "ModuleList"));
  CHECK(xgnt::contains(msg, "'1'"));
}

TEST_CASE("nn ModuleList: indexing, typed access, iteration, errors") {
  Generator g(1);
  nn::ModuleList list;
  list.push_back(std::make_shared<nn::Linear>(2, 3, g));
  list.push_back(std::make_shared<nn::LayerNorm>(3));
  CHECK(list.size() == 2);
  CHECK(list.at<nn::Linear>(0)->out_features() == 3);
  CHECK(list[1]->type_name() == "LayerNorm(dim=3)");
  int n = 0;
  for (const auto& m : list) n += m != nullptr;
  CHECK(n == 2);
  CHECK(list.num_parameters() == 6 + 3 + 3 + 3);
  std::string msg = XGN_THROW_MESSAGE(list.at<nn::Linear>(1), std::invalid_argument);
  CHECK(xgnt::contains(msg, "LayerNorm"));
  msg = XGN_THROW_MESSAGE(list[2], std::out_of_range);
  CHECK(xgnt::contains(msg, "index 2"));
  CHECK(xgnt::contains(msg, "size 2"));
}

TEST_CASE("nn AdaptiveLogSoftmaxWithLoss: log_prob is a distribution, forward reads it at the target, predict its argmax") {
  Generator g(3);
  nn::AdaptiveLogSoftmaxWithLoss m(8, 12, {3, 7}, g, 2.0, true);
  m.to(f64);
  const Tensor x = randn({5, 8}, g, f64);
  const Tensor lp = m.log_prob(x);  // (5, 12)
  const auto p = exp(lp).to_vector(), v = lp.to_vector();
  const std::vector<int64_t> y{0, 4, 11, 6, 2};
  const nn::ASMoutput out = m.forward(x, from_ints(y, {5}));
  const auto o = out.output.to_vector();
  const auto pred = m.predict(x);
  double loss = 0;
  for (int64_t n = 0; n < 5; ++n) {
    double total = 0;
    int64_t best = 0;
    for (int64_t c = 0; c < 12; ++c) total += p[n * 12 + c], best = v[n * 12 + c] > v[n * 12 + best] ? c : best;
    CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(o[n] == doctest::Approx(v[n * 12 + y[n]]).epsilon(1e-12));
    CHECK(pred.data<int64_t>()[n] == best);
    loss -= o[n] / 5;
  }
  CHECK(out.loss.to_vector()[0] == doctest::Approx(loss).epsilon(1e-12));
  std::vector<std::string> names;
  for (auto& [n, t] : m.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"head.weight", "head.bias", "tail.0.0.weight", "tail.0.1.weight",
                                          "tail.1.0.weight", "tail.1.1.weight"});
}
