// matmul and linear on the matrix engine (engine/gemm.h: oneDNN or OpenBLAS
// for float32, OpenBLAS for float64). Transposed operands are passed as
// transposed forms, never copied. A batched matmul whose batch items lie at
// regular strides is one engine call per thread (a batch dimension on oneDNN).
// Under Autocast(bf16), float32 products convert their operands to bf16 and
// accumulate in float32 (autograd/autocast.h); the same code runs both, with
// In = float, double or bf16_t the stored type of the operands.
#include <algorithm>
#include <mutex>

#include "autograd/autocast.h"
#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"
#include "engine/gemm.h"

namespace xg {

using engine::bf16_t;

std::shared_ptr<const Bf16Buffer> to_bf16(const Tensor& t, int* block) {
  auto out = std::make_shared<Bf16Buffer>(t.numel());
  const detail::StoredView v = block ? detail::stored_view(t) : detail::StoredView{};
  if (block) *block = v.block;
  const float* x = block ? v.p : t.data<float>();
  uint16_t* y = out->data();
  parallel_for(t.numel(), 2, [=](int64_t i0, int64_t i1) { engine::to_bf16(x + i0, y + i0, i1 - i0); });
  return out;
}

bool autocast_bf16(const Tensor& t) { return autocast_precision() == Precision::bf16 && t.dtype() == Dtype::f32; }

namespace {
std::mutex bf16_copies;  // guards Buffer::bf16_copy, bf16_version and bf16_block
}  // namespace

std::shared_ptr<const Bf16Buffer> saved_bf16(const Tensor& t, int* block) {
  Buffer& buf = *t.impl()->buf;
  const uint64_t version = buf.version.load();
  // A copy in another layout than the one asked for (the values' own when
  // `block` is given, row-major otherwise) is not reused.
  const int layout = block ? detail::channel_block(t) : 0;
  {
    std::lock_guard<std::mutex> lock(bf16_copies);
    if (buf.bf16_version == version && buf.bf16_block == layout)
      if (auto kept = buf.bf16_copy.lock()) {
        if (block) *block = layout;
        return std::static_pointer_cast<const Bf16Buffer>(kept);
      }
  }
  int copied = 0;  // the layout copied: layout, unless another thread converted t since
  auto copy = to_bf16(t, block ? &copied : nullptr);
  if (block) *block = copied;
  std::lock_guard<std::mutex> lock(bf16_copies);
  buf.bf16_copy = copy;
  buf.bf16_version = version;
  buf.bf16_block = copied;
  return copy;
}

namespace {

// One engine call, for each stored operand type (bf16 accumulates into float).
template <class T>
void engine_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                 T beta, T* c, int64_t ldc, const T* bias) {
  engine::gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc, bias);
}
void engine_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bf16_t* a, int64_t lda, const bf16_t* b,
                 int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  engine::gemm_bf16(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, bias);
}
template <class T>
void engine_batched(const engine::Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a,
                    int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  engine::gemm_batched(bt, ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}
void engine_batched(const engine::Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bf16_t* a,
                    int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  engine::gemm_bf16_batched(bt, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

// C (m,n) = op(A) op(B) + beta C (+ bias, n values added to every row, with
// beta 0), split across the thread pool into blocks of
// rows of C when A is the larger operand (m >= n), else of columns: each
// thread packs its share of the larger operand and all of the smaller one.
// (Splitting a 64x512 by 512x512 product by rows made both threads pack all
// of B: a quarter of decoding's time went to that packing.) Each block is one
// single-threaded engine call; every element of C is computed by the same
// kernel over the same k order whatever the split.
template <class In, class Out>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const In* a, int64_t lda, const In* b, int64_t ldb,
          Out beta, Out* c, int64_t ldc, const Out* bias = nullptr) {
  constexpr int64_t kUnit = 16;  // split on multiples of the kernels' register blocks
  const bool by_rows = m >= n;
  const int64_t units = ((by_rows ? m : n) + kUnit - 1) / kUnit;
  parallel_for(units, 2 * kUnit * (by_rows ? n : m) * k, [=](int64_t u0, int64_t u1) {
    if (by_rows) {
      const int64_t i0 = u0 * kUnit, i1 = std::min(m, u1 * kUnit);
      engine_gemm(ta, tb, i1 - i0, n, k, ta ? a + i0 : a + i0 * lda, lda, b, ldb, beta, c + i0 * ldc, ldc, bias);
    } else {
      const int64_t j0 = u0 * kUnit, j1 = std::min(n, u1 * kUnit);
      engine_gemm(ta, tb, m, j1 - j0, k, a, lda, tb ? b + j0 * ldb : b + j0, ldb, beta, c + j0, ldc,
                  bias ? bias + j0 : nullptr);
    }
  });
}

// The step between consecutive batch items if `str` is linear in the flat
// batch index (every item `size` apart, or 0 when broadcast), else -1.
int64_t linear_step(const Shape& batch, const std::vector<int64_t>& str, int64_t size) {
  if (std::all_of(str.begin(), str.end(), [](int64_t s) { return s == 0; })) return 0;
  auto contiguous = contiguous_strides(batch);
  for (size_t i = 0; i < str.size(); ++i)
    if (batch[i] != 1 && str[i] != contiguous[i] * size) return -1;
  return size;
}

// C[i] (+)= op(A[ia]) op(B[ib]) for every batch index; A, B, C row-major
// matrices; `astr`/`bstr`/`cstr` map the batch shape to matrix offsets
// (0 = broadcast).
template <class In, class Out>
void batched_gemm(const Shape& batch, const std::vector<int64_t>& astr, const std::vector<int64_t>& bstr,
                  const std::vector<int64_t>& cstr, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const In* A,
                  int64_t lda, const In* B, int64_t ldb, Out* C, bool accumulate) {
  const Out beta = accumulate ? Out(1) : Out(0);
  const int64_t count = shape_numel(batch);
  const int64_t sa = linear_step(batch, astr, m * k), sb = linear_step(batch, bstr, k * n),
                sc = linear_step(batch, cstr, m * n);
  if (count > 1 && count >= num_threads() && sa >= 0 && sb >= 0 && sc > 0) {
    // One engine call (a batch dimension on oneDNN) per thread's share of the items.
    parallel_for(count, 2 * m * n * k, [=](int64_t i0, int64_t i1) {
      engine_batched(engine::Batch::flat(i1 - i0, sa, sb, sc), ta, tb, m, n, k, A + i0 * sa, lda, B + i0 * sb, ldb,
                     beta, C + i0 * sc, n);
    });
    return;
  }
  // Otherwise (a few large products, or C broadcast in a gradient, where the
  // items accumulate into one matrix): one product after another, each split
  // across the pool when large enough.
  detail::for_each_strided<3>(batch, {&astr, &bstr, &cstr}, [&](int64_t, const std::array<int64_t, 3>& off) {
    gemm(ta, tb, m, n, k, A + off[0], lda, B + off[1], ldb, beta, C + off[2], n);
  });
}

std::vector<int64_t> scaled(std::vector<int64_t> s, int64_t f) {
  for (auto& x : s) x *= f;
  return s;
}

// Matmul's forward and backward products over operands of stored type In
// (float, double, or bf16 under autocast) and results of type Out.
struct MatmulPlan {
  Shape batch;
  std::vector<int64_t> astr, bstr, cstr;
  int64_t m, n, k;
  template <class In, class Out>
  void forward(const In* a, const In* b, Out* out) const {
    batched_gemm<In, Out>(batch, astr, bstr, cstr, false, false, m, n, k, a, k, b, n, out, false);
  }
  // dA = g Bᵀ (M,N)x(N,K), dB = Aᵀ g (K,M)x(M,N); where an operand was
  // broadcast over the batch, gemm accumulates (beta = 1) into one slice.
  // A null ga or gb is a gradient no one needs: not computed.
  template <class In, class Out>
  void backward(const In* a, const In* b, const In* g, Out* ga, Out* gb) const {
    if (ga) batched_gemm<In, Out>(batch, cstr, bstr, astr, false, true, m, k, n, g, n, b, n, ga, true);
    if (gb) batched_gemm<In, Out>(batch, astr, cstr, bstr, true, false, k, n, m, a, k, g, n, gb, true);
  }
};

// The plan of matmul(a, b), its arguments checked: the broadcast batch
// shape, each operand's matrix offsets over it, and m, n, k.
MatmulPlan plan_matmul(const Tensor& a, const Tensor& b) {
  check_defined(a, "matmul");
  check_defined(b, "matmul");
  if (a.dim() < 2 || b.dim() < 2)
    throw ShapeError("matmul: expected tensors of at least 2 dimensions, got " + shape_str(a.shape()) + " and " +
                     shape_str(b.shape()));
  detail::check_same_dtype(a, b, "matmul");
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2)
    throw ShapeError("matmul: cannot multiply " + shape_str(a.shape()) + " by " + shape_str(b.shape()) +
                     ": inner dimensions " + std::to_string(k) + " != " + std::to_string(k2));
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  MatmulPlan pl;
  try {
    pl.batch = detail::broadcast_shapes(ab, bb, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError("matmul: cannot multiply " + shape_str(a.shape()) + " by " + shape_str(b.shape()) +
                     ": batch dimensions " + shape_str(ab) + " and " + shape_str(bb) + " do not broadcast");
  }
  pl.astr = scaled(detail::broadcast_strides(ab, pl.batch), m * k);
  pl.bstr = scaled(detail::broadcast_strides(bb, pl.batch), k * n);
  pl.cstr = scaled(contiguous_strides(pl.batch), m * n);
  pl.m = m;
  pl.n = n;
  pl.k = k;
  return pl;
}

}  // namespace

void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                   int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
                   const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

// An op under Autocast(bf16) that saved only bf16 copies of its inputs.
void throw_bf16_second_order(const char* op) {
  throw std::logic_error(std::string(op) +
                         ": a gradient of a gradient (create_graph) through an op run under "
                         "Autocast(bf16) is not supported (it saved bf16 copies only); run the model in float32 "
                         "or float64 for second order");
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  MatmulPlan pl = plan_matmul(a, b);
  const int64_t m = pl.m, n = pl.n;
  Shape out_shape = pl.batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = make_tensor(out_shape, a.dtype());
  if (autocast_bf16(a)) {
    auto a16 = saved_bf16(a), b16 = saved_bf16(b);
    pl.forward(a16->data(), b16->data(), out.data<float>());
    // Saved as bf16 copies: a later write to a or b cannot reach them.
    return record("matmul", out, {a, b}, [a16, b16, pl, as = a.shape(), bs = b.shape()](const Tensor& g) {
      if (grad_enabled()) throw_bf16_second_order("matmul");
      Tensor ga = needs_input_grad(0) ? zeros(as, f32) : Tensor(), gb = needs_input_grad(1) ? zeros(bs, f32) : Tensor();
      pl.backward(a16->data(), b16->data(), to_bf16(g)->data(), data_or_null<float>(ga),
                  data_or_null<float>(gb));
      return std::vector<Tensor>{ga, gb};
    });
  }
  dispatch(a.dtype(), [&](auto z) {
    using T = decltype(z);
    pl.forward(a.data<T>(), b.data<T>(), out.data<T>());
  });
  return record(
      "matmul", out, {a, b},
      [a, b, pl](const Tensor& g) {
        if (grad_enabled()) {  // second order: the same products as ops
          Tensor ga, gb;
          if (needs_input_grad(0)) ga = detail::unbroadcast(matmul(g, transpose(b, -1, -2)), a.shape());
          if (needs_input_grad(1)) gb = detail::unbroadcast(matmul(transpose(a, -1, -2), g), b.shape());
          return std::vector<Tensor>{ga, gb};
        }
        Tensor ga = needs_input_grad(0) ? zeros(a.shape(), a.dtype()) : Tensor();
        Tensor gb = needs_input_grad(1) ? zeros(b.shape(), b.dtype()) : Tensor();
        dispatch(a.dtype(), [&](auto z) {
          using T = decltype(z);
          pl.backward(a.data<T>(), b.data<T>(), g.data<T>(), data_or_null<T>(ga),
                      data_or_null<T>(gb));
        });
        return std::vector<Tensor>{ga, gb};
      },
      {a, b});
}

namespace {

// linear's products: y (rows,O) = x (rows,I) Wᵀ (+ b); dx = g W; dW = gᵀ x.
struct LinearPlan {
  int64_t rows, in, out_f;
  template <class In, class Out>
  void forward(const In* x, const In* w, const Out* b, Out* y) const {
    gemm<In, Out>(false, true, rows, out_f, in, x, in, w, in, Out(0), y, out_f, b);
  }
  // gx_add: gx already holds a gradient, which dx is added to (beta 1).
  template <class In, class Out>
  void backward(const In* x, const In* w, const In* g, Out* gx, Out* gw, bool gx_add = false) const {
    if (gx) gemm<In, Out>(false, false, rows, in, out_f, g, out_f, w, in, Out(gx_add ? 1 : 0), gx, in);
    if (gw) gemm<In, Out>(true, false, out_f, in, rows, g, out_f, x, in, Out(0), gw, in);
  }
};

// g's bf16 copy, for the backward products under Autocast(bf16), and, when
// gb is not null, g's column sums added into it (the bias gradient, as
// bias_grad sums it): one pass over g, each row summed while in cache.
std::shared_ptr<const Bf16Buffer> bf16_and_column_sums(const Tensor& g, int64_t rows, int64_t out_f, float* gb) {
  if (!gb) return to_bf16(g);
  auto out = std::make_shared<Bf16Buffer>(g.numel());
  const float* pg = g.data<float>();
  uint16_t* p16 = out->data();
  detail::row_sums<float>(rows, out_f, gb, [=](int64_t r, float* acc) {
    const float* row = pg + r * out_f;
    engine::to_bf16(row, p16 + r * out_f, out_f);
    for (int64_t j = 0; j < out_f; ++j) acc[j] += row[j];
  });
  return out;
}

// Linear's first-order backward by blocks of kLinearRows rows of g, in
// float32 or under Autocast(bf16) (In = bf16_t: x and w are bf16 copies). Under
// Autocast each block of g is converted to bf16 into a scratch that stays in
// cache, so g's bf16 copy never goes to memory. Each block's column sums are
// added into the bias gradient, and both products read the block while it is
// in cache: dx of the block's rows, and the block's share of dW added into
// its part's partial. Each of `parts` (one per thread) sums its own run of
// blocks; partials are added in part order, as row_sums does.
//
// Used with two threads or more, when every thread gets at least one block
// and dW's float32 partial fits in a quarter of a 1 MiB L2 (in x out <= 64k),
// since each block reads and writes that partial again. There the whole
// products made each thread read all of one operand, and the threads share
// the memory's bandwidth: the ViT's layers (128 wide) gain. The Transformers'
// 512 x 2048 layers ran slower by blocks than as whole products, and one
// thread measured the same either way (docs/performance.md, "Linear's
// backward by blocks of rows"). Otherwise: one whole product per gradient,
// split across the pool.
constexpr int64_t kLinearRows = 256;
bool linear_by_blocks(const LinearPlan& pl) {
  return num_threads() >= 2 && pl.rows >= kLinearRows * num_threads() && pl.in > 0 && pl.out_f > 0 &&
         pl.in * pl.out_f <= (int64_t(1) << 16);
}

template <class In>
void linear_backward_blocks(const LinearPlan& pl, const float* g, const In* x, const In* w, float* gx, bool gx_add,
                            float* gw, float* gb) {
  constexpr bool narrow = std::is_same_v<In, bf16_t>;
  const int64_t R = pl.rows, I = pl.in, O = pl.out_f;
  const int64_t blocks = (R + kLinearRows - 1) / kLinearRows;
  const int64_t parts = std::min<int64_t>(num_threads(), blocks);
  // Parts after the first sum into partials; the first writes gw and gb.
  std::vector<float> pw(gw ? static_cast<size_t>((parts - 1) * O * I) : 0),
      pb(gb ? static_cast<size_t>((parts - 1) * O) : 0, 0.0f);
  const int64_t flops = 2 * R * I * O * ((gx ? 1 : 0) + (gw ? 1 : 0));
  parallel_for(parts, flops / parts + 1, [&](int64_t p0, int64_t p1) {
    Scratch<In> g16(narrow ? kLinearRows * O : 0);
    for (int64_t p = p0; p < p1; ++p) {
      float* dw = gw ? (p == 0 ? gw : pw.data() + (p - 1) * O * I) : nullptr;
      float* db = gb ? (p == 0 ? gb : pb.data() + (p - 1) * O) : nullptr;
      const int64_t b0 = blocks * p / parts, b1 = blocks * (p + 1) / parts;
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t r0 = blk * kLinearRows, n = std::min(kLinearRows, R - r0);
        for (int64_t r = 0; r < n; ++r) {
          const float* row = g + (r0 + r) * O;
          if constexpr (narrow) engine::to_bf16(row, g16.data() + r * O, O);
          if (db)
            for (int64_t j = 0; j < O; ++j) db[j] += row[j];
        }
        const In* gblk;  // the block as the products read it
        if constexpr (narrow)
          gblk = g16.data();
        else
          gblk = g + r0 * O;
        const float* no_bias = nullptr;
        if (gx) engine_gemm(false, false, n, I, O, gblk, O, w, I, gx_add ? 1.0f : 0.0f, gx + r0 * I, I, no_bias);
        if (dw) engine_gemm(true, false, O, I, n, gblk, O, x + r0 * I, I, blk == b0 ? 0.0f : 1.0f, dw, I, no_bias);
      }
    }
  });
  for (int64_t p = 1; p < parts; ++p) {
    if (gw) {
      const float* src = pw.data() + (p - 1) * O * I;
      for (int64_t i = 0; i < O * I; ++i) gw[i] += src[i];
    }
    if (gb)
      for (int64_t j = 0; j < O; ++j) gb[j] += pb[static_cast<size_t>((p - 1) * O + j)];
  }
}

// Linear's first-order backward under Autocast(bf16), run inside its
// backward function: g (rows,O), x's bf16 copy, w itself (converted again
// here), x's shape xs. dx is added into x's waiting gradient when it has one.
std::vector<Tensor> linear_backward_bf16(const LinearPlan& pl, const Tensor& g, const bf16_t* x16, const Tensor& w,
                                         const Shape& xs, bool has_b) {
  Tensor gx = needs_input_grad(0) ? detail::accumulating_grad(0) : Tensor();
  const bool gx_add = gx.defined();
  if (needs_input_grad(0) && !gx_add) gx = make_tensor(xs, f32);
  Tensor gw = needs_input_grad(1) ? make_tensor(w.shape(), f32) : Tensor();
  Tensor gb = has_b && needs_input_grad(2) ? zeros({pl.out_f}, f32) : Tensor();
  const auto w16 = needs_input_grad(0) ? to_bf16(w) : nullptr;
  const bf16_t* pw16 = w16 ? w16->data() : nullptr;
  if (linear_by_blocks(pl)) {
    linear_backward_blocks(pl, g.data<float>(), x16, pw16, data_or_null<float>(gx), gx_add, data_or_null<float>(gw),
                           data_or_null<float>(gb));
  } else {
    const auto g16 = bf16_and_column_sums(g, pl.rows, pl.out_f, data_or_null<float>(gb));
    pl.backward(x16, pw16, g16->data(), data_or_null<float>(gx), data_or_null<float>(gw), gx_add);
  }
  return std::vector<Tensor>{gx, gw, gb};
}

// db = column sums of g (rows,O), in g's own precision.
Tensor bias_grad(const Tensor& g, int64_t rows, int64_t out_f) {
  Tensor gb = zeros({out_f}, g.dtype());
  dispatch(g.dtype(), [&](auto z) {
    using T = decltype(z);
    const T* pg = g.data<T>();
    detail::column_sums<T>(rows, out_f, gb.data<T>(), [=](int64_t r, int64_t o) { return pg[r * out_f + o]; });
  });
  return gb;
}

// The plan of linear(x, w, b), its arguments checked.
LinearPlan plan_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined(x, "linear");
  check_defined(w, "linear");
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1))
    throw ShapeError("linear: input " + shape_str(x.shape()) + " does not fit weight " + shape_str(w.shape()) +
                     ": expected input (..., " + std::to_string(w.dim() == 2 ? w.size(1) : -1) +
                     ") and weight (out, in)");
  detail::check_same_dtype(x, w, "linear");
  const int64_t in = w.size(1), out_f = w.size(0), rows = x.numel() / std::max<int64_t>(in, 1);
  if (b.defined()) {
    detail::check_same_dtype(x, b, "linear");
    if (b.dim() != 1 || b.size(0) != out_f)
      throw ShapeError("linear: bias " + shape_str(b.shape()) + " does not fit weight " + shape_str(w.shape()) +
                       ": expected (" + std::to_string(out_f) + ",)");
  }
  return LinearPlan{rows, in, out_f};
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const LinearPlan pl = plan_linear(x, w, b);
  Shape out_shape = x.shape();
  out_shape.back() = pl.out_f;
  Tensor out = make_tensor(out_shape, x.dtype());
  if (autocast_bf16(x)) {
    // The input is saved as its bf16 copy (half the bytes); the weight, a
    // parameter that outlives the step anyway, is saved as itself and
    // converted again in backward (a copy kept from forward to backward
    // would add 2 bytes per parameter to the peak).
    auto x16 = saved_bf16(x);
    pl.forward(x16->data(), to_bf16(w)->data(), data_or_null<float>(b), out.data<float>());
    return record(
        "linear", out, {x, w, b},
        [x16, w = w.detach(), pl, xs = x.shape(), has_b = b.defined()](const Tensor& g) {
          if (grad_enabled()) throw_bf16_second_order("linear");
          return linear_backward_bf16(pl, g, x16->data(), w, xs, has_b);
        },
        {w});
  }
  dispatch(x.dtype(), [&](auto z) {
    using T = decltype(z);
    pl.forward(x.data<T>(), w.data<T>(), data_or_null<T>(b), out.data<T>());
  });
  return record(
      "linear", out, {x, w, b},
      [x, w, pl, has_b = b.defined()](const Tensor& g) {
        if (grad_enabled()) {  // second order: the same products as ops
          const Tensor g2 = reshape(g, {pl.rows, pl.out_f});
          Tensor gx, gw, gb;
          if (needs_input_grad(0)) gx = reshape(matmul(g2, w), x.shape());
          if (needs_input_grad(1)) gw = matmul(transpose(g2, 0, 1), reshape(x, {pl.rows, pl.in}));
          if (has_b && needs_input_grad(2)) gb = sum(g2, {0});
          return std::vector<Tensor>{gx, gw, gb};
        }
        // dx added into the gradient already waiting for x, when there is one
        // that may be (the q, k and v projections of one input, a residual).
        Tensor gx = needs_input_grad(0) ? detail::accumulating_grad(0) : Tensor();
        const bool gx_add = gx.defined();
        if (needs_input_grad(0) && !gx_add) gx = make_tensor(x.shape(), x.dtype());
        Tensor gw = needs_input_grad(1) ? make_tensor(w.shape(), w.dtype()) : Tensor();
        if (x.dtype() == f32 && linear_by_blocks(pl)) {
          Tensor gb = has_b && needs_input_grad(2) ? zeros({pl.out_f}, f32) : Tensor();
          linear_backward_blocks<float>(pl, g.data<float>(), x.data<float>(), w.data<float>(), data_or_null<float>(gx),
                                        gx_add, data_or_null<float>(gw), data_or_null<float>(gb));
          return std::vector<Tensor>{gx, gw, gb};
        }
        dispatch(x.dtype(), [&](auto z) {
          using T = decltype(z);
          pl.backward(x.data<T>(), w.data<T>(), g.data<T>(), data_or_null<T>(gx),
                      data_or_null<T>(gw), gx_add);
        });
        return std::vector<Tensor>{gx, gw, has_b && needs_input_grad(2) ? bias_grad(g, pl.rows, pl.out_f) : Tensor()};
      },
      {x, w});
}

}  // namespace xg
