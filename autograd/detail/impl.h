// Private to autograd/*.cpp: the tensor's storage and the tape's node.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "autograd/autograd.h"
#include "autograd/tensor.h"
#include "autograd/trace.h"

namespace xg {

// Storage blocks come from the caching allocator (allocator.cpp): `bytes` is
// the block's size class, at least what was asked for.
struct Block {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* span = nullptr;  // the allocator's record of a large block
};
Block storage_alloc(size_t bytes);  // 64-byte aligned; throws std::bad_alloc
void storage_free(Block b);         // back to the cache (or the system past the limit)
struct CacheCounters {
  int64_t cached_bytes, limit, hits, misses;
};
CacheCounters cache_counters();

void count_storage(int64_t bytes);  // memory_stats(): + on allocation, - on release
// In-place writes through the API, process-wide: every version bump counts
// one, after it. A graph whose nodes were all recorded after the last of
// them cannot hold a saved tensor whose version changed (Node::writes).
void count_in_place_write();

// The values: one flat contiguous array of `dtype`, shared by tensors that are
// reshapes or detached copies of each other. Its version counts the in-place
// writes made through xgrad's API; backward compares it with the version a
// saved tensor had when its op ran.
struct Buffer {
  Dtype dtype;
  int64_t bytes;
  Block block;                  // storage from the cache, or
  std::shared_ptr<void> owner;  // storage that belongs to someone else (from_blob)
  void* ptr;
  std::atomic<uint64_t> version{0};
  // The bf16 copy that ops saved for backward under Autocast(bf16)
  // (saved_bf16()), while one of them keeps it, the version it copied, and
  // the layout it copied them in (channel_block's value then).
  std::weak_ptr<const void> bf16_copy;
  uint64_t bf16_version = 0;
  int bf16_block = 0;
  Buffer(Dtype dt, int64_t n)
      : dtype(dt), bytes(n * dtype_size(dt)), block(storage_alloc(static_cast<size_t>(bytes))),
        ptr(block.ptr) {
    count_storage(bytes);
  }
  Buffer(Dtype dt, int64_t n, void* p, std::shared_ptr<void> keep)
      : dtype(dt), bytes(n * dtype_size(dt)), owner(std::move(keep)), ptr(p) {
    count_storage(bytes);
  }
  ~Buffer() {
    count_storage(-bytes);
    storage_free(block);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // Float32 activations that a convolution left in oneDNN's blocked layout
  // nChw{channel_block}c (engine/conv.h) over the (N,C,H,W) blocked_shape; 0
  // when the values are plain row-major. raw(), and so data<T>(), converts
  // them to row-major in place first (once: a buffer never goes back to
  // blocked, so a pointer from data<T>() stays valid); ops that know the
  // layout read them as they are (detail::stored_view).
  std::atomic<int> channel_block{0};
  Shape blocked_shape;
  // While blocked: the blocked values' storage (ptr points into it, block is
  // empty), shared with the readers that hold a detail::StoredView of it, so
  // that another thread's conversion to row-major frees it only after them.
  std::shared_ptr<void> blocked;
  // Taken by unblock() and detail::stored_view(): one conversion at a time
  // (the loser finds it done), and the layout, ptr and `blocked` read together.
  std::mutex layout_lock;
  void* raw() {
    if (channel_block.load(std::memory_order_acquire) != 0) unblock();
    return ptr;
  }
  void unblock();
};

// Uninitialised memory for a kernel's scratch or a value saved beside the
// tensors, from the caching allocator (a std::vector would zero it, and glibc
// would map and unmap a large one on every call). Counted in memory_stats()
// while alive.
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : bytes_(n * static_cast<int64_t>(sizeof(T))), block_(n > 0 ? storage_alloc(static_cast<size_t>(bytes_)) : Block{}) {
    count_storage(bytes_);
  }
  ~Scratch() {
    count_storage(-bytes_);
    storage_free(block_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return static_cast<T*>(block_.ptr); }
  const T* data() const { return static_cast<const T*>(block_.ptr); }

 private:
  int64_t bytes_;
  Block block_;
};

// A bf16 copy of a float32 tensor's values, saved for backward by the
// products that run under Autocast(bf16); counted in memory_stats().
using Bf16Buffer = Scratch<uint16_t>;
// Converts (round to nearest even) across the thread pool. With `block` not
// null, the values in the layout t keeps them in (detail::stored_view), without
// converting t to row-major first, and *block gets that layout (0: row-major).
std::shared_ptr<const Bf16Buffer> to_bf16(const Tensor& t, int* block = nullptr);
// The bf16 copy of a float32 tensor that an op saves for backward: the same
// copy for every op that saves the same values (the three projections of
// self-attention, every layer's projections of the encoder's memory), made
// once and kept while one of them keeps it. A write to the tensor through
// xgrad (a new version) makes the next call copy again. With `block` not
// null, the copy holds the values as stored (as to_bf16's) and *block gets
// their layout, 0 for row-major.
std::shared_ptr<const Bf16Buffer> saved_bf16(const Tensor& t, int* block = nullptr);
// True for a float32 tensor inside an Autocast(bf16) scope: what products
// run in bf16 and what ops may save bf16 copies of.
bool autocast_bf16(const Tensor& t);
// Whether record() would put an op with these inputs on the tape: grad mode
// is on and one of them is a leaf that requires grad or an op's output on it.
bool records(const std::vector<Tensor>& inputs);
// Throws std::logic_error: `op` ran under Autocast(bf16) and saved bf16
// copies only, so a backward with create_graph cannot differentiate it.
[[noreturn]] void throw_bf16_second_order(const char* op);

// C (m,n) = op(A) op(B) + beta C across the thread pool (blocks of rows of C,
// or of columns when n > m), one single-threaded engine call per block; the
// bf16 form accumulates into float32. What matmul and linear run on.
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc);
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                   int64_t ldb, double beta, double* c, int64_t ldc);
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
                   const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);

