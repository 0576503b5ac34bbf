// recurrence: one direction of one recurrent layer (tanh or ReLU RNN, LSTM,
// GRU) over all T steps as one op. Forward runs one recurrent product a step
// (h W_hh^T, B rows) and the step's gates in one pass over the row; backward
// runs the steps in reverse, one product a step for the state's gradient, and
// the weight's gradient as one product over all B*T rows at the end (not T
// small ones). Under Autocast(bf16) the products take bf16 operands (the
// recurrent weight converted once a pass) and accumulate in float32; the
// gates are computed in float32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "autograd/autocast.h"
#include "autograd/detail/impl.h"
#include "autograd/detail/kernels.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "engine/gemm.h"

namespace xg {

namespace {

int64_t gate_count(RecurrentCell c) { return c == RecurrentCell::lstm ? 4 : c == RecurrentCell::gru ? 3 : 1; }
const char* cell_name(RecurrentCell c) {
  switch (c) {
    case RecurrentCell::tanh: return "tanh";
    case RecurrentCell::relu: return "relu";
    case RecurrentCell::lstm: return "lstm";
    case RecurrentCell::gru: return "gru";
  }
  return "?";
}

// float64 (the gradient checks) takes the C library's exp and tanh; float32
// the branch-free detail::fast_* forms, so that the gate loops vectorise.
template <class T>
inline T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return detail::fast_sigmoidf(x);
  else
    return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
}
template <class T>
inline T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return detail::fast_tanhf(x);
  else
    return std::tanh(x);
}

// The layout of one call: sizes, strides and which steps each row takes.
struct Recurrence {
  RecurrentCell cell;
  int64_t B, T, H, G, S, A;  // S: state width in H (2 for the LSTM: h, c); A: saved gate values per step in H
  bool reverse, bf16, has_bias;
  std::vector<int64_t> lengths;  // empty: every row takes all T steps
  int64_t step(int64_t i) const { return reverse ? T - 1 - i : i; }  // the i-th step taken
  bool active(int64_t b, int64_t t) const { return lengths.empty() || t < lengths[static_cast<size_t>(b)]; }
};

// The B rows of a (B,H) state at `p` with row stride `ld`, as contiguous bf16.
void rows_to_bf16(const float* p, int64_t ld, int64_t rows, int64_t n, uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) engine::to_bf16(p + r * ld, out + r * n, n);
}

// hh (B,G*H) = prev W_hh^T, prev's rows `ld` apart.
template <class T>
void recurrent_product(const Recurrence& r, const T* prev, int64_t ld, const T* w, const uint16_t* w16, uint16_t* h16,
                       T* hh) {
  const int64_t GH = r.G * r.H;
  if constexpr (std::is_same_v<T, float>) {
    if (r.bf16) {
      rows_to_bf16(prev, ld, r.B, r.H, h16);
      threaded_gemm(false, true, r.B, GH, r.H, h16, r.H, w16, r.H, 0.0f, hh, GH);
      return;
    }
  }
  threaded_gemm(false, true, r.B, GH, r.H, prev, ld, w, r.H, T(0), hh, GH);
}

