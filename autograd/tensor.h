// xg::Tensor: a contiguous row-major array (float32 or float64) with an
// optional link into the autograd tape. Light header: the storage lives
// behind a pointer (detail/impl.h); autograd/xtensor.h views it as xtensor.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace xg {

// float32 and float64 compute and carry gradients; int64 holds token ids and
// targets (no gradient, no arithmetic: an op that computes on floats throws
// when given one, naming the op).
enum class Dtype { f32, f64, i64 };
inline constexpr Dtype f32 = Dtype::f32;
inline constexpr Dtype f64 = Dtype::f64;
inline constexpr Dtype i64 = Dtype::i64;
const char* dtype_name(Dtype d);  // "float32", "float64", "int64"
int64_t dtype_size(Dtype d);      // bytes per element: 4, 8, 8

using Shape = std::vector<int64_t>;     // the dimensions, outermost first; () for a scalar
std::string shape_str(const Shape& s);  // "(2,3)"
int64_t shape_numel(const Shape& s);  // 0 if any dimension is 0; throws ShapeError past int64

// Every shape, dtype or index error thrown by xgrad derives from
// std::invalid_argument and names the op and the shapes involved.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A seeded random source. Pass one to a layer, an initialiser or a dropout
// to own its stream; what is given none draws from default_generator().
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}  // a mt19937_64 seeded with `seed`
  std::mt19937_64& engine() { return engine_; }              // the engine itself, for std:: distributions
  double uniform(double lo = 0.0, double hi = 1.0);    // U[lo, hi) from 53 random bits, alike on every platform
  double normal(double mean = 0.0, double std = 1.0);  // Box-Muller from two uniform() draws
  std::string state() const;             // text form of the engine state
  void set_state(const std::string& s);  // throws std::invalid_argument if malformed
 private:
  std::mt19937_64 engine_;
};

// The generator of everything given none (a layer's initial weights, a
// dropout's masks), as torch's default generator: Generator(0) until
// manual_seed. A Generator is not thread-safe: use this one from one thread at
// a time (build and train on one thread, or give each thread its own).
Generator& default_generator();
void manual_seed(uint64_t seed);  // default_generator() starts again as Generator(seed), as torch.manual_seed
// *gen, or default_generator() when gen is null: the rule of every op and
// layer whose Generator is optional.
inline Generator& generator_or_default(Generator* gen) { return gen ? *gen : default_generator(); }

struct TensorImpl;
struct Node;

// A handle to a tensor: copies share the storage and the link into the tape
// (a shared_ptr), as Python names share a torch.Tensor.
class Tensor {
 public:
  Tensor() = default;  // undefined tensor (defined() == false)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}  // for xgrad's own kernels

  bool defined() const { return impl_ != nullptr; }  // false for a default-constructed Tensor
  const Shape& shape() const;        // the dimensions, e.g. (B,T,C)
  int64_t dim() const;               // number of dimensions, 0 for a scalar
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const;             // number of elements, the product of the shape
  Dtype dtype() const;               // f32, f64 or i64

  // Raw contiguous data. T must match dtype() (checked, throws ShapeError).
  // Writing through this pointer bypasses the version counter: call
  // bump_version() after such a write if an op may have saved this tensor.
  // A convolution's float32 result that xgrad keeps in oneDNN's blocked
  // layout (engine::set_blocked_activations) is converted to row-major, in
  // place and once, by the first call; ops that read the blocked values in
  // other threads meanwhile are unaffected.
  template <class T> T* data();
  template <class T> const T* data() const;
  double item() const;                                  // single-element tensors
  double at(std::initializer_list<int64_t> idx) const;  // bounds-checked read
  void set(std::initializer_list<int64_t> idx, double v);  // bounds-checked write (no tape, bumps the version)
  std::vector<double> to_vector() const;                // all elements as double

  // Autograd.