struct TensorImpl {
  Shape shape;
  Dtype dtype;
  std::shared_ptr<Buffer> buf;
  bool requires_grad = false;
  Tensor grad;                         // leaves only
  std::shared_ptr<Node> grad_fn;       // set on op outputs that are on the tape
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that accumulates into `grad`
  // Leaves: called after each backward() that reaches them, once `grad` holds
  // every contribution of that backward (Tensor::add_post_accumulate_grad_hook).
  std::vector<std::pair<int64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
};

// One recorded op. `next[i]` is the node producing input i's gradient path
// (the op that made it, or a leaf's accumulator), null if none.
// A tensor an op saved for backward, and the version its storage had then.
// Only the error message needs to know which tensor it was: `which` is the
// input's index, kSavedOutput, or kSavedOther - k for the k-th saved tensor,
// whose shape is kept only when it is not an input's (those are in the node).
struct SavedVersion {
  static constexpr int64_t kSavedOutput = -1, kSavedOther = -2;
  std::shared_ptr<Buffer> buf;
  uint64_t version;
  int64_t which;
  Shape shape;
};

struct Node : std::enable_shared_from_this<Node> {
  std::string op;
  std::string scope;  // module path when recorded in anomaly mode
  uint64_t seq = 0;  // creation order: a node is always created after its inputs' nodes
  std::vector<std::shared_ptr<Node>> next;
  std::vector<Shape> input_shapes;
  std::vector<Dtype> input_dtypes;
  BackwardFn fn;
  std::vector<SavedVersion> saved;
  std::shared_ptr<TensorImpl> leaf;  // accumulator nodes only
  bool released = false;
  // The in-place writes counted (count_in_place_write) when the oldest
  // node of this one's history, accumulators aside, was recorded: while the
  // count is still that, no tensor the history saved has been modified.
  uint64_t writes = 0;
  Node();
  ~Node();  // iterative: a 1M-node chain must not overflow the stack
};

// Second order, for backward formulas (autograd.cpp). Outside a backward
// with create_graph (grad mode off) each returns its argument detached, so
// the first-order path is unchanged.
namespace detail {
// The mean cross-entropy of logits (..., V), classes last, one target per
// row (ignore_index rows count for nothing; all ignored: 0), label smoothing
// e: the fused op behind cross_entropy and linear_cross_entropy's second order.
Tensor cross_entropy_rows(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index,
                          double label_smoothing);
// The op's own output, linked to the node whose backward runs: what a
// formula reading its output (exp, tanh, softmax) differentiates through.
Tensor saved_output(const Tensor& out);
// `values` (of input i's shape) with input i's gradient edge: for a formula
// that saved a transform of its input rather than the input itself.
Tensor input_with_values(size_t i, const Tensor& values);
// An identity op: its own gradient edge to t.
Tensor alias(const Tensor& t);
// Flat indices: out.flat[j] = x.flat[idx[j]] (take) and its adjoint,
// zeros(shape) with g.flat[j] added at idx[j] (put_add); each the other's
// backward. The second order of max, gather_rows and index_select.
using Index = std::shared_ptr<const std::vector<int64_t>>;
Tensor take(const Tensor& x, const Index& idx, const Shape& shape);
Tensor put_add(const Tensor& g, const Index& idx, const Shape& shape);
// dropout() with its mask's key given: element i kept where the hash of
// (i, key) says so. Attention's dropout uses the same hash.
Tensor dropout_keyed(const Tensor& x, double p, uint64_t key);
// Inside a backward with create_graph: the vector-Jacobian product of
// `composed` (the op written with differentiable ops) at `inputs` against g,
// differentiable in turn. The fused ops' second order. Gradients are
// returned for the inputs asked for (needs_input_grad), and they depend on
// every input that has a gradient edge, asked for or not.
std::vector<Tensor> vjp_by_recompute(const std::function<Tensor(const std::vector<Tensor>&)>& composed,
                                     const std::vector<Tensor>& inputs, const Tensor& g);
}  // namespace detail