// Every step's state into `states` and its gate values into `acts`: one
// recurrent product, then one pass over the rows, a step.
// (long: a row's gates read x, q, a, st, hprev, cprev and bias, set per step
// and row; a per-row helper would take all seven as parameters.)
template <class T>
void forward(const Recurrence& r, const T* proj, const T* w, const T* bias, const T* h0, const T* c0, T* states,
             T* acts) {
  const int64_t B = r.B, H = r.H, GH = r.G * r.H, SH = r.S * H, rs = r.T * SH;
  Scratch<T> hh(B * GH);
  std::unique_ptr<Scratch<uint16_t>> w16, h16;
  if (r.bf16) {
    w16 = std::make_unique<Scratch<uint16_t>>(GH * H);
    h16 = std::make_unique<Scratch<uint16_t>>(B * H);
    if constexpr (std::is_same_v<T, float>) engine::to_bf16(w, w16->data(), GH * H);
  }
  for (int64_t i = 0; i < r.T; ++i) {
    const int64_t t = r.step(i);
    // The state before step t: h0 (and c0), or the state after the previous step.
    const T* hp = i == 0 ? h0 : states + r.step(i - 1) * SH;
    const int64_t ld = i == 0 ? H : rs;
    const T* cp = r.cell != RecurrentCell::lstm ? nullptr : i == 0 ? c0 : states + r.step(i - 1) * SH + H;
    recurrent_product<T>(r, hp, ld, w, w16 ? w16->data() : nullptr, h16 ? h16->data() : nullptr, hh.data());
    parallel_for(B, 16 * GH, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* st = states + b * rs + t * SH;
        const T* hprev = hp + b * ld;  // may be states' own memory (the previous step): read only
        const T* cprev = cp ? cp + b * ld : nullptr;
        if (!r.active(b, t)) {  // past the row's length: the state is carried
          std::copy(hprev, hprev + H, st);
          if (cprev) std::copy(cprev, cprev + H, st + H);
          continue;
        }
        const T* x = proj + (b * r.T + t) * GH;
        T* q = hh.data() + b * GH;  // this row's recurrent products, summed in place
        T* a = acts + (b * r.T + t) * r.A * H;
        T* sh = st;
        if (bias) {
#pragma omp simd
          for (int64_t j = 0; j < GH; ++j) q[j] += bias[j];
        }
        // Every gate's pre-activation but the GRU's n, whose recurrent part r scales.
        const int64_t with_x = r.cell == RecurrentCell::gru ? 2 * H : GH;
#pragma omp simd
        for (int64_t j = 0; j < with_x; ++j) q[j] += x[j];
        switch (r.cell) {
          case RecurrentCell::tanh:
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) sh[j] = tanh_of(q[j]);
            break;
          case RecurrentCell::relu:
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) sh[j] = std::max(q[j], T(0));
            break;
          case RecurrentCell::lstm:
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T ig = sigmoid_of(q[j]), fg = sigmoid_of(q[H + j]), gg = tanh_of(q[2 * H + j]),
                      og = sigmoid_of(q[3 * H + j]);
              const T c = fg * cprev[j] + ig * gg;
              a[j] = ig;
              a[H + j] = fg;
              a[2 * H + j] = gg;
              a[3 * H + j] = og;
              sh[H + j] = c;
              sh[j] = og * tanh_of(c);
            }
            break;
          case RecurrentCell::gru:
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T rg = sigmoid_of(q[j]), zg = sigmoid_of(q[H + j]), hn = q[2 * H + j];
              const T n = tanh_of(x[2 * H + j] + rg * hn);
              a[j] = rg;
              a[H + j] = zg;
              a[2 * H + j] = n;
              a[3 * H + j] = hn;
              sh[j] = n + zg * (hprev[j] - n);
            }
            break;
        }
      }
    });
  }
}

// dh += dhh_t W_hh for the step whose rows of dhh start at `dq_t` (r.T*G*H
// apart): the gradient that reaches the state before that step.
template <class T>
void state_product(const Recurrence& r, const T* dq_t, const T* w, const uint16_t* w16, uint16_t* d16, T* dh) {
  const int64_t B = r.B, H = r.H, GH = r.G * r.H;
  if constexpr (std::is_same_v<T, float>) {
    if (r.bf16) {
      rows_to_bf16(dq_t, r.T * GH, B, GH, d16);
      threaded_gemm(false, false, B, H, GH, d16, GH, w16, H, 1.0f, dh, H);
      return;
    }
  }
  threaded_gemm(false, false, B, H, GH, dq_t, r.T * GH, w, H, T(1), dh, H);
}

