// xg::Tensor: a contiguous row-major array (float32 or float64) with an
// optional link into the autograd tape. Light header: no xtensor here; the
// storage (an xt::xtensor<T,1>) lives behind a pointer, see detail/impl.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace xg {

enum class Dtype { f32, f64 };
inline constexpr Dtype f32 = Dtype::f32;
inline constexpr Dtype f64 = Dtype::f64;
const char* dtype_name(Dtype d);  // "float32", "float64"

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2,3)"
int64_t shape_numel(const Shape& s);

// Every shape, dtype or index error thrown by xgrad derives from
// std::invalid_argument and names the op and the shapes involved.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A seeded random source. Pass it explicitly: xgrad has no hidden global RNG.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  std::mt19937_64& engine() { return engine_; }
  double uniform(double lo = 0.0, double hi = 1.0);
  double normal(double mean = 0.0, double std = 1.0);
  std::string state() const;             // text form of the engine state
  void set_state(const std::string& s);  // throws std::invalid_argument if malformed
 private:
  std::mt19937_64 engine_;
};

struct TensorImpl;
struct Node;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (defined() == false)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const;
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const;
  Dtype dtype() const;

  // Raw contiguous data. T must match dtype() (checked, throws ShapeError).
  template <class T> T* data();
  template <class T> const T* data() const;
  double item() const;                                  // single-element tensors
  double at(std::initializer_list<int64_t> idx) const;  // bounds-checked read
  void set(std::initializer_list<int64_t> idx, double v);  // bounds-checked write (no tape)
  std::vector<double> to_vector() const;                // all elements as double

  // Autograd.
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;        // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  void zero_grad();           // drops the gradient (like set_to_none=True)
  // Runs the tape from this tensor back to the leaves, accumulating into
  // their grad(). Without an argument the tensor must hold one element.
  // Unless retain_graph, the saved values are released as backward goes.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& grad_output, bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no history
  Tensor clone() const;   // new storage, differentiable copy
  Tensor to(Dtype d) const;  // differentiable dtype conversion (a copy)
  void copy_(const Tensor& src);  // overwrite the values in place (no tape); shapes must match, dtype converts
  // Converts the values to `d` in place, so every handle to this tensor sees
  // it (how Module::to converts a model). Leaves only.
  void convert_(Dtype d);

  // Shorthands for the free functions in ops.h.
  Tensor reshape(const Shape& s) const;
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;
  Tensor sum(const std::vector<int64_t>& axes = {}, bool keepdims = false) const;
  Tensor mean(const std::vector<int64_t>& axes = {}, bool keepdims = false) const;

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Factories. dtype defaults to float32.
Tensor empty(const Shape& s, Dtype d = f32);  // uninitialised
Tensor zeros(const Shape& s, Dtype d = f32);
Tensor ones(const Shape& s, Dtype d = f32);
Tensor full(const Shape& s, double value, Dtype d = f32);
Tensor arange(int64_t n, Dtype d = f32);  // 0, 1, ..., n-1
Tensor scalar(double value, Dtype d = f32);  // shape ()
Tensor from_vector(const std::vector<float>& v, const Shape& s);
Tensor from_vector(const std::vector<double>& v, const Shape& s, Dtype d = f64);
Tensor tensor(std::initializer_list<double> v, const Shape& s, Dtype d = f32);
Tensor randn(const Shape& s, Generator& g, Dtype d = f32, double mean = 0.0, double std = 1.0);
Tensor rand(const Shape& s, Generator& g, Dtype d = f32, double lo = 0.0, double hi = 1.0);

// Printing: "tensor(shape=(2,3), dtype=float32)\n[[...]]". For fmt, include autograd/format.h.
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

// Bytes of tensor storage alive in this process (values and gradients alike;
// storage shared by views and detached copies counts once), and the most
// alive at any moment since start-up or the last reset_peak_memory(). For
// sizing a model: after a training step, peak_bytes - (parameters, gradients
// and optimiser state) is what the saved activations took.
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};
MemoryStats memory_stats();
void reset_peak_memory();  // peak_bytes = current_bytes

// Exact comparison of shape, dtype and every bit of the values.
bool bit_equal(const Tensor& a, const Tensor& b);

}  // namespace xg
