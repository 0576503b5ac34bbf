// nn/batch_norm.h and nn/group_norm.h: BatchNorm1d, BatchNorm2d and
// GroupNorm as layers: PyTorch's state dict, train/eval, running statistics,
// float64 gradchecks. tests/torch/vision_layers_parity compares them with
// torch.nn's over three training steps and an evaluation.
#include <doctest/doctest.h>

#include "test_nn_helpers.h"

using namespace xg;

TEST_CASE("nn BatchNorm2d: PyTorch's state dict, and the running statistics move only in training") {
  nn::BatchNorm2d bn(3);
  const auto sd = bn.state_dict();
  std::vector<std::string> names;
  for (const auto& [k, v] : sd) names.push_back(k);
  CHECK(names == std::vector<std::string>{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"});
  CHECK(sd.at("num_batches_tracked").dtype() == i64);
  CHECK(bn.type_name() == "BatchNorm2d(3, eps=1e-05, momentum=0.1)");
  bn.to(f64);
  CHECK(bn.num_batches_tracked().dtype() == i64);  // integers stay integers
  const Tensor x = xgnt::input({4, 3, 2, 2}, 1) * 2.0 + 1.0;
  const Tensor y = bn.forward(x);
  // Training: each channel of the output has mean 0 and (biased) variance 1 - eps/(var+eps).
  const auto m = mean(y, {0, 2, 3}).to_vector();
  for (double v : m) CHECK(std::abs(v) < 1e-12);
  CHECK(bn.num_batches_tracked().item() == 1);
  const auto rm = bn.running_mean().to_vector(), bm = mean(x, {0, 2, 3}).to_vector();
  for (size_t c = 0; c < 3; ++c) CHECK(rm[c] == doctest::Approx(0.1 * bm[c]).epsilon(1e-12));
  bn.eval();
  const auto before = bn.running_var().to_vector();
  const Tensor z = bn.forward(x);
  CHECK(bn.running_var().to_vector() == before);
  CHECK(bn.num_batches_tracked().item() == 1);
  // Evaluation: (x - running_mean) / sqrt(running_var + eps).
  CHECK(z.at({0, 1, 0, 0}) == doctest::Approx((x.at({0, 1, 0, 0}) - rm[1]) / std::sqrt(before[1] + 1e-5)));
}

TEST_CASE("nn BatchNorm1d, BatchNorm2d, GroupNorm: float64 gradcheck in training and evaluation") {
  nn::BatchNorm1d b1(4);
  nn::BatchNorm2d b2(3, 1e-3, 0.3);
  nn::GroupNorm gn(2, 6);
  for (nn::Module* m : std::vector<nn::Module*>{&b1, &b2, &gn}) m->to(f64);
  Tensor s = xgnt::input({5, 4, 3}, 2).requires_grad_(), f = xgnt::input({6, 4}, 3).requires_grad_();
  Tensor x = xgnt::input({3, 3, 2, 3}, 4).requires_grad_(), g = xgnt::input({2, 6, 2, 2}, 5).requires_grad_();
  xgnt::check_grad([&] { return b1.forward(s); }, b1.parameters(), {s});
  xgnt::check_grad([&] { return b1.forward(f); }, b1.parameters(), {f});
  xgnt::check_grad([&] { return b2.forward(x); }, b2.parameters(), {x});
  xgnt::check_grad([&] { return gn.forward(g); }, gn.parameters(), {g});
  b2.eval();
  xgnt::check_grad([&] { return b2.forward(x); }, b2.parameters(), {x});
  nn::BatchNorm2d plain(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  CHECK(plain.state_dict().empty());
  plain.eval();  // no running statistics: the batch's own, as PyTorch
  const Tensor y = plain.forward(x.detach().to(f32));
  for (double v : mean(y, {0, 2, 3}).to_vector()) CHECK(std::abs(v) < 1e-5);
}

TEST_CASE("nn BatchNorm and GroupNorm: bad sizes and inputs are refused by name") {
  nn::BatchNorm2d bn(3);
  CHECK(XGN_THROW_MESSAGE(bn.forward(zeros({2, 4, 3, 3})), ShapeError) ==
        "BatchNorm2d(3, eps=1e-05, momentum=0.1): expected an input (N,C,H,W) with C=3, got (2,4,3,3)");
  nn::BatchNorm1d b1(4);
  CHECK(XGN_THROW_MESSAGE(b1.forward(zeros({2, 4, 3, 3})), ShapeError) ==
        "BatchNorm1d(4, eps=1e-05, momentum=0.1): expected an input (N,C) or (N,C,L) with C=4, got (2,4,3,3)");
  CHECK(XGN_THROW_MESSAGE(nn::BatchNorm2d(3, 1e-5, 1.5), std::invalid_argument) ==
        "BatchNorm2d: features 3, eps 1e-05, momentum 1.5: expected features >= 1, eps > 0 and momentum in [0, 1]");
  CHECK(XGN_THROW_MESSAGE(nn::GroupNorm(4, 6), std::invalid_argument) ==
        "GroupNorm: groups 4, channels 6, eps 1e-05: expected groups >= 1 dividing channels >= 1, and eps > 0");
  nn::GroupNorm gn(2, 6);
  CHECK(XGN_THROW_MESSAGE(gn.forward(zeros({2, 4})), ShapeError) ==
        "GroupNorm(2, 6, eps=1e-05): expected an input (N,C,...) with C=6, got (2,4)");
}
