#include "autograd/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"

namespace xg {

namespace {
const TensorImpl& impl_of(const std::shared_ptr<TensorImpl>& p) {
  if (!p) throw ShapeError("Tensor: operation on an undefined tensor");
  return *p;
}
}  // namespace

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::f32: return "float32";
    case Dtype::f64: return "float64";
    case Dtype::i64: return "int64";
  }
  return "unknown";
}

int64_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : 8; }

std::string shape_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  if (s.size() == 1) r += ",";
  return r + ")";
}

// A zero dimension makes the count 0 whatever the others are; past 2^63 it
// throws rather than wrap (signed overflow is undefined).
int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d == 0) return 0;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape_numel: shape " + shape_str(s) + " has more elements than an int64 can count");
  return n;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor of " +
                     std::to_string(ndim) + " dimensions");
  return a;
}

namespace {
std::atomic<int64_t> g_storage_bytes{0};
std::atomic<int64_t> g_storage_peak{0};
}  // namespace

void count_storage(int64_t bytes) {
  const int64_t now = g_storage_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_storage_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_storage_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

MemoryStats memory_stats() {
  const CacheCounters c = cache_counters();
  MemoryStats m;
  m.current_bytes = g_storage_bytes.load(std::memory_order_relaxed);
  m.peak_bytes = g_storage_peak.load(std::memory_order_relaxed);
  m.cached_bytes = c.cached_bytes;
  m.cache_limit = c.limit;
  m.cache_hits = c.hits;
  m.cache_misses = c.misses;
  return m;
}

void reset_peak_memory() { g_storage_peak.store(g_storage_bytes.load(std::memory_order_relaxed)); }

namespace {
// The most elements a tensor may have, so that its byte count (8 per float64)
// fits an int64.
constexpr int64_t kMaxNumel = INT64_MAX / 8;

// Dimensions >= 0 whose non-zero ones multiply to at most kMaxNumel: checked
// past a zero dimension too, since a shape's strides multiply every
// dimension after it (those of (0, 2^40, 2^40) would overflow).
void check_new_shape(const Shape& s, const char* op) {
  for (int64_t x : s)
    if (x < 0) throw ShapeError(std::string(op) + ": negative dimension in shape " + shape_str(s));
  int64_t nonzero = 1;
  for (int64_t x : s) {
    if (x == 0) continue;
    if (x > kMaxNumel / nonzero)
      throw ShapeError(std::string(op) + ": shape " + shape_str(s) +
                       " is too large: its non-zero dimensions multiply to more than " + std::to_string(kMaxNumel) +
                       " elements");
    nonzero *= x;
  }
}
}  // namespace

Tensor make_tensor(const Shape& s, Dtype d) {
  check_new_shape(s, "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = s;
  impl->dtype = d;
  impl->buf = std::make_shared<Buffer>(d, shape_numel(s));
  return Tensor(std::move(impl));
}

namespace {
std::string format_double(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

// A value written into an int64 tensor must be a whole number it can hold.
void check_integral(double v, const char* op) {
  if (!(v == std::trunc(v) && v > -9223372036854775808.0 && v < 9223372036854775808.0))
    throw ShapeError(std::string(op) + ": " + format_double(v) + " is not an integer an int64 tensor can hold");
}
}  // namespace

void throw_int64_input(const Tensor& t, const char* op) {
  throw ShapeError(std::string(op) + ": got an int64 tensor " + shape_str(t.shape()) + "; " + op +
                   " computes on float32 or float64 (int64 tensors hold ids and targets: convert with .to(xg::f32))");
}

// ---- Generator ---------------------------------------------------------------

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

double Generator::uniform(double lo, double hi) {
  // 53 random bits -> [0,1); identical on every platform (unlike std::uniform_real_distribution).
  double u = static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);
  return lo + (hi - lo) * u;
}

double Generator::normal(double mean, double std) {
  // Box-Muller, one value per call, reproducible across standard libraries.
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::string Generator::state() const {
  std::ostringstream os;
  os << engine_;
  return os.str();
}

void Generator::set_state(const std::string& s) {
  std::istringstream is(s);
  std::mt19937_64 e;
  is >> e;
  if (is.fail()) throw std::invalid_argument("Generator::set_state: malformed generator state");
  engine_ = e;
}

// ---- Tensor --------------------------------------------------------------------

const Shape& Tensor::shape() const { return impl_of(impl_).shape; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::size(int64_t axis) const { return shape()[normalize_axis(axis, dim(), "size")]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
Dtype Tensor::dtype() const { return impl_of(impl_).dtype; }

template <>
float* Tensor::data<float>() {
  if (dtype() != Dtype::f32) throw ShapeError(std::string("data<float>: tensor is ") + dtype_name(dtype()));
  return static_cast<float*>(impl_->buf->raw());
}
template <>
double* Tensor::data<double>() {
  if (dtype() != Dtype::f64) throw ShapeError(std::string("data<double>: tensor is ") + dtype_name(dtype()));
  return static_cast<double*>(impl_->buf->raw());
}
template <>
int64_t* Tensor::data<int64_t>() {
  if (dtype() != Dtype::i64) throw ShapeError(std::string("data<int64_t>: tensor is ") + dtype_name(dtype()));
  return static_cast<int64_t*>(impl_->buf->raw());
}
template <>
const int64_t* Tensor::data<int64_t>() const {
  return const_cast<Tensor*>(this)->data<int64_t>();
}
template <>
const float* Tensor::data<float>() const {
  return const_cast<Tensor*>(this)->data<float>();
}
template <>
const double* Tensor::data<double>() const {
  return const_cast<Tensor*>(this)->data<double>();
}

static int64_t flat_index(const Tensor& t, std::initializer_list<int64_t> idx, const char* op) {
  const Shape& s = t.shape();
  if (idx.size() != s.size())
    throw ShapeError(std::string(op) + ": " + std::to_string(idx.size()) + " indices for a tensor of shape " +
                     shape_str(s));
  int64_t flat = 0, k = 0;
  for (int64_t i : idx) {
    if (i < 0 || i >= s[k])
      throw ShapeError(std::string(op) + ": index " + std::to_string(i) + " is out of range for dimension " +
                       std::to_string(k) + " of shape " + shape_str(s));
    flat = flat * s[k] + i;
    ++k;
  }
  return flat;
}

double Tensor::at(std::initializer_list<int64_t> idx) const {
  int64_t i = flat_index(*this, idx, "at");
  return dispatch_any(dtype(), [&](auto z) { return static_cast<double>(data<decltype(z)>()[i]); });
}

void Tensor::set(std::initializer_list<int64_t> idx, double v) {
  int64_t i = flat_index(*this, idx, "set");
  if (dtype() == Dtype::i64) check_integral(v, "set");
  dispatch_any(dtype(), [&](auto z) { data<decltype(z)>()[i] = static_cast<decltype(z)>(v); });
  bump_version();
}

uint64_t Tensor::version() const { return impl_of(impl_).buf->version.load(std::memory_order_relaxed); }
void Tensor::bump_version() {
  impl_of(impl_).buf->version.fetch_add(1, std::memory_order_relaxed);
  count_in_place_write();
}

// Every element = value, no version bump (full() makes a fresh tensor).
static void fill_values(Tensor& t, double value) {
  if (t.dtype() == Dtype::i64) check_integral(value, "fill");
  dispatch_any(t.dtype(), [&](auto z) {
    auto* p = t.data<decltype(z)>();
    std::fill(p, p + t.numel(), static_cast<decltype(z)>(value));
  });
}

void Tensor::fill_(double value) {
  fill_values(*this, value);
  bump_version();
}

double Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) +
                     " elements, expected 1");
  return dispatch_any(dtype(), [&](auto z) { return static_cast<double>(data<decltype(z)>()[0]); });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> r(numel());
  dispatch_any(dtype(), [&](auto z) {
    const auto* p = data<decltype(z)>();
    for (size_t i = 0; i < r.size(); ++i) r[i] = p[i];
  });
  return r;
}

bool Tensor::requires_grad() const { return impl_of(impl_).requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  impl_of(impl_);
  if (impl_->grad_fn)
    throw std::logic_error("requires_grad_: only leaf tensors can be flagged; this one was made by " +
                           std::string(impl_->grad_fn->op) + " (use detach() first)");
  if (on && impl_->dtype == Dtype::i64)
    throw std::logic_error("requires_grad_: an int64 tensor " + shape_str(impl_->shape) +
                           " cannot require grad (only float32 and float64 tensors carry gradients)");
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return impl_of(impl_).grad_fn == nullptr; }
Tensor Tensor::grad() const { return impl_of(impl_).grad; }

void Tensor::set_grad(const Tensor& g) {
  impl_of(impl_);
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    throw ShapeError("set_grad: gradient " + shape_str(g.shape()) + " " + dtype_name(g.dtype()) +
                     " does not match tensor " + shape_str(shape()) + " " + dtype_name(dtype()));
  impl_->grad = g;
}

void Tensor::zero_grad() { impl_of(impl_), impl_->grad = Tensor(); }

Tensor Tensor::detach() const {
  const TensorImpl& src = impl_of(impl_);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = src.shape;
  impl->dtype = src.dtype;
  impl->buf = src.buf;
  return Tensor(std::move(impl));
}

Tensor Tensor::clone() const {
  Tensor out = make_tensor(shape(), dtype());
  if (numel() > 0)
    std::memcpy(out.impl()->buf->raw(), impl_->buf->raw(),
                numel() * dtype_size(dtype()));
  return record("clone", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

// Float to int64 truncates toward zero (as PyTorch); a value that is not
// finite or past +-2^63 is an error naming its index, not undefined behaviour.
static void convert_into(const Tensor& src, Tensor& dst, const char* op) {
  if (dst.dtype() == Dtype::i64 && src.dtype() != Dtype::i64) {
    dispatch(src.dtype(), [&](auto zs) {
      const auto* s = src.data<decltype(zs)>();
      int64_t* d = dst.data<int64_t>();
      for (int64_t i = 0, n = src.numel(); i < n; ++i) {
        const double v = static_cast<double>(s[i]);
        if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0))
          throw ShapeError(std::string(op) + ": element " + std::to_string(i) + " of a " + dtype_name(src.dtype()) +
                           " tensor " + shape_str(src.shape()) + " is " + format_double(v) +
                           ", which int64 cannot hold");
        d[i] = static_cast<int64_t>(v);
      }
    });
    return;
  }
  dispatch_any(src.dtype(), [&](auto zs) {
    const auto* s = src.data<decltype(zs)>();
    dispatch_any(dst.dtype(), [&](auto zd) {
      auto* d = dst.data<decltype(zd)>();
      for (int64_t i = 0, n = src.numel(); i < n; ++i) d[i] = static_cast<decltype(zd)>(s[i]);
    });
  });
}

Tensor Tensor::to(Dtype d) const {
  if (d == dtype()) return *this;
  if (d == Dtype::i64 || dtype() == Dtype::i64) {  // no gradient through an integer tensor
    Tensor out = make_tensor(shape(), d);
    convert_into(*this, out, "to");
    return out;
  }
  Tensor out = make_tensor(shape(), d);
  convert_into(*this, out, "to");
  Dtype from = dtype();
  return record("to", out, {*this}, [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
}

void Tensor::copy_(const Tensor& src) {
  if (src.shape() != shape())
    throw ShapeError("copy_: source " + shape_str(src.shape()) + " does not match destination " +
                     shape_str(shape()));
  convert_into(src, *this, "copy_");
  bump_version();
}

void Tensor::convert_(Dtype d) {
  if (!is_leaf()) throw std::logic_error("convert_: only leaf tensors can change dtype in place");
  if (d == dtype()) return;
  if (d == Dtype::i64 && requires_grad())
    throw std::logic_error("convert_: a tensor that requires grad cannot become int64 (int64 tensors carry no gradient)");
  Tensor tmp = make_tensor(shape(), d);
  convert_into(*this, tmp, "convert_");
  impl_->buf->version.fetch_add(1);  // ops that saved the old values must not run backward on them
  count_in_place_write();
  impl_->buf = tmp.impl()->buf;
  impl_->dtype = d;
  impl_->grad = Tensor();
  // A converted tensor starts a new history: graphs recorded before reach
  // neither its grad() (through backward) nor it (through xg::grad), which
  // would otherwise disagree, and could add a gradient of the old dtype.
  if (auto acc = impl_->grad_accumulator.lock()) {
    auto gone = std::make_shared<TensorImpl>();  // what those graphs accumulate into, seen by no one
    gone->shape = impl_->shape;
    acc->leaf = std::move(gone);
  }
  impl_->grad_accumulator.reset();
}

// ---- factories ------------------------------------------------------------------

Tensor empty(const Shape& s, Dtype d) { return make_tensor(s, d); }

Tensor from_blob(void* data, const Shape& s, Dtype d, std::shared_ptr<void> owner) {
  check_new_shape(s, "from_blob");
  if (!data && shape_numel(s) > 0) throw ShapeError("from_blob: null data for shape " + shape_str(s));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = s;
  impl->dtype = d;
  impl->buf = std::make_shared<Buffer>(d, shape_numel(s), data, std::move(owner));
  return Tensor(std::move(impl));
}

Tensor full(const Shape& s, double value, Dtype d) {
  Tensor t = make_tensor(s, d);
  fill_values(t, value);
  return t;
}
Tensor zeros(const Shape& s, Dtype d) { return full(s, 0.0, d); }
Tensor ones(const Shape& s, Dtype d) { return full(s, 1.0, d); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor scalar(double value, Dtype d) { return full({}, value, d); }

Tensor arange(int64_t n, Dtype d) {
  Tensor t = make_tensor({n}, d);
  dispatch_any(d, [&](auto z) {
    auto* p = t.data<decltype(z)>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<decltype(z)>(i);
  });
  return t;
}

template <class V>
static Tensor from_values(const V& v, const Shape& s, Dtype d, const char* op) {
  if (static_cast<int64_t>(v.size()) != shape_numel(s))
    throw ShapeError(std::string(op) + ": " + std::to_string(v.size()) + " values do not fill shape " + shape_str(s) +
                     " (" + std::to_string(shape_numel(s)) + " elements)");
  Tensor t = make_tensor(s, d);
  dispatch_any(d, [&](auto z) {
    auto* p = t.data<decltype(z)>();
    size_t i = 0;
    for (auto x : v) p[i++] = static_cast<decltype(z)>(x);
  });
  return t;
}

Tensor from_vector(const std::vector<float>& v, const Shape& s) { return from_values(v, s, Dtype::f32, "from_vector"); }
Tensor from_vector(const std::vector<double>& v, const Shape& s, Dtype d) {
  if (d == Dtype::i64)
    for (double x : v) check_integral(x, "from_vector");
  return from_values(v, s, d, "from_vector");
}
Tensor tensor(std::initializer_list<double> v, const Shape& s, Dtype d) {
  if (d == Dtype::i64)
    for (double x : v) check_integral(x, "tensor");
  return from_values(v, s, d, "tensor");
}
Tensor from_ints(const std::vector<int64_t>& v, const Shape& s) { return from_values(v, s, Dtype::i64, "from_ints"); }

Tensor randn(const Shape& s, Generator& g, Dtype d, double mean, double std) {
  Tensor t = make_tensor(s, d);
  dispatch(d, [&](auto z) {
    auto* p = t.data<decltype(z)>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<decltype(z)>(g.normal(mean, std));
  });
  return t;
}

Tensor rand(const Shape& s, Generator& g, Dtype d, double lo, double hi) {
  Tensor t = make_tensor(s, d);
  dispatch(d, [&](auto z) {
    auto* p = t.data<decltype(z)>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<decltype(z)>(g.uniform(lo, hi));
  });
  return t;
}

// ---- printing ---------------------------------------------------------------------

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  os << "tensor(shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype());
  if (t.requires_grad()) os << ", requires_grad";
  os << ")\n";
  const Shape& s = t.shape();
  std::vector<double> v = t.to_vector();
  const int64_t limit = 6;  // elements shown at each end of a long dimension
  std::ostringstream body;
  body << std::setprecision(t.dtype() == Dtype::f32 ? 6 : t.dtype() == Dtype::f64 ? 10 : 19);
  if (s.empty()) {
    body << v[0];
    return os << body.str();
  }
  // Nested brackets, one level per dimension, walked with an explicit stack
  // of indices: a tensor may have as many dimensions as memory allows, far
  // more than a recursive walk's stack could take.
  const size_t nd = s.size();
  // idx[k]: the index being printed at open level k; base[k]: the flat
  // index of level k's first element.
  std::vector<int64_t> idx(nd, 0), base(nd, 0);
  size_t d = 0;
  body << '[';
  while (true) {
    const int64_t n = s[d];
    if (idx[d] < n) {
      if (n > 2 * limit && idx[d] == limit) {
        body << "..., ";
        idx[d] = n - limit;
      } else if (idx[d] > 0) {
        body << (d + 1 == nd ? ", " : ",\n" + std::string(d + 1, ' '));
      }
      if (d + 1 == nd) {
        body << v[base[d] + idx[d]];
        ++idx[d];
      } else {
        base[d + 1] = (base[d] + idx[d]) * s[d + 1];
        idx[++d] = 0;
        body << '[';
      }
      continue;
    }
    body << ']';
    if (d == 0) break;
    ++idx[--d];
  }
  return os << body.str();
}

std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  size_t bytes = a.numel() * dtype_size(a.dtype());
  if (bytes == 0) return true;
  return std::memcmp(a.impl()->buf->raw(), b.impl()->buf->raw(), bytes) == 0;
}

// ---- method shorthands ----------------------------------------------------------

Tensor Tensor::reshape(const Shape& s) const { return xg::reshape(*this, s); }
Tensor Tensor::permute(const std::vector<int64_t>& p) const { return xg::permute(*this, p); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return xg::transpose(*this, a, b); }
Tensor Tensor::unsqueeze(int64_t a) const { return xg::unsqueeze(*this, a); }
Tensor Tensor::squeeze(int64_t a) const { return xg::squeeze(*this, a); }
Tensor Tensor::sum(const std::vector<int64_t>& axes, bool keepdims) const { return xg::sum(*this, axes, keepdims); }
Tensor Tensor::mean(const std::vector<int64_t>& axes, bool keepdims) const { return xg::mean(*this, axes, keepdims); }

}  // namespace xg
