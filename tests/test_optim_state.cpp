// Optimiser state from a file (issue 13, F1): the integers in it ("num_params",
// "step", the parameter index in a key) are checked as whole numbers in range
// before any conversion, and a refused state changes nothing.
#include <cmath>
#include <limits>

#include "autograd/serialize.h"
#include "optim/optim.h"
#include "tests/helpers.h"

using namespace xg;
using namespace xg::optim;

namespace {
Tensor param(std::vector<double> v) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, f64).requires_grad_();
}

// Two parameters after two steps.
template <class Opt, class Options>
std::map<std::string, Tensor> stepped_state(Options o) {
  std::vector<Tensor> ps{param({1, 2}), param({3})};
  Opt opt(ps, o);
  for (int t = 0; t < 2; ++t) {
    ps[0].set_grad(from_vector(std::vector<double>{0.5, -1}, {2}, f64));
    ps[1].set_grad(from_vector(std::vector<double>{2}, {1}, f64));
    opt.step();
  }
  return opt.state_dict();
}
}  // namespace

TEST_CASE("optim state: num_params and step must be whole numbers from 0 to 2^53, checked before the cast") {
  const auto good = stepped_state<Adam>(AdamOptions{});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::string range = ", expected a whole number from 0 to 9007199254740992 (2^53)";
  for (const char* key : {"num_params", "step"}) {
    CAPTURE(key);
    const std::vector<std::pair<double, std::string>> cases{
        {nan, "nan"}, {inf, "inf"}, {-inf, "-inf"}, {-1, "-1"}, {0.5, "0.5"}, {2.25, "2.25"},
        {1e300, "1e+300"}, {9007199254740994.0, "9007199254740994"}};
    for (const auto& [v, text] : cases) {
      CAPTURE(text);
      auto bad = good;
      bad[key] = scalar(v, f64);
      std::vector<Tensor> ps{param({1, 2}), param({3})};
      Adam opt(ps, AdamOptions{});
      CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
            "Adam state: '" + std::string(key) + "' is " + text + range);
      CHECK(opt.steps() == 0);
    }
    // One value, whatever the shape: (1,1) is fine, (2,) is not.
    auto bad = good;
    bad[key] = from_vector(std::vector<double>{2, 2}, {2}, f64);
    std::vector<Tensor> ps{param({1, 2}), param({3})};
    Adam opt(ps, AdamOptions{});
    CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
          "Adam state: '" + std::string(key) + "' must hold one value, not a tensor of shape (2,)");
    bad[key] = from_vector(std::vector<double>{2}, {1, 1}, f32);
    opt.load_state_dict(bad);
    CHECK(opt.steps() == 2);
  }
  // The largest step accepted.
  auto big = good;
  big["step"] = scalar(9007199254740992.0, f64);
  std::vector<Tensor> ps{param({1, 2}), param({3})};
  Adam opt(ps, AdamOptions{});
  opt.load_state_dict(big);
  CHECK(opt.steps() == int64_t{1} << 53);
}

TEST_CASE("optim state: SGD with momentum is checked the same way, from a file too") {
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  auto state = stepped_state<SGD>(o);
  CHECK(state.count("0.momentum_buffer") == 1);
  state["step"] = scalar(-3, f64);
  const std::string path = std::string(XG_TEST_TMPDIR) + "/sgd_bad_step.safetensors";
  save_tensors(path, state);
  std::vector<Tensor> ps{param({1, 2}), param({3})};
  SGD opt(ps, o);
  CHECK(XG_THROW_MESSAGE(opt.load(path), std::invalid_argument) ==
        "SGD state: 'step' is -3, expected a whole number from 0 to 9007199254740992 (2^53)");
  state["step"] = scalar(2, f64);
  state["num_params"] = scalar(std::nan(""), f32);
  save_tensors(path, state);
  CHECK(XG_THROW_MESSAGE(opt.load(path), std::invalid_argument) ==
        "SGD state: 'num_params' is nan, expected a whole number from 0 to 9007199254740992 (2^53)");
}

TEST_CASE("optim state: a refused lr changes nothing (it used to be checked after the buffers were replaced)") {
  auto good = stepped_state<Adam>(AdamOptions{});
  std::vector<Tensor> ps{param({1, 2}), param({3})};
  AdamOptions o;
  o.lr = 0.25;
  Adam opt(ps, o);
  auto bad = good;
  bad["lr"] = scalar(std::numeric_limits<double>::quiet_NaN(), f64);
  CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
        "Adam state: 'lr' is nan, expected a finite value >= 0");
  bad["lr"] = scalar(-0.5, f64);
  CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
        "Adam state: 'lr' is -0.5, expected a finite value >= 0");
  bad["lr"] = zeros({3}, f64);
  CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
        "Adam state: 'lr' must hold one value, not a tensor of shape (3,)");
  CHECK(opt.state_dict().size() == 3);  // no buffers: never stepped, nothing loaded
  CHECK(opt.lr() == 0.25);
  opt.load_state_dict(good);
  CHECK(opt.state_dict().size() == good.size());
}

TEST_CASE("optim state: a parameter index in a key is plain decimal (01, +1, -0 and ' 1' are not 1 and 0)") {
  const auto good = stepped_state<Adam>(AdamOptions{});
  for (const char* index : {"01", "+1", " 1", "-0", "1 ", "0x1", "99999999999999999999"}) {
    CAPTURE(index);
    auto bad = good;
    const std::string key = std::string(index) + ".exp_avg";
    bad[key] = bad.at("1.exp_avg");
    std::vector<Tensor> ps{param({1, 2}), param({3})};
    Adam opt(ps, AdamOptions{});
    CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
          "Adam state: unexpected key '" + key + "'");
  }
}

TEST_CASE("optim state: an undefined tensor in the state is named, not dereferenced") {
  const auto good = stepped_state<Adam>(AdamOptions{});
  std::vector<Tensor> ps{param({1, 2}), param({3})};
  Adam opt(ps, AdamOptions{});
  auto bad = good;
  bad["0.exp_avg"] = Tensor();
  CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
        "Adam state: '0.exp_avg' is undefined, parameter 0 is (2,) float64");
  bad = good;
  bad["step"] = Tensor();
  CHECK(XG_THROW_MESSAGE(opt.load_state_dict(bad), std::invalid_argument) ==
        "Adam state: 'step' must hold one value, not an undefined tensor");
}
