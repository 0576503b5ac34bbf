#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "autograd/autograd.h"
#include "autograd/ops.h"

namespace xg {

namespace {

Shape unravel(int64_t flat, const Shape& s) {
  Shape idx(s.size());
  for (size_t k = s.size(); k-- > 0;) {
    idx[k] = s[k] ? flat % s[k] : 0;
    flat = s[k] ? flat / s[k] : 0;
  }
  return idx;
}

// One line: pass/fail, how many elements, what was checked, the worst element.
std::string describe(const char* who, const GradcheckResult& res, const std::string& what,
                     const std::string& worst_name, const GradcheckOptions& opts) {
  std::ostringstream os;
  os << who << " " << (res.ok ? "passed" : "FAILED") << ": " << res.checked << " elements" << what;
  if (res.worst_input >= 0)
    os << "; worst: " << worst_name << " index " << shape_str(res.worst_index) << " analytic " << res.analytic
       << " numeric " << res.numeric << " |error| " << res.abs_error << " (tolerance "
       << opts.atol + opts.rtol * std::abs(res.numeric) << ")";
  return os.str();
}

}  // namespace

// The tape's gradient of <w, f()> against central differences, input by input.
// (long: both go through scalar_of, whose w is drawn from gen, which then picks
// the samples; a per-input helper would take scalar_of, gen, res, worst_ratio.)
GradcheckResult gradcheck(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                          const GradcheckOptions& opts) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " is undefined");
    if (params[i].requires_grad() && params[i].dtype() != Dtype::f64)
      throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " " + shape_str(params[i].shape()) +
                                  " is float32; finite differences need float64 (use .to(xg::f64), "
                                  "or Module::to(xg::f64) for a model)");
  }
  // A fixed random projection w turns any output into the scalar <w, f>.
  Generator gen(opts.seed + 12345);
  Tensor w;
  auto scalar_of = [&](const Tensor& y) {
    if (!w.defined()) w = rand(y.shape(), gen, y.dtype(), 0.5, 1.5);
    if (y.shape() != w.shape())
      throw std::invalid_argument("gradcheck: the function returned shape " + shape_str(y.shape()) +
                                  " on one call and " + shape_str(w.shape()) + " on another");
    return sum(mul(y.dtype() == w.dtype() ? y : y.to(w.dtype()), w));
  };

  // Analytic gradients through the tape.
  for (const Tensor& p : params) const_cast<Tensor&>(p).zero_grad();
  {
    Tensor y = f();
    if (!y.defined()) throw std::invalid_argument("gradcheck: the function returned an undefined tensor");
    const Tensor s = scalar_of(y);
    if (s.requires_grad() || !s.is_leaf()) s.backward();  // else a constant: every gradient is 0
  }

  GradcheckResult res;
  double worst_ratio = -1;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    if (!p.requires_grad()) continue;
    Tensor g = p.grad();
    std::vector<double> analytic = g.defined() ? g.to_vector() : std::vector<double>(p.numel(), 0.0);
    std::vector<int64_t> picks(p.numel());
    std::iota(picks.begin(), picks.end(), 0);
    if (opts.max_samples_per_input > 0 && p.numel() > opts.max_samples_per_input) {
      std::shuffle(picks.begin(), picks.end(), gen.engine());
      picks.resize(opts.max_samples_per_input);
      std::sort(picks.begin(), picks.end());
    }
    double* data = p.data<double>();
    for (int64_t j : picks) {
      const double orig = data[j];
      double plus, minus;
      {
        NoGradGuard ng;
        data[j] = orig + opts.eps;
        plus = scalar_of(f()).item();
        data[j] = orig - opts.eps;
        minus = scalar_of(f()).item();
        data[j] = orig;
      }
      const double numeric = (plus - minus) / (2 * opts.eps);
      const double a = analytic[j];
      const double err = std::abs(a - numeric);
      const double tol = opts.atol + opts.rtol * std::abs(numeric);
      const double ratio = std::isnan(err) ? INFINITY : err / tol;
      ++res.checked;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        res.worst_input = static_cast<int64_t>(i);
        res.worst_index = unravel(j, p.shape());
        res.analytic = a;
        res.numeric = numeric;
        res.abs_error = err;
      }
      if (!(err <= tol)) res.ok = false;
    }
  }
  res.message = describe("gradcheck", res, "", "input " + std::to_string(res.worst_input), opts);
  return res;
}

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  return gradcheck([&]() { return f(inputs); }, inputs, opts);
}

