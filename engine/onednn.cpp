// The oneDNN build (the default): float32 and bf16 products on oneDNN's
// matmul primitive, single-threaded on the calling thread (xgrad's pool does
// the splitting; see "Threads" in docs/performance.md). Primitives are created once per
// shape and kept in a cache per thread. Each thread has one scratchpad of
// its own, grown to the largest any of its primitives asks for: a thread runs
// one product at a time, so its primitives can share it (one scratchpad per
// primitive grows with the shapes cached: see docs/performance.md, section
// Matrix engine). The engine, streams, scratchpads and cache are shared with
// the convolution primitives (engine/detail/onednn.h).
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/blas.h"
#include "engine/detail/cpu.h"
#include "engine/gemm.h"
#include "engine/detail/onednn.h"

namespace xg::engine {

namespace {

using dt = dnnl::memory::data_type;
using onednn::Cache;
using onednn::cpu;
using onednn::OneOmpThread;
using onednn::thread_scratchpad;
using onednn::thread_stream;

struct Key {
  dt in;
  bool ta, tb, accumulate, bias;
  int64_t m, n, k, lda, ldb, ldc;
  Batch batch;
  float alpha;
};

struct Entry {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias, scratch;  // scratch: over the thread's shared scratchpad
  size_t scratch_size = 0;
};

// (rows, cols) matrices, n0 x n1 of them at strides s0, s1 (a stride of 0:
// one matrix repeated along that dimension, given as a dimension of 1, which
// oneDNN broadcasts), stored transposed when t, with row stride ld.
dnnl::memory::desc matrix(dt type, int64_t n0, int64_t n1, int64_t rows, int64_t cols, bool t, int64_t ld, int64_t s0,
                          int64_t s1) {
  const int64_t size = (t ? cols : rows) * ld;  // a stride for dimensions of 1 (any value would do)
  const dnnl::memory::dims dims{s0 == 0 ? 1 : n0, s1 == 0 ? 1 : n1, rows, cols};
  const dnnl::memory::dim b0 = s0 == 0 ? size : s0, b1 = s1 == 0 ? size : s1;
  return dnnl::memory::desc(dims, type, t ? dnnl::memory::dims{b0, b1, 1, ld} : dnnl::memory::dims{b0, b1, ld, 1});
}

Entry make_entry(const Key& key) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const Batch& bt = key.batch;
  auto a = matrix(key.in, bt.n0, bt.n1, key.m, key.k, key.ta, key.lda, bt.sa0, bt.sa1);
  auto b = matrix(key.in, bt.n0, bt.n1, key.k, key.n, key.tb, key.ldb, bt.sb0, bt.sb1);
  auto c = matrix(dt::f32, bt.n0, bt.n1, key.m, key.n, false, key.ldc, bt.sc0, bt.sc1);
  // One row of n values, broadcast over the rows and the products.
  const dnnl::memory::desc bias({1, 1, 1, key.n}, dt::f32, dnnl::memory::dims{key.n, key.n, key.n, 1});
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(key.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c), attr,
                                      cpu());
  } catch (const dnnl::error& e) {
    throw std::runtime_error(fmt::format("oneDNN matmul: no implementation for {}x{} x {}x{} by {}x{} ({}): {}",
                                         bt.n0, bt.n1, key.m, key.k, key.k, key.n,
                                         key.in == dt::bf16 ? "bf16" : "f32", e.what()));
  }
  Entry e;
  e.prim = dnnl::matmul(pd);
  e.a = dnnl::memory(a, cpu(), DNNL_MEMORY_NONE);
  e.b = dnnl::memory(b, cpu(), DNNL_MEMORY_NONE);
  e.c = dnnl::memory(c, cpu(), DNNL_MEMORY_NONE);
  if (key.bias) e.bias = dnnl::memory(bias, cpu(), DNNL_MEMORY_NONE);
  e.scratch_size = pd.scratchpad_desc().get_size();
  e.scratch = dnnl::memory(pd.scratchpad_desc(), cpu(), DNNL_MEMORY_NONE);
  return e;
}

Cache<Key, Entry>& cache() {
  thread_local Cache<Key, Entry> c;
  return c;
}