// dW_hh = sum over steps of dhh_t^T prev_t: one product over all B*T rows,
// prev (B,T,H) gathered from h0 and the states; dbias (if not null) the
// column sums of dhh.
template <class T>
void weight_gradients(const Recurrence& r, const T* h0, const T* states, const T* dhh, T* dw, T* dbias) {
  const int64_t B = r.B, H = r.H, GH = r.G * r.H, SH = r.S * H, rs = r.T * SH;
  Scratch<T> prev(B * r.T * H);
  parallel_for(B, r.T * H, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t i = 0; i < r.T; ++i) {
        const T* src = i == 0 ? h0 + b * H : states + b * rs + r.step(i - 1) * SH;
        std::copy(src, src + H, prev.data() + (b * r.T + r.step(i)) * H);
      }
  });
  const int64_t rows = B * r.T;
  bool done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (r.bf16) {
      Scratch<uint16_t> q16(rows * GH), p16(rows * H);
      engine::to_bf16(dhh, q16.data(), rows * GH);
      engine::to_bf16(prev.data(), p16.data(), rows * H);
      threaded_gemm(true, false, GH, H, rows, q16.data(), GH, p16.data(), H, 0.0f, dw, H);
      done = true;
    }
  }
  if (!done) threaded_gemm(true, false, GH, H, rows, dhh, GH, prev.data(), H, T(0), dw, H);
  if (dbias) {  // column sums of dhh, row after row, in blocks of columns
    parallel_for((GH + 63) / 64, rows * 64, [&](int64_t u0, int64_t u1) {
      const int64_t j0 = u0 * 64, j1 = std::min(GH, u1 * 64);
      std::fill(dbias + j0, dbias + j1, T(0));
      for (int64_t q = 0; q < rows; ++q) {
        const T* row = dhh + q * GH;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) dbias[j] += row[j];
      }
    });
  }
}

// Gradients of forward's inputs from g (B,T,S*H). dproj (B,T,G*H) is the
// gradient of the gates' pre-activations on the input side; dhh that on the
// recurrent side (the same values but for the GRU's n gate, where r scales
// the recurrent term).
// (long: a row's gate gradients read gs, st, a, hprev, cprev, dhb, dcb, dp
// and dq, set per step and row; a per-row helper would take all nine as
// parameters, and the step's dh product follows each step's parallel_for.)
template <class T>
void backward(const Recurrence& r, const T* g, const T* w, const T* h0, const T* c0, const T* states, const T* acts,
              T* dproj, T* dhh, T* dh, T* dc, T* dw, T* dbias) {
  const int64_t B = r.B, H = r.H, GH = r.G * r.H, SH = r.S * H, rs = r.T * SH;
  const bool lstm = r.cell == RecurrentCell::lstm;
  std::fill(dh, dh + B * H, T(0));
  if (lstm) std::fill(dc, dc + B * H, T(0));
  std::unique_ptr<Scratch<uint16_t>> w16, d16;
  if (r.bf16) {
    w16 = std::make_unique<Scratch<uint16_t>>(GH * H);
    d16 = std::make_unique<Scratch<uint16_t>>(B * GH);
    if constexpr (std::is_same_v<T, float>) engine::to_bf16(w, w16->data(), GH * H);
  }
  for (int64_t i = r.T - 1; i >= 0; --i) {
    const int64_t t = r.step(i);
    const T* hp = i == 0 ? h0 : states + r.step(i - 1) * SH;
    const int64_t ld = i == 0 ? H : rs;
    const T* cp = !lstm ? nullptr : i == 0 ? c0 : states + r.step(i - 1) * SH + H;
    parallel_for(B, 16 * GH, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const T* gs = g + b * rs + t * SH;
        const T* st = states + b * rs + t * SH;
        T* dhb = dh + b * H;  // in: from the later steps; out: what reaches the earlier state directly
        T* dcb = lstm ? dc + b * H : nullptr;
        T* dp = dproj + (b * r.T + t) * GH;
        T* dq = dhh + (b * r.T + t) * GH;
        if (!r.active(b, t)) {  // the state was carried: its gradient passes through
          std::fill(dp, dp + GH, T(0));
          if (dq != dp) std::fill(dq, dq + GH, T(0));
          for (int64_t j = 0; j < H; ++j) dhb[j] += gs[j];
          if (lstm)
            for (int64_t j = 0; j < H; ++j) dcb[j] += gs[H + j];
          continue;
        }
        const T* a = acts + (b * r.T + t) * r.A * H;
        switch (r.cell) {
          case RecurrentCell::tanh:
          case RecurrentCell::relu:
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T dt = gs[j] + dhb[j], h = st[j];
              dp[j] = r.cell == RecurrentCell::tanh ? dt * (T(1) - h * h) : (h > T(0) ? dt : T(0));
              dhb[j] = 0;
            }
            break;
          case RecurrentCell::lstm: {
            const T* cprev = cp + b * ld;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T ig = a[j], fg = a[H + j], gg = a[2 * H + j], og = a[3 * H + j];
              const T tc = tanh_of(st[H + j]);
              const T dht = gs[j] + dhb[j];
              const T dct = gs[H + j] + dcb[j] + dht * og * (T(1) - tc * tc);
              dp[j] = dct * gg * ig * (T(1) - ig);
              dp[H + j] = dct * cprev[j] * fg * (T(1) - fg);
              dp[2 * H + j] = dct * ig * (T(1) - gg * gg);
              dp[3 * H + j] = dht * tc * og * (T(1) - og);
              dcb[j] = dct * fg;
              dhb[j] = 0;
            }
            break;
          }
          case RecurrentCell::gru: {
            const T* hprev = hp + b * ld;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T rg = a[j], zg = a[H + j], n = a[2 * H + j], hn = a[3 * H + j];
              const T dht = gs[j] + dhb[j];
              const T dn = dht * (T(1) - zg) * (T(1) - n * n);  // at n's pre-activation
              dp[j] = dn * hn * rg * (T(1) - rg);
              dp[H + j] = dht * (hprev[j] - n) * zg * (T(1) - zg);
              dp[2 * H + j] = dn;
              dq[j] = dp[j];
              dq[H + j] = dp[H + j];
              dq[2 * H + j] = dn * rg;
              dhb[j] = dht * zg;
            }
            break;
          }
        }
      }
    });
    // dh += dhh_t W_hh: the gradient that reaches the state before step t.
    state_product<T>(r, dhh + t * GH, w, w16 ? w16->data() : nullptr, d16 ? d16->data() : nullptr, dh);
  }
  weight_gradients<T>(r, h0, states, dhh, dw, dbias);
}

