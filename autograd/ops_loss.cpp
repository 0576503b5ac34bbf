// linear_cross_entropy: the output projection and cross-entropy fused, in
// chunks of rows, so that the (N,V) logits are never held whole: forward
// keeps each row's log-sum-exp, backward computes each chunk's logits again.
// Checked in tests against cross_entropy(linear(...)) and by finite
// differences.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "autograd/detail/impl.h"
#include "autograd/detail/iter.h"
#include "autograd/ops.h"
#include "engine/gemm.h"

namespace xg {

namespace detail {
void check_label_smoothing(double label_smoothing, const char* op) {
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw ShapeError(std::string(op) + ": label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
}
}  // namespace detail

namespace {

// Rows per chunk: each chunk's logits take at most this many bytes.
constexpr int64_t kChunkBytes = int64_t(4) << 20;

// What forward and backward share.
struct LossPlan {
  int64_t rows, c, v, chunk;
  std::vector<int64_t> targets;
  int64_t ignore_index, count;
  double e;  // label smoothing
  bool counted(int64_t r) const { return targets[static_cast<size_t>(r)] != ignore_index; }
};

// The operands of the products, float32 / float64 as themselves or bf16
// copies under Autocast(bf16) (accumulating into float32).
template <class In>
struct Operands {
  const In* x;  // (N,C)
  const In* w;  // (V,C)
};

// logits (n,V) of rows [r0, r0+n) = x w^T + b.
template <class In, class T>
void chunk_logits(const LossPlan& pl, const Operands<In>& op, const T* b, int64_t r0, int64_t n, T* logits) {
  threaded_gemm(false, true, n, pl.v, pl.c, op.x + r0 * pl.c, pl.c, op.w, pl.c, T(0), logits, pl.v);
  if (b)
    parallel_for(n, pl.v, [=](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j < pl.v; ++j) logits[i * pl.v + j] += b[j];
    });
}

// The loss (summed over counted rows, not yet averaged); lse[r] for every row.
template <class In, class T>
double forward_loss(const LossPlan& pl, const Operands<In>& op, const T* b, T* lse) {
  Scratch<T> logits(std::min(pl.chunk, pl.rows) * pl.v);
  std::vector<double> row_loss(static_cast<size_t>(pl.rows), 0.0);
  for (int64_t r0 = 0; r0 < pl.rows; r0 += pl.chunk) {
    const int64_t n = std::min(pl.chunk, pl.rows - r0);
    T* L = logits.data();
    chunk_logits(pl, op, b, r0, n, L);
    double* rl = row_loss.data();
    parallel_for(n, 4 * pl.v, [&, L, rl](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T* z = L + i * pl.v;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < pl.v; ++j) mx = std::max(mx, z[j]);
        T total = 0, all = 0;
        for (int64_t j = 0; j < pl.v; ++j) {
          total += std::exp(z[j] - mx);
          all += z[j];
        }
        const T l = mx + std::log(total);
        lse[r0 + i] = l;
        if (!pl.counted(r0 + i)) continue;
        // -(1-e) log p[t] - (e/V) sum_j log p[j], log p[j] = z[j] - lse
        const double logp_t = double(z[pl.targets[static_cast<size_t>(r0 + i)]]) - double(l);
        const double sum_logp = double(all) - double(pl.v) * double(l);
        rl[r0 + i] = -(1 - pl.e) * logp_t - pl.e / double(pl.v) * sum_logp;
      }
    });
  }
  double total = 0;
  for (double l : row_loss) total += l;
  return total;
}