  bool requires_grad() const;  // the flag requires_grad_() sets on a leaf (an op's output is never flagged)
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const;       // not an op's output on the tape (created, detach()ed, or made without grad)
  Tensor grad() const;        // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);  // replaces grad(); g of this shape and dtype, or undefined
  void zero_grad();           // drops the gradient (like set_to_none=True)
  // Runs the tape from this tensor back to the leaves, accumulating into
  // their grad(). Without an argument the tensor must hold one element.
  // Unless retain_graph, the saved values are released as backward goes.
  // create_graph records backward itself on the tape, so the gradients
  // accumulated into grad() can be differentiated again (it implies
  // retain_graph). xg::grad (autograd.h) returns gradients instead.
  void backward(bool retain_graph = false, bool create_graph = false) const;
  void backward(const Tensor& grad_output, bool retain_graph = false, bool create_graph = false) const;
  // Leaves: `hook(leaf)` runs during every backward() that reaches this leaf,
  // as soon as its grad() holds all of that backward's contributions (before
  // the rest of the graph is done), in the thread that runs backward. What
  // DataParallel starts its gradient exchange from. Returns an id for
  // remove_post_accumulate_grad_hook (an unknown id is ignored).
  int64_t add_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook);
  void remove_post_accumulate_grad_hook(int64_t id);
  Tensor detach() const;  // same storage, no history
  Tensor clone() const;   // new storage, differentiable copy
  Tensor to(Dtype d) const;  // differentiable dtype conversion (a copy)
  void copy_(const Tensor& src);  // overwrite the values in place (no tape, bumps the version); shapes must match, dtype converts
  // Converts the values to `d` in place, so every handle to this tensor sees
  // it (how Module::to converts a model). Leaves only.
  void convert_(Dtype d);

  // In-place writes through xgrad's API (set, copy_, fill_, convert_, the nn::init
  // functions, optimiser steps, clipping) add one to the version of the
  // storage, which views and detached copies share. An op that saves a tensor
  // for backward records its version; backward throws std::logic_error naming
  // the op if it changed since (see "Version counters" in the README).
  uint64_t version() const;
  void bump_version();                 // after writing through data<T>()
  void fill_(double value);            // every element = value (no tape, bumps the version)

  // Shorthands for the free functions in ops.h.
  Tensor reshape(const Shape& s) const;
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;
  Tensor sum(const std::vector<int64_t>& axes = {}, bool keepdims = false) const;
  Tensor mean(const std::vector<int64_t>& axes = {}, bool keepdims = false) const;

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }  // storage and tape link (detail/impl.h)

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Factories. dtype defaults to float32.
Tensor empty(const Shape& s, Dtype d = f32);  // uninitialised
Tensor zeros(const Shape& s, Dtype d = f32);
Tensor ones(const Shape& s, Dtype d = f32);
Tensor full(const Shape& s, double value, Dtype d = f32);
// Zeros or ones of t's shape and dtype (torch.zeros_like, torch.ones_like).
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(int64_t n, Dtype d = f32);  // 0, 1, ..., n-1
Tensor scalar(double value, Dtype d = f32);  // shape ()
Tensor from_vector(const std::vector<float>& v, const Shape& s);  // float32
Tensor from_vector(const std::vector<double>& v, const Shape& s, Dtype d = f64);  // float64 unless d says otherwise
Tensor tensor(std::initializer_list<double> v, const Shape& s, Dtype d = f32);
// An int64 tensor of ids or targets (torch.tensor(v, dtype=torch.long)).
Tensor from_ints(const std::vector<int64_t>& v, const Shape& s);
Tensor randn(const Shape& s, Generator& g, Dtype d = f32, double mean = 0.0, double std = 1.0);  // g.normal() each
Tensor rand(const Shape& s, Generator& g, Dtype d = f32, double lo = 0.0, double hi = 1.0);  // g.uniform() each
// A tensor over memory that xgrad does not own (no copy). `data` must be
// contiguous row-major `d` values, 64-byte alignment not required, and stay
// valid while any tensor uses it; `owner` (may be null) is kept alive for as
// long, and released with the last tensor that shares the storage.
Tensor from_blob(void* data, const Shape& s, Dtype d, std::shared_ptr<void> owner = nullptr);

// Printing: "tensor(shape=(2,3), dtype=float32)\n[[...]]". For fmt, include autograd/format.h.
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

// Bytes of tensor storage alive in this process (values and gradients alike;
// storage shared by views and detached copies counts once), and the most
// alive at any moment since start-up or the last reset_peak_memory(). For
// sizing a model: after a training step, peak_bytes - (parameters, gradients
// and optimiser state) is what the saved activations took.
// Freed storage goes back to a caching allocator and serves the next request
// it fits (at most 1/4 larger): cached_bytes are held by the process but by no
// tensor, at most the most bytes ever alive at once (and cache_limit);
// cache_hits/misses count requests.
struct MemoryStats {
  int64_t current_bytes = 0;  // alive now
  int64_t peak_bytes = 0;     // most alive at once
  int64_t cached_bytes = 0;   // freed, kept by the cache for reuse
  int64_t cache_limit = 0;    // most bytes the cache may hold (set_cache_limit)
  int64_t cache_hits = 0;     // requests served from the cache
  int64_t cache_misses = 0;   // requests that went to the system
};
MemoryStats memory_stats();  // the counters as they are now
void reset_peak_memory();  // peak_bytes = current_bytes
void empty_cache();        // returns every cached block to the system
// Most bytes the cache may hold (default 4 GiB); blocks freed beyond it go
// back to the system. 0 disables caching. Throws std::invalid_argument if < 0.
void set_cache_limit(int64_t bytes);

// Flat index of the first NaN or Inf in t, -1 if every value is finite.
int64_t first_nonfinite(const Tensor& t);

// Exact comparison of shape, dtype and every bit of the values.
bool bit_equal(const Tensor& a, const Tensor& b);

}  // namespace xg
