// The op profile (autograd/profile.h).
#include "autograd/profile.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "autograd/detail/tape.h"

namespace xg {

namespace detail {
thread_local OpProfile* g_profile = nullptr;
}  // namespace detail

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "BatchNorm2d(16, eps=1e-05) 'layer1.0.bn1'" -> "BatchNorm2d".
std::string module_type(const std::string& scope) {
  return scope.substr(0, scope.find_first_of("( "));
}
}  // namespace

OpProfile::OpProfile() : prev_(detail::g_profile), last_(now()) { detail::g_profile = this; }
OpProfile::~OpProfile() { detail::g_profile = prev_; }
bool profiling() { return detail::g_profile != nullptr; }

void OpProfile::charge(const char* phase, const std::string& scope, const std::string& op) {
  const double t = now();
  Cost& c = costs_[Key{phase, module_type(scope), op}];
  c.seconds += t - last_;
  ++c.calls;
  last_ = t;
}

void OpProfile::restart() { last_ = now(); }
void OpProfile::mark(const std::string& label, const std::string& what) { charge(label.c_str(), "", what); }

void OpProfile::clear() {
  costs_.clear();
  restart();
}

std::string OpProfile::table(int64_t steps) const {
  std::vector<std::pair<Key, Cost>> rows(costs_.begin(), costs_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  const double per = 1e3 / static_cast<double>(std::max<int64_t>(steps, 1));
  std::string out = fmt::format("{:>9} {:>6} {:>7}  {:<9} {:<18} {}\n", "ms/step", "share", "calls", "phase", "module", "op");
  for (const auto& [k, c] : rows)
    out += fmt::format("{:9.2f} {:5.1f}% {:7}  {:<9} {:<18} {}\n", c.seconds * per, 100 * c.seconds / total,
                       c.calls / std::max<int64_t>(steps, 1), std::get<0>(k), std::get<1>(k), std::get<2>(k));
  out += fmt::format("{:9.2f} 100.0%          total\n", total * per);
  return out;
}

}  // namespace xg