// An activation whose values forward already computed: y = f(pre) with y
// given, so pre's values are never read. Its gradient g f'(y) goes through
// y itself (sigmoid y (1 - y), tanh 1 - y^2, relu [y > 0]), so every order
// follows. The recurrence's second order is built from these.
Tensor activation_from(const char* f, const Tensor& pre, const Tensor& y) {
  return record(
      f, y.detach(), {pre},
      [f = std::string(f), y = y.detach()](const Tensor& g) {
        if (f == "relu") return std::vector<Tensor>{mul(g, detail::map(y, [](auto v) { return decltype(v)(v > 0); }))};
        const Tensor yy = detail::saved_output(y);
        return std::vector<Tensor>{mul(g, f == "tanh" ? 1.0 - mul(yy, yy) : sub(yy, mul(yy, yy)))};
      },
      {y});
}

// The recurrence from ops, step by step, for its second order. proj carries
// only its gradient edge (the op does not keep its values): every gate's
// pre-activation feeds an activation_from() holding the saved gate value,
// and everything else (the cell state, the GRU's recurrent term, the masks
// of rows past their length) is recomputed from the saved states.
Tensor composed(const Recurrence& r, const Tensor& proj, const Tensor& w, const Tensor& b, const Tensor& h0,
                const Tensor& c0, const Tensor& states, const Tensor& acts) {
  const int64_t B = r.B, H = r.H, GH = r.G * r.H;
  auto cols = [](const Tensor& t, int64_t from, int64_t to) { return slice(t, 1, from, to); };
  auto at_step = [&](const Tensor& t, int64_t s) { return reshape(slice(t, 1, s, s + 1), {B, t.size(2)}); };
  Tensor h = h0, c = c0;
  std::vector<Tensor> out(static_cast<size_t>(r.T));
  for (int64_t i = 0; i < r.T; ++i) {
    const int64_t t = r.step(i);
    Tensor active, a;  // (B,1) 1 where row b takes step t; the step's saved gate values (0 past a row's length)
    {
      NoGradGuard off;
      active = zeros({B, 1}, proj.dtype());
      for (int64_t row = 0; row < B; ++row) active.set({row, 0}, r.active(row, t) ? 1.0 : 0.0);
      a = r.A > 0 ? where(active, at_step(acts, t), zeros({B, r.A * H}, proj.dtype())) : Tensor();
      if (r.A == 0) a = where(active, cols(at_step(states, t), 0, H), zeros({B, H}, proj.dtype()));
    }
    const Tensor x = at_step(proj, t);
    const Tensor hh = linear(h, w, b);  // h W_hh^T + b_hh
    Tensor hn, cn;
    switch (r.cell) {
      case RecurrentCell::tanh:
      case RecurrentCell::relu:
        hn = activation_from(r.cell == RecurrentCell::tanh ? "tanh" : "relu", x + hh, a);
        break;
      case RecurrentCell::lstm: {
        const Tensor pre = x + hh;
        const Tensor ig = activation_from("sigmoid", cols(pre, 0, H), cols(a, 0, H));
        const Tensor fg = activation_from("sigmoid", cols(pre, H, 2 * H), cols(a, H, 2 * H));
        const Tensor gg = activation_from("tanh", cols(pre, 2 * H, 3 * H), cols(a, 2 * H, 3 * H));
        const Tensor og = activation_from("sigmoid", cols(pre, 3 * H, GH), cols(a, 3 * H, 4 * H));
        cn = fg * c + ig * gg;
        hn = og * tanh(cn);
        break;
      }
      case RecurrentCell::gru: {
        const Tensor rz = cols(x, 0, 2 * H) + cols(hh, 0, 2 * H);
        const Tensor rg = activation_from("sigmoid", cols(rz, 0, H), cols(a, 0, H));
        const Tensor zg = activation_from("sigmoid", cols(rz, H, 2 * H), cols(a, H, 2 * H));
        const Tensor n = activation_from("tanh", cols(x, 2 * H, GH) + rg * cols(hh, 2 * H, GH), cols(a, 2 * H, 3 * H));
        hn = n + zg * (h - n);
        break;
      }
    }
    if (!r.lengths.empty()) {  // a row past its length carries its state
      hn = where(active, hn, h);
      if (cn.defined()) cn = where(active, cn, c);
    }
    h = hn;
    c = cn;
    out[static_cast<size_t>(t)] = c.defined() ? concat({h, c}, 1) : h;
  }
  return stack(out, 1);
}