namespace detail {
// The export trace of this thread (TraceGuard), null when none is alive.
extern thread_local std::vector<TracedOp>* g_trace;
// An op's attributes for the export trace: `fill(TracedOp&)` runs only while
// a trace is alive and only if the last op listed is the one that returned
// `out` (an op that returned its input unchanged, as reshape to the same
// shape does, listed nothing). Outside a trace it costs one test.
template <class F>
Tensor traced(Tensor out, F&& fill) {
  if (g_trace && !g_trace->empty() && g_trace->back().output.impl() == out.impl()) fill(g_trace->back());
  return out;
}
}  // namespace detail

// Any dtype: ops that only move values (reshape, slice, concat, ...).
inline const Tensor& check_defined_any(const Tensor& t, const char* op) {
  if (!t.defined()) throw ShapeError(std::string(op) + ": input tensor is undefined");
  return t;
}

[[noreturn]] void throw_int64_input(const Tensor& t, const char* op);

// Ops that compute on floats: an int64 input is an error naming the op.
inline const Tensor& check_defined(const Tensor& t, const char* op) {
  check_defined_any(t, op);
  if (t.dtype() == Dtype::i64) throw_int64_input(t, op);
  return t;
}

// Calls f(T{}) with T = float or double for the dtype (an int64 tensor that
// got this far, past check_defined, throws).
template <class F>
decltype(auto) dispatch(Dtype d, F&& f) {
  if (d == Dtype::f32) return f(float{});
  if (d == Dtype::i64)
    throw ShapeError("an int64 tensor was given to an op that computes on float32 or float64 values "
                     "(int64 tensors hold ids and targets; convert with .to(xg::f32))");
  return f(double{});
}

// The same with T = int64_t too, for code that only copies values.
template <class F>
decltype(auto) dispatch_any(Dtype d, F&& f) {
  if (d == Dtype::f32) return f(float{});
  if (d == Dtype::i64) return f(int64_t{});
  return f(double{});
}

Tensor make_tensor(const Shape& s, Dtype d);  // uninitialised, no history

// t's values, or null when t is undefined (an optional bias, a gradient no
// input needs): what the kernels take for "none".
template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

namespace detail {
// The block b when t's values are in nChw{b}c (Buffer::channel_block) and t
// has the shape they were stored as (not a reshaped view); else 0. Another
// thread may convert t to row-major right after: a kernel reads the values
// through stored_view, which gives the layout and the pointer together.
int channel_block(const Tensor& t);
// An uninitialised float32 (N,C,H,W) tensor stored in nChw{block}c.
Tensor make_blocked(const Shape& s, int block);
// t's float32 values as they are stored, read together with their layout,
// for kernels that treat both layouts alike: p points at nChw{block}c values
// when block != 0 (block is channel_block(t)), else at row-major ones (t
// converted first when it is blocked under another shape); p is null for
// other dtypes. While the view lives, p stays valid and its values unchanged
// even if another thread converts t to row-major (data<T>()) meanwhile: the
// blocked storage is freed with the last of its views.
struct StoredView {
  float* p = nullptr;
  int block = 0;
  std::shared_ptr<void> keep;  // the blocked storage, while block != 0
};
StoredView stored_view(const Tensor& t);
// A copy of a plain float32 (N,C,H,W) t stored in nChw{block}c.
Tensor blocked_copy(const Tensor& t, int block);
// The float32 (N,C,H,W) t's values in nChw{block}c, block != 0: as stored
// when they are in it, else a blocked copy made into `copy`, which the
// caller keeps alive while it reads the view. Kernels that read two tensors
// alike (an elementwise op's operands, batch norm's input and gradient) take
// the second in the first one's block this way, so that the result stays
// blocked where converting the blocked one would leave it row-major.
StoredView stored_in_block(const Tensor& t, int block, Tensor& copy);
}  // namespace detail
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op);
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace xg