// dx, dw, db of the mean loss times g, chunk by chunk: dlogits =
// (softmax - q) * g / count for counted rows (q = (1-e) onehot(t) + e/V),
// 0 for ignored ones.
template <class In, class T>
void backward_loss(const LossPlan& pl, const Operands<In>& op, const T* b, const T* lse, T scale, T* dx, T* dw,
                   T* db) {
  const int64_t most = std::min(pl.chunk, pl.rows);
  Scratch<T> logits(most * pl.v);
  std::unique_ptr<Scratch<In>> narrow;  // bf16: dlogits rounded for the products
  if constexpr (!std::is_same_v<In, T>) narrow = std::make_unique<Scratch<In>>(most * pl.v);
  for (int64_t r0 = 0; r0 < pl.rows; r0 += pl.chunk) {
    const int64_t n = std::min(pl.chunk, pl.rows - r0);
    T* L = logits.data();
    chunk_logits(pl, op, b, r0, n, L);
    parallel_for(n, 4 * pl.v, [&, L](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T* z = L + i * pl.v;
        if (!pl.counted(r0 + i)) {
          std::fill(z, z + pl.v, T(0));
          continue;
        }
        const T l = lse[r0 + i], smooth = T(pl.e / double(pl.v));
        for (int64_t j = 0; j < pl.v; ++j) z[j] = (std::exp(z[j] - l) - smooth) * scale;
        z[pl.targets[static_cast<size_t>(r0 + i)]] -= T(1 - pl.e) * scale;
      }
    });
    if (db) detail::column_sums<T>(n, pl.v, db, [=](int64_t r, int64_t j) { return L[r * pl.v + j]; });
    const In* D;
    if constexpr (std::is_same_v<In, T>) {
      D = L;
    } else {
      engine::to_bf16(L, narrow->data(), n * pl.v);
      D = narrow->data();
    }
    if (dx) threaded_gemm(false, false, n, pl.c, pl.v, D, pl.v, op.w, pl.c, T(0), dx + r0 * pl.c, pl.c);
    if (dw) threaded_gemm(true, false, pl.v, pl.c, n, D, pl.v, op.x + r0 * pl.c, pl.c, T(r0 == 0 ? 0 : 1), dw, pl.c);
  }
}