// The layout of a call of recurrence(), its arguments checked (errors name
// the argument, its shape and the expected one).
Recurrence layout_of(RecurrentCell cell, const Tensor& proj, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                     const Tensor& c0, const std::vector<int64_t>& lengths, bool reverse) {
  const std::string who = std::string("recurrence (") + cell_name(cell) + ")";
  check_defined(proj, who.c_str());
  check_defined(w_hh, who.c_str());
  check_defined(h0, who.c_str());
  const int64_t G = gate_count(cell);
  if (w_hh.dim() != 2 || w_hh.size(0) != G * w_hh.size(1) || w_hh.size(1) < 1)
    throw ShapeError(who + ": weight_hh of shape " + shape_str(w_hh.shape()) + ": expected (" + std::to_string(G) +
                     "*H,H)");
  const int64_t H = w_hh.size(1), GH = G * H;
  if (proj.dim() != 3 || proj.size(2) != GH || proj.size(0) < 1 || proj.size(1) < 1)
    throw ShapeError(who + ": input products of shape " + shape_str(proj.shape()) + ": expected (B,T," +
                     std::to_string(GH) + ") with B, T >= 1");
  const int64_t B = proj.size(0), T = proj.size(1);
  detail::check_same_dtype(proj, w_hh, who.c_str());
  if (b_hh.defined() && (b_hh.shape() != Shape{GH} || b_hh.dtype() != proj.dtype()))
    throw ShapeError(who + ": bias_hh of shape " + shape_str(b_hh.shape()) + ": expected (" + std::to_string(GH) +
                     ") of the input's dtype");
  auto check_state = [&](const Tensor& s, const char* name) {
    if (s.shape() != Shape{B, H} || s.dtype() != proj.dtype())
      throw ShapeError(who + ": " + name + " of shape " + shape_str(s.shape()) + ": expected (" + std::to_string(B) +
                       "," + std::to_string(H) + ") (B,H) of the input's dtype");
  };
  check_state(h0, "h0");
  if (cell == RecurrentCell::lstm) {
    if (!c0.defined()) throw std::invalid_argument(who + ": c0 is required (the LSTM's cell state)");
    check_state(c0, "c0");
  } else if (c0.defined()) {
    throw std::invalid_argument(who + ": c0 is the LSTM's cell state; this cell has none");
  }
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != B)
    throw std::invalid_argument(who + ": " + std::to_string(lengths.size()) + " lengths for " + std::to_string(B) +
                                " rows");
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 1 || lengths[b] > T)
      throw std::invalid_argument(who + ": lengths[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
                                  ": expected 1.." + std::to_string(T));

  Recurrence r;
  r.cell = cell;
  r.B = B;
  r.T = T;
  r.H = H;
  r.G = G;
  r.S = cell == RecurrentCell::lstm ? 2 : 1;
  r.A = cell == RecurrentCell::lstm || cell == RecurrentCell::gru ? 4 : 0;
  r.reverse = reverse;
  r.bf16 = autocast_precision() == Precision::bf16 && proj.dtype() == Dtype::f32;
  r.has_bias = b_hh.defined();
  r.lengths = lengths;
  return r;
}

}  // namespace