namespace xg::detail {

// Whether this CPU has AVX-512 (F, DQ, BW and VL): then float32 elementwise
// loops run a copy of themselves compiled for it (16 floats a vector where
// the build's x86-64-v3 gives 8). Arithmetic-bound kernels (erf, exp, tanh)
// take half the time; the results are the same, bit for bit.
bool avx512_loops();

#if defined(__GNUC__) && defined(__x86_64__)
#define XG_AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
#else
#define XG_AVX512_TARGET
#endif

template <class F>
XG_AVX512_TARGET void for_range_avx512(int64_t i0, int64_t i1, const F& body) {
  for (int64_t i = i0; i < i1; ++i) body(i);
}
template <class F>
void for_range_plain(int64_t i0, int64_t i1, const F& body) {
  for (int64_t i = i0; i < i1; ++i) body(i);
}
// body(i) for i in [i0, i1): the AVX-512 copy where avx512_loops().
template <class F>
void elementwise_range(int64_t i0, int64_t i1, const F& body) {
  if (avx512_loops())
    for_range_avx512(i0, i1, body);
  else
    for_range_plain(i0, i1, body);
}

// y[k] = e^(x[k] - mx) for k in [0, n) on softmax_exp (detail/kernels.h:
// 0 below -87), on elementwise_range (the AVX-512 copy where the CPU has it:
// the same values, bit for bit); returns their sum. y may be x. The float32
// rows of softmax, log_softmax, cross_entropy and the attention core.
float softmax_exp_sum(const float* x, float* y, int64_t n, float mx);
// Where the CPU has AVX-512 and 1 <= n <= 64: each of the rows of n at P
// (rows n apart) becomes its softmax in place, the same values bit for bit
// as row_max, softmax_exp_sum and the scaling by 1 / sum give there, in one
// pass in registers, a few rows side by side; with stat, row i's max and
// 1 / sum go to stat[2i] and stat[2i + 1]. Returns true. Otherwise does
// nothing and returns false.
bool softmax_short_rows_in_place(float* P, int64_t rows, int64_t n, float* stat);

// out[i] = f(a[i]) with no tape: for backward formulas and masks.
// A blocked float32 a (channel_block) gives a blocked result.
template <class F>
Tensor map(const Tensor& a, F f) {
  const StoredView va = stored_view(a);
  const int block = va.block;
  Tensor out = block ? make_blocked(a.shape(), block) : make_tensor(a.shape(), a.dtype());
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* p = block ? reinterpret_cast<const T*>(va.p) : a.data<T>();
    T* q = block ? reinterpret_cast<T*>(stored_view(out).p) : out.data<T>();
    parallel_for(a.numel(), 4, [=](int64_t i0, int64_t i1) {
      const auto fl = f;  // a local copy: f's captured scalars could alias q[i]
      if constexpr (std::is_same_v<T, float>)
        elementwise_range(i0, i1, [=](int64_t i) { q[i] = fl(p[i]); });
      else
        for (int64_t i = i0; i < i1; ++i) q[i] = fl(p[i]);
    });
  });
  return out;
}

// Sums g over the dimensions that broadcasting added or stretched, so that
// the result has `shape`. Every broadcasting op's backward goes through here.
Tensor unbroadcast(const Tensor& g, const Shape& shape);

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

// Whether acc may be written in place with no one else seeing the change:
// grad mode is off (nothing records the write), no other tensor, view or
// saved copy holds acc's values, they are xgrad's own storage (not a
// from_blob), and no graph has recorded acc.
bool writable_alone(const Tensor& acc);
// acc += g in place, and true, when writable_alone(acc) and acc is float32
// or float64 of g's shape, dtype and layout (row-major, or the same channel
// block). Otherwise false, changing nothing. Backward's accumulation of
// gradients tries it before add(), as PyTorch's AccumulateGrad adds in
// place when it can: it spares a new tensor and a pass of writes.
bool add_in_place(Tensor& acc, const Tensor& g);
// In a backward formula run by backward(): the gradient already waiting for
// input i, when the formula may add its own into it (writable_alone, plain
// layout, input i's shape and dtype, no other edge of this node leading to
// the same input, anomaly mode off), else an undefined tensor. A formula
// given one must return it holding the sum (a product with beta 1, or dx
// rows added after rounding); the walk then adds nothing more.
Tensor accumulating_grad(size_t i);

// The cross-entropy losses' label_smoothing: a number in [0, 1] (NaN is
// refused too, since it would turn every loss into NaN), else a ShapeError
// naming `op`.
void check_label_smoothing(double label_smoothing, const char* op);

}  // namespace xg::detail