void run(dt in, Batch bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
         const void* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr) {
  if (m == 0 || n == 0 || bt.n0 <= 0 || bt.n1 <= 0) return;
  blas::check_beta(beta, bias != nullptr, alpha);
  if (k == 0) {  // an empty sum: C = beta C, plus the bias
    if (beta == 0.0f)
      for (int64_t i = 0; i < bt.n0; ++i)
        for (int64_t j = 0; j < bt.n1; ++j) {
          float* cij = c + i * bt.sc0 + j * bt.sc1;
          if (bias)
            blas::fill_rows(bias, m, n, cij, ldc);
          else
            for (int64_t r = 0; r < m; ++r) std::memset(cij + r * ldc, 0, static_cast<size_t>(n) * sizeof(float));
        }
    return;
  }
  // One key per product set, whichever way it came: a lone level is the
  // inner one, and a level of one product has no strides.
  if (bt.n1 == 1) {
    std::swap(bt.n0, bt.n1);
    std::swap(bt.sa0, bt.sa1);
    std::swap(bt.sb0, bt.sb1);
    std::swap(bt.sc0, bt.sc1);
  }
  if (bt.n0 == 1) bt.sa0 = bt.sb0 = bt.sc0 = 0;
  if (bt.n1 == 1) bt.sa1 = bt.sb1 = bt.sc1 = 0;
  Key key{};  // zeroed, padding included: the key is hashed bytewise
  key.in = in;
  key.ta = ta;
  key.tb = tb;
  key.accumulate = beta != 0.0f;
  key.bias = bias != nullptr;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.batch = bt;
  key.alpha = alpha;
  OneOmpThread one;
  Entry& e = cache().get(key, make_entry);
  e.scratch.set_data_handle(thread_scratchpad(e.scratch_size));
  e.a.set_data_handle(const_cast<void*>(a));
  e.b.set_data_handle(const_cast<void*>(b));
  e.c.set_data_handle(c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}, {DNNL_ARG_SCRATCHPAD, e.scratch}};
  if (bias) {
    e.bias.set_data_handle(const_cast<float*>(bias));
    args[DNNL_ARG_BIAS] = e.bias;
  }
  e.prim.execute(thread_stream(), args);
}

}  // namespace

// On CPUs without AVX-512, oneDNN 2.6 runs some large A^T B products (weight
// gradients) at half its A B rate, where OpenBLAS does not slow down; on
// small ones oneDNN stays ahead (docs/performance.md, section Matrix engine).
// So there, A^T B products of at least 2^25 multiply-adds go to OpenBLAS.
constexpr int64_t kLargeTransposedA = int64_t{1} << 25;
static bool transposed_a_on_blas() { return !cpu_features().avx512f; }

// Float32 products of fewer multiply-adds than blas::kSmallProduct go to
// OpenBLAS, unless its kernels lack FMA on an FMA CPU (blas::generic_core());
// an empty C (m * n == 0) always does.
static bool small_on_blas(int64_t madds, int64_t mn) {
  return madds < blas::kSmallProduct && (!blas::generic_core() || mn == 0);
}

std::string f32_engine() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}{}", v->major, v->minor, v->patch,
                     transposed_a_on_blas() ? " (large A^T B on OpenBLAS: no AVX-512)" : "");
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  if (small_on_blas(m * n * k, m * n) || (ta && m * n * k >= kLargeTransposedA && transposed_a_on_blas()))
    return blas::gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
  run(dt::f32, Batch{}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

void gemm_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (batch.n0 <= 0 || batch.n1 <= 0) return;
  if (small_on_blas(m * n * k * batch.n0 * batch.n1, m * n))
    return blas::gemm_batched<float>(batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  run(dt::f32, batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string bf16_unsupported_reason() {
  static const std::string reason = [] {
    if (!cpu_features().avx512f)
      return std::string(
          "bf16 products need a CPU with AVX-512 and AVX512_BF16 (or AMX); this CPU has no AVX-512, so oneDNN "
          "would emulate bf16 slower than float32: use float32");
    if (!cpu_features().avx512bf16)
      return std::string(
          "bf16 products need a CPU with AVX512_BF16 (or AMX); this CPU has AVX-512 but not AVX512_BF16, so "
          "oneDNN would emulate bf16 at about float32's speed: use float32");
    return std::string();
  }();
  return reason;
}

void gemm_bf16_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       const float* bias) {
  if (const std::string why = bf16_refusal(); !why.empty()) throw std::runtime_error(why);
  if (bf16_route() == Bf16Route::widened)
    return blas::gemm_bf16_widened(batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
  run(dt::bf16, batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

CacheStats cache_stats() {
  return {static_cast<int64_t>(cache().size() + onednn::conv_cached()), onednn::created().load(),
          static_cast<int64_t>(onednn::thread_scratchpad_size())};
}

namespace onednn {

dnnl::engine& cpu() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu());
  return s;
}

namespace {
// On 64-byte boundaries, as oneDNN allocates its own memory: some kernels
// store into the buffers placed here with instructions that fault on anything
// less (oneDNN 2.6's Winograd weight gradient writes its result with
// non-temporal 64-byte stores).
struct Scratchpad {
  std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
  size_t size = 0;
};
Scratchpad& scratchpad() {
  thread_local Scratchpad s;
  return s;
}
}  // namespace

char* thread_scratchpad(size_t bytes) {
  Scratchpad& s = scratchpad();
  if (s.size < bytes + 1) {  // + 1: a valid pointer for an empty scratchpad too
    const size_t size = (bytes + 1 + 63) / 64 * 64;
    s.data.reset();
    s.size = 0;
    char* p = static_cast<char*>(std::aligned_alloc(64, size));
    if (p == nullptr) throw std::bad_alloc();
    s.data.reset(p);
    s.size = size;
  }
  return s.data.get();
}

size_t thread_scratchpad_size() { return scratchpad().size; }

std::atomic<int64_t>& created() {
  static std::atomic<int64_t> n{0};
  return n;
}

}  // namespace onednn

}  // namespace xg::engine