Tensor recurrence(RecurrentCell cell, const Tensor& proj, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                  const Tensor& c0, const std::vector<int64_t>& lengths, bool reverse) {
  Recurrence r = layout_of(cell, proj, w_hh, b_hh, h0, c0, lengths, reverse);
  const int64_t B = r.B, T = r.T, H = r.H;
  const Tensor states = make_tensor({B, T, r.S * H}, proj.dtype());
  const Tensor acts = make_tensor({B, T, std::max<int64_t>(r.A, 1) * H}, proj.dtype());
  dispatch(proj.dtype(), [&](auto z) {
    using V = decltype(z);
    forward<V>(r, proj.data<V>(), w_hh.data<V>(), data_or_null<V>(b_hh), h0.data<V>(),
               data_or_null<V>(c0), const_cast<Tensor&>(states).data<V>(),
               const_cast<Tensor&>(acts).data<V>());
  });
  std::vector<Tensor> saved = {w_hh, h0, states};
  if (c0.defined()) saved.push_back(c0);
  if (b_hh.defined()) saved.push_back(b_hh);  // the second order recomputes h W_hh^T + b_hh
  return record(
      "recurrence", states, {proj, w_hh, b_hh, h0, c0},
      [r, w = w_hh, b = b_hh, h0, c0, states = states.detach(), acts](const Tensor& grad) {
        if (grad_enabled()) {  // second order by recomputation from ops, through the saved gate values
          const Tensor p = detail::input_with_values(0, zeros({r.B, r.T, r.G * r.H}, grad.dtype()));
          return detail::vjp_by_recompute(
              [r, states, acts](const std::vector<Tensor>& in) {
                return composed(r, in[0], in[1], in[2], in[3], in[4], states, acts);
              },
              {p, w, b, h0, c0}, grad);
        }
        const Shape ps{r.B, r.T, r.G * r.H};
        Tensor dproj = make_tensor(ps, grad.dtype()), dw = make_tensor(w.shape(), grad.dtype());
        Tensor db = r.has_bias ? make_tensor({r.G * r.H}, grad.dtype()) : Tensor();
        Tensor dh = make_tensor({r.B, r.H}, grad.dtype());
        Tensor dc = r.cell == RecurrentCell::lstm ? make_tensor({r.B, r.H}, grad.dtype()) : Tensor();
        dispatch(grad.dtype(), [&](auto z) {
          using V = decltype(z);
          std::unique_ptr<Scratch<V>> dhh;  // the GRU's recurrent-side gradient differs from dproj
          if (r.cell == RecurrentCell::gru) dhh = std::make_unique<Scratch<V>>(r.B * r.T * r.G * r.H);
          backward<V>(r, grad.data<V>(), w.data<V>(), h0.data<V>(), data_or_null<V>(c0),
                      states.data<V>(), acts.data<V>(), dproj.data<V>(), dhh ? dhh->data() : dproj.data<V>(),
                      dh.data<V>(), data_or_null<V>(dc), dw.data<V>(),
                      data_or_null<V>(db));
        });
        return std::vector<Tensor>{dproj, dw, db, dh, dc};
      },
      saved);
}

