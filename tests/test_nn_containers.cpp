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
