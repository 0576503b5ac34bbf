// OpProfile: ops charged by phase, module and op; marks; nothing outside a profile.
#include <map>
#include <string>

#include "autograd/profile.h"
#include "autograd/xg.h"
#include "nn/linear.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::leaf;

TEST_CASE("OpProfile: each op's forward and backward, by module, and the marks between") {
  Tensor x = leaf({4, 3}, 1), y = leaf({4, 3}, 2);
  Generator gen(3);
  nn::Linear lin(3, 2, gen);
  CHECK_FALSE(profiling());
  std::map<OpProfile::Key, OpProfile::Cost> costs;
  std::string table;
  {
    OpProfile prof;
    CHECK(profiling());
    Tensor loss = sum(lin.forward((x * y).to(f32)));
    prof.mark("optimizer", "step");
    loss.backward();
    costs = prof.costs();
    table = prof.table(1);
    prof.clear();
    CHECK(prof.costs().empty());
  }
  CHECK_FALSE(profiling());
  auto calls = [&](const char* phase, const char* module, const char* op) {
    const auto it = costs.find(OpProfile::Key{phase, module, op});
    return it == costs.end() ? int64_t{0} : it->second.calls;
  };
  CHECK(calls("forward", "", "mul") == 1);
  CHECK(calls("forward", "Linear", "linear") == 1);
  CHECK(calls("forward", "", "sum") == 1);
  CHECK(calls("backward", "Linear", "linear") == 1);
  CHECK(calls("backward", "", "mul") == 1);
  CHECK(calls("optimizer", "", "step") == 1);
  for (const auto& [key, cost] : costs) CHECK(cost.seconds >= 0);
  CHECK(table.find("Linear") != std::string::npos);
  CHECK(table.find("total") != std::string::npos);
}