// The plan of a call of linear_cross_entropy, its arguments checked: the
// rows, widths and counted targets, and the rows per chunk.
LossPlan plan_loss(const Tensor& x, const Tensor& weight, const Tensor& bias, const std::vector<int64_t>& targets,
                   int64_t ignore_index, double label_smoothing) {
  const char* op = "linear_cross_entropy";
  check_defined(x, op);
  check_defined(weight, op);
  if (x.dim() < 1 || weight.dim() != 2 || x.size(-1) != weight.size(1))
    throw ShapeError(std::string(op) + ": expected x (..., C) and weight (V, C), got x " + shape_str(x.shape()) +
                     ", weight " + shape_str(weight.shape()));
  detail::check_same_dtype(x, weight, op);
  const int64_t c = x.size(-1), v = weight.size(0), rows = c ? x.numel() / c : 0;
  if (bias.defined()) {
    if (bias.shape() != Shape{v})
      throw ShapeError(std::string(op) + ": bias " + shape_str(bias.shape()) + " must be (V,) = (" +
                       std::to_string(v) + ",) for weight " + shape_str(weight.shape()));
    detail::check_same_dtype(x, bias, op);
  }
  if (v < 1) throw ShapeError(std::string(op) + ": weight " + shape_str(weight.shape()) + " has no classes");
  if (static_cast<int64_t>(targets.size()) != rows)
    throw ShapeError(std::string(op) + ": x " + shape_str(x.shape()) + " has " + std::to_string(rows) +
                     " rows but " + std::to_string(targets.size()) + " targets were given");
  detail::check_label_smoothing(label_smoothing, op);
  LossPlan pl{rows, c, v, 1, targets, ignore_index, 0, label_smoothing};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[static_cast<size_t>(r)];
    if (t == ignore_index) continue;
    if (t < 0 || t >= v)
      throw ShapeError(std::string(op) + ": target " + std::to_string(t) + " at row " + std::to_string(r) +
                       " is out of range for " + std::to_string(v) + " classes (weight " +
                       shape_str(weight.shape()) + ")");
    ++pl.count;
  }
  pl.chunk = std::max<int64_t>(1, kChunkBytes / (v * static_cast<int64_t>(dtype_size(x.dtype()))));
  return pl;
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const std::vector<int64_t>& targets, int64_t ignore_index, double label_smoothing) {
  const char* op = "linear_cross_entropy";
  LossPlan pl = plan_loss(x, weight, bias, targets, ignore_index, label_smoothing);
  Tensor lse = make_tensor({pl.rows}, x.dtype());
  const bool bf16 = autocast_bf16(x);
  std::shared_ptr<const Bf16Buffer> x16, w16;
  double total = 0;
  if (bf16) {
    x16 = saved_bf16(x);
    w16 = to_bf16(weight);
    total = forward_loss(pl, Operands<uint16_t>{x16->data(), w16->data()}, data_or_null<float>(bias),
                         lse.data<float>());
  } else {
    dispatch(x.dtype(), [&](auto z) {
      using T = decltype(z);
      total = forward_loss(pl, Operands<T>{x.data<T>(), weight.data<T>()}, data_or_null<T>(bias),
                           lse.data<T>());
    });
  }
  Tensor out = scalar(pl.count ? total / double(pl.count) : 0.0, x.dtype());
  const Tensor w = weight.detach(), b = bias.defined() ? bias.detach() : Tensor();
  if (bf16)
    return record(op, out, {x, weight, bias},
                  [pl, x16, w, b, lse, xs = x.shape()](const Tensor& g) {
                    if (grad_enabled()) throw_bf16_second_order("linear_cross_entropy");
                    Tensor dx = needs_input_grad(0) ? zeros(xs, f32) : Tensor();
                    Tensor dw = needs_input_grad(1) ? zeros(w.shape(), f32) : Tensor();
                    Tensor db = b.defined() && needs_input_grad(2) ? zeros({pl.v}, f32) : Tensor();
                    if (pl.count == 0) return std::vector<Tensor>{dx, dw, db};
                    auto w16 = to_bf16(w);
                    backward_loss(pl, Operands<uint16_t>{x16->data(), w16->data()}, data_or_null<float>(b),
                                  lse.data<float>(), float(g.item() / double(pl.count)), data_or_null<float>(dx),
                                  data_or_null<float>(dw), data_or_null<float>(db));
                    return std::vector<Tensor>{dx, dw, db};
                  },
                  {w});
  return record(op, out, {x, weight, bias},
                [pl, x, w = weight, b = bias, lse](const Tensor& g) {
                  if (grad_enabled())  // second order by recomputation from ops
                    return detail::vjp_by_recompute(
                        [pl](const std::vector<Tensor>& in) {
                          return detail::cross_entropy_rows(linear(in[0], in[1], in[2]), pl.targets, pl.ignore_index, pl.e);
                        },
                        {x, w, b}, g);
                  Tensor dx = needs_input_grad(0) ? zeros(x.shape(), x.dtype()) : Tensor();
                  Tensor dw = needs_input_grad(1) ? zeros(w.shape(), x.dtype()) : Tensor();
                  Tensor db = b.defined() && needs_input_grad(2) ? zeros({pl.v}, x.dtype()) : Tensor();
                  if (pl.count == 0) return std::vector<Tensor>{dx, dw, db};
                  dispatch(x.dtype(), [&](auto z) {
                    using T = decltype(z);
                    backward_loss(pl, Operands<T>{x.data<T>(), w.data<T>()}, data_or_null<T>(b),
                                  lse.data<T>(), T(g.item() / double(pl.count)), data_or_null<T>(dx),
                                  data_or_null<T>(dw), data_or_null<T>(db));
                  });
                  return std::vector<Tensor>{dx, dw, db};
                },
                {x, w, b});
}

}  // namespace xg