namespace {

// The sets of inputs that gradgradcheck takes first gradients with respect
// to: all of them, and (mixed partials) each one alone and each one's
// complement, without repeats. A backward that silently drops the
// dependence of d/dx_S on an input outside S passes the "all" set and fails
// one of the others.
std::vector<std::vector<size_t>> first_gradient_sets(size_t n, bool mixed) {
  std::vector<std::vector<size_t>> sets(1);
  for (size_t i = 0; i < n; ++i) sets[0].push_back(i);
  if (!mixed) return sets;
  auto add = [&](std::vector<size_t> s) {
    if (!s.empty() && std::find(sets.begin(), sets.end(), s) == sets.end()) sets.push_back(std::move(s));
  };
  for (size_t i = 0; i < n; ++i) {
    add({i});
    std::vector<size_t> rest;
    for (size_t j = 0; j < n; ++j)
      if (j != i) rest.push_back(j);
    add(std::move(rest));
  }
  return sets;
}

std::string set_str(const std::vector<size_t>& s, const std::vector<size_t>& index_of) {
  std::string out = "{";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(index_of[s[k]]);
  return out + "}";
}

// The first-order gradients of <w, f()> with respect to `of`, flattened
// into one vector, recorded on the tape whatever the caller's grad mode
// (gradcheck evaluates under NoGradGuard); an unused input's part is zeros.
Tensor flat_first_gradients(const std::function<Tensor()>& f, const std::vector<Tensor>& of, const Tensor& w) {
  const bool prev = grad_enabled();
  set_grad_enabled(true);
  struct Restore {
    bool prev;
    ~Restore() { set_grad_enabled(prev); }
  } restore{prev};
  const Tensor y = f();
  GradOptions o;
  o.create_graph = true;
  o.allow_unused = true;
  const std::vector<Tensor> gs = grad({y}, of, {w}, o);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < gs.size(); ++i)
    parts.push_back(gs[i].defined() ? reshape(gs[i], {-1}) : zeros({of[i].numel()}, Dtype::f64));
  return concat(parts, 0);
}

}  // namespace

GradcheckResult gradgradcheck(const std::function<Tensor()>& f, const std::vector<Tensor>& params,
                              const GradcheckOptions& opts) {
  std::vector<Tensor> wanted;
  std::vector<size_t> index_of;  // wanted[k] is params[index_of[k]]
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].defined() && params[i].requires_grad()) {
      wanted.push_back(params[i]);
      index_of.push_back(i);
    }
  if (wanted.empty()) throw std::invalid_argument("gradgradcheck: no input requires a gradient");
  Tensor y0;
  {
    NoGradGuard off;
    y0 = f();
  }
  if (!y0.defined()) throw std::invalid_argument("gradgradcheck: the function returned an undefined tensor");
  if (y0.dtype() != Dtype::f64)
    throw std::invalid_argument("gradgradcheck: the function returns " + std::string(dtype_name(y0.dtype())) +
                                "; finite differences need float64");
  Generator gen(opts.seed + 777);
  Tensor w = rand(y0.shape(), gen, Dtype::f64, 0.5, 1.5).requires_grad_();
  std::vector<Tensor> checked = wanted;  // the second order: against every input, and w
  checked.push_back(w);
  GradcheckResult total;
  for (const std::vector<size_t>& set : first_gradient_sets(wanted.size(), opts.mixed_partials)) {
    std::vector<Tensor> of;
    for (size_t k : set) of.push_back(wanted[k]);
    auto first_order = [&]() { return flat_first_gradients(f, of, w); };
    GradcheckResult r = gradcheck(first_order, checked, opts);
    // The worst element, named by its place in `params` (or as w).
    std::string worst = "the output weight w";
    if (r.worst_input >= 0 && static_cast<size_t>(r.worst_input) < wanted.size()) {
      r.worst_input = static_cast<int64_t>(index_of[static_cast<size_t>(r.worst_input)]);
      worst = "input " + std::to_string(r.worst_input);
    }
    r.checked += total.checked;
    r.message = describe("gradgradcheck", r,
                         " (first gradient with respect to inputs " + set_str(set, index_of) +
                             ", second against every input and w)",
                         worst, opts);
    if (!r.ok) return r;
    total = r;
  }
  return total;
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  return gradgradcheck([&]() { return f(inputs); }, inputs, opts);
}

}  // namespace xg
