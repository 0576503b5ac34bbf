// Anomaly mode: every op's output and every gradient checked for NaN and
// Inf, named by op and module (NameScope).
#include <cmath>
#include <sstream>

#include "autograd/detail/tape.h"
#include "autograd/ops.h"

namespace xg {

using namespace detail;

bool anomaly_enabled() { return g_anomaly; }
DetectAnomalyGuard::DetectAnomalyGuard(bool on) : prev_(g_anomaly) { g_anomaly = on; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = prev_; }

NameScope::NameScope(std::string name) {
  if (!(g_anomaly || g_trace || g_profile) || name.empty()) return;  // export traces and profiles name modules too
  active_ = true;
  prev_ = std::move(g_scope);
  g_scope = std::move(name);
}
NameScope::~NameScope() {
  if (active_) g_scope = std::move(prev_);
}
std::string current_scope() { return g_anomaly ? g_scope : std::string(); }

int64_t first_nonfinite(const Tensor& t) {
  if (t.dtype() == Dtype::i64) return -1;  // every integer is finite
  return dispatch(t.dtype(), [&](auto z) -> int64_t {
    const auto* p = t.data<decltype(z)>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return i;
    return -1;
  });
}

namespace {

std::string value_str(const Tensor& t, int64_t i) {
  const double v = t.dtype() == Dtype::f32 ? t.data<float>()[i] : t.data<double>()[i];
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

}  // namespace

namespace detail {

std::string where_str(const std::string& op, const std::string& scope) {
  return scope.empty() ? op : op + " (in " + scope + ")";
}

// Anomaly mode, forward: the output of `op` must be finite.
void check_forward(const char* op, const Tensor& out, const std::vector<Tensor>& inputs) {
  const int64_t bad = first_nonfinite(out);
  if (bad < 0) return;
  std::ostringstream m;
  m << "anomaly: " << where_str(op, g_scope) << " produced " << value_str(out, bad) << " at flat index " << bad
    << " of its output " << shape_str(out.shape()) << " " << dtype_name(out.dtype()) << "; inputs:";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    m << " " << i << " " << shape_str(inputs[i].shape());
    const int64_t j = first_nonfinite(inputs[i]);
    if (j >= 0) m << " (already holds " << value_str(inputs[i], j) << " at " << j << ")";
    else m << " (finite)";
  }
  throw AnomalyError(m.str());
}


// Anomaly mode: the gradient flowing into a node's backward is finite.
void check_finite_in(const Node& node, const Tensor& g) {
  const int64_t bad = first_nonfinite(g);
  if (bad >= 0)
    throw AnomalyError("anomaly: the gradient flowing into " + where_str(node.op, node.scope) + "'s backward holds " +
                       value_str(g, bad) + " at flat index " + std::to_string(bad) + " of " + shape_str(g.shape()));
}


// Anomaly mode: the gradient a backward returned for input i is finite.
void check_finite_gradient(const Node& node, size_t i, const Tensor& gi, const Tensor& g) {
  if (!g_anomaly) return;
  const int64_t bad = first_nonfinite(gi);
  if (bad >= 0)
    throw AnomalyError("anomaly: backward of " + where_str(node.op, node.scope) + " produced " + value_str(gi, bad) +
                       " at flat index " + std::to_string(bad) + " of the gradient for input " + std::to_string(i) +
                       " " + shape_str(gi.shape()) + " from a finite output gradient " + shape_str(g.shape()));
}

}  // namespace detail

}  // namespace xg