namespace {

// (B,T,1): 1 where step t is inside row b's length, in x's dtype.
Tensor length_mask(const std::vector<int64_t>& lengths, int64_t B, int64_t T, Dtype d) {
  std::vector<double> m(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[static_cast<size_t>(b)]; ++t) m[static_cast<size_t>(b * T + t)] = 1.0;
  return from_vector(m, {B, T, 1}, d);
}

}  // namespace

RecurrentLayerResult recurrent_layer(RecurrentCell cell, const Tensor& x, const Tensor& w_ih, const Tensor& b_ih,
                                     const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0, const Tensor& c0,
                                     const std::vector<int64_t>& lengths, bool reverse, const Tensor& traced_lengths) {
  check_defined(x, "recurrent_layer");
  check_defined(w_hh, "recurrent_layer");
  if (x.dim() != 3 || w_hh.dim() != 2)
    throw ShapeError("recurrent_layer: expected an input (B,T,C) and weight_hh (G*H,H), got " +
                     shape_str(x.shape()) + " and " + shape_str(w_hh.shape()));
  const int64_t B = x.size(0), T = x.size(1), H = w_hh.size(1);
  const bool lstm = cell == RecurrentCell::lstm;
  const Tensor proj = linear(x, w_ih, b_ih);  // (B,T,G*H): every step's input product at once
  const Tensor h_start = h0.defined() ? h0 : zeros({B, H}, x.dtype());
  const Tensor c_start = !lstm ? Tensor() : c0.defined() ? c0 : zeros({B, H}, x.dtype());
  const Tensor states = recurrence(cell, proj, w_hh, b_hh, h_start, c_start, lengths, reverse);  // (B,T,S*H)
  Tensor out = lstm ? slice(states, 2, 0, H) : states;
  if (!lengths.empty()) out = mul(out, length_mask(lengths, B, T, x.dtype()));
  // The export trace's view: one op from the layer's own inputs (the lengths
  // as an int64 tensor beside them), the last states read off it.
  RecurrentLayerResult r;
  r.output = detail::traced(out, [&](TracedOp& t) {
    std::vector<Tensor> lens;
    if (!lengths.empty()) lens.push_back(traced_lengths.defined() ? traced_lengths : from_ints(lengths, {B}));
    t = TracedOp{"recurrent_layer", t.scope, {x, w_ih, w_hh, b_ih, b_hh, h0, c0}, out,
                 attr::Recurrent{static_cast<int>(cell), reverse}, lens};
  });
  const int64_t last = reverse ? 0 : T - 1;  // where the op leaves each row's last state
  const Tensor final_states = reshape(slice(states, 1, last, last + 1), {B, states.size(2)});
  auto state = [&](const Tensor& s, int64_t which) {
    return detail::traced(s, [&](TracedOp& t) { t = TracedOp{"recurrent_state", t.scope, {r.output}, s, attr::RecurrentState{which != 0}, {}}; });
  };
  r.h_n = state(lstm ? slice(final_states, 1, 0, H) : final_states, 0);
  if (lstm) r.c_n = state(slice(final_states, 1, H, 2 * H), 1);
  return r;
}

}  // namespace xg
