// The fused attention op: against its composition from primitives (values and
// gradients, with masks, causality and dropout), by finite differences, its
// errors, and the same results at one and at two threads.
#include <cmath>

#include "tests/helpers.h"

using namespace xg;
using xgt::check_close;
using xgt::leaf;
using xgt::values_and_grads;
using V = std::vector<Tensor>;

namespace {

constexpr int64_t B = 2, T = 3, S = 4, H = 2, D = 3, C = H * D;

// (B,S): row 0 hides key 2, row 1 hides every key (uniform weights, no NaN).
Tensor padding_mask() { return from_vector({0, 0, 1, 0, 1, 1, 1, 1}, {B, S}, f64); }

// The same attention from matmul, masked_fill, softmax, dropout and permutes.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, double p,
                Generator* g) {
  const int64_t t = q.size(1), s = k.size(1);
  Tensor qh = q.reshape({B, t, H, D}).permute({0, 2, 1, 3});  // (B,H,T,D)
  Tensor kh = k.reshape({B, s, H, D}).permute({0, 2, 3, 1});  // (B,H,D,S)
  Tensor vh = v.reshape({B, s, H, D}).permute({0, 2, 1, 3});  // (B,H,S,D)
  Tensor scores = matmul(qh, kh) * (1.0 / std::sqrt(double(D)));
  if (mask.defined()) scores = masked_fill(scores, mask.reshape({B, 1, 1, s}), -1e9);
  if (causal) {
    std::vector<double> future(static_cast<size_t>(t * s));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < s; ++j) future[static_cast<size_t>(i * s + j)] = j > i ? 1.0 : 0.0;
    scores = masked_fill(scores, from_vector(future, {t, s}, f64), -1e9);
  }
  Tensor w = softmax(scores, -1);
  if (p > 0) w = dropout(w, p, true, *g);
  return matmul(w, vh).permute({0, 2, 1, 3}).reshape({B, t, C});
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, double p,
             Generator* g, Tensor* weights = nullptr) {
  AttentionOptions o;
  o.heads = H;
  o.key_padding_mask = mask;
  o.causal = causal;
  o.dropout = p;
  o.gen = g;
  o.weights = weights;
  return attention(q, k, v, o);
}

}  // namespace

TEST_CASE("attention: equals its composition from primitives, with masks, causality and dropout") {
  Tensor q = leaf({B, T, C}, 1), k = leaf({B, S, C}, 2), v = leaf({B, S, C}, 3);
  const V in{q, k, v};
  for (bool causal : {false, true})
    for (bool masked : {false, true})
      for (double p : {0.0, 0.4}) {
        CAPTURE(causal);
        CAPTURE(masked);
        CAPTURE(p);
        Tensor m = masked ? padding_mask() : Tensor();
        // Both draw one key from a fresh generator and hash the same (B,H,T,S) index.
        auto a = values_and_grads(
            [&](const V& x) {
              Generator g(7);
              return fused(x[0], x[1], x[2], m, causal, p, &g);
            },
            in);
        auto b = values_and_grads(
            [&](const V& x) {
              Generator g(7);
              return composed(x[0], x[1], x[2], m, causal, p, &g);
            },
            in);
        check_close(a, b, 1e-9);
      }
}

TEST_CASE("attention: at 1 and 2 threads it equals its composition, at any length") {
  // Lengths that fill 4-row tiles, leave remainder rows, or are a single
  // row (incremental decoding); key counts below, at and above a vector.
  xgt::ThreadsGuard guard;
  for (int threads : {1, 2})
    for (int64_t t : {1, 3, 6, 9})
      for (int64_t s : {1, 5, 16})
        for (bool causal : {false, true}) {
          CAPTURE(threads);
          CAPTURE(t);
          CAPTURE(s);
          CAPTURE(causal);
          set_num_threads(threads);
          const V in{leaf({B, t, C}, 30 + t), leaf({B, s, C}, 40 + s), leaf({B, s, C}, 50 + s)};
          auto a = values_and_grads(
              [&](const V& x) {
                Generator g(7);
                return fused(x[0], x[1], x[2], Tensor(), causal, 0.2, &g);
              },
              in);
          auto b = values_and_grads(
              [&](const V& x) {
                Generator g(7);
                return composed(x[0], x[1], x[2], Tensor(), causal, 0.2, &g);
              },
              in);
          check_close(a, b, 1e-9);
        }
}

TEST_CASE("attention: float32 on the matrix engine's batched products equals float64, at 1 and 2 threads") {
  // Big enough for oneDNN (each thread's products exceed 48^3 multiply-adds),
  // with 3 x 3 heads so that 2 threads split a batch row between them.
  xgt::ThreadsGuard guard;
  const int64_t b = 3, h = 3, t = 33, s = 40, d = 32, c = h * d;
  std::vector<double> hidden(static_cast<size_t>(b * s));  // 3 keys in 10 hidden
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = (i * 7) % 10 < 3 ? 1.0 : 0.0;
  const Tensor mask = from_vector(hidden, {b, s}, f64);
  for (int threads : {1, 2})
    for (int variant = 0; variant < 3; ++variant) {  // plain; padding mask + dropout; causal + dropout
      CAPTURE(threads);
      CAPTURE(variant);
      set_num_threads(threads);
      auto run = [&](Dtype dt) {
        const V in{leaf({b, t, c}, 11).detach().to(dt).requires_grad_(),
                   leaf({b, s, c}, 12).detach().to(dt).requires_grad_(),
                   leaf({b, s, c}, 13).detach().to(dt).requires_grad_()};
        return values_and_grads(
            [&](const V& x) {
              Generator g(9);
              AttentionOptions o;
              o.heads = h;
              if (variant == 1) o.key_padding_mask = mask;
              o.causal = variant == 2;
              o.dropout = variant == 0 ? 0.0 : 0.25;
              o.gen = &g;
              return attention(x[0], x[1], x[2], o).to(f64);
            },
            in);
      };
      auto lo = run(f32), hi = run(f64);
      for (size_t i = 0; i < hi.size(); ++i) {
        CAPTURE(i);
        auto a = lo[i].to_vector(), r = hi[i].to_vector();
        double err = 0, scale = 0;
        for (size_t j = 0; j < r.size(); ++j) {
          err = std::max(err, std::abs(a[j] - r[j]));
          scale = std::max(scale, std::abs(r[j]));
        }
        CHECK(scale > 0);
        CHECK(err <= 2e-5 * scale);
      }
    }
}

TEST_CASE("attention: finite-difference gradients") {
  Tensor q = leaf({B, T, C}, 4), k = leaf({B, S, C}, 5), v = leaf({B, S, C}, 6);
  Tensor m = from_vector({0, 0, 1, 0, 0, 1, 0, 0}, {B, S}, f64);
  XG_CHECK_GRAD([&](const V& x) { return fused(x[0], x[1], x[2], Tensor(), false, 0.0, nullptr); }, q, k, v);
  XG_CHECK_GRAD([&](const V& x) { return fused(x[0], x[1], x[2], m, true, 0.0, nullptr); }, q, k, v);
  XG_CHECK_GRAD(
      [&](const V& x) {
        Generator g(11);  // the same dropout mask at every evaluation
        return fused(x[0], x[1], x[2], m, false, 0.3, &g);
      },
      q, k, v);
  // Self-attention: one tensor as query, key and value.
  Tensor x = leaf({B, S, C}, 8);
  XG_CHECK_GRAD([&](const V& in) { return fused(in[0], in[0], in[0], Tensor(), true, 0.0, nullptr); }, x);
}

TEST_CASE("attention: the weights it reports are the softmax rows") {
  Tensor q = leaf({B, T, C}, 1), k = leaf({B, S, C}, 2), v = leaf({B, S, C}, 3);
  Tensor w;
  fused(q, k, v, padding_mask(), true, 0.0, nullptr, &w);
  REQUIRE(w.shape() == Shape{B, H, T, S});
  CHECK_FALSE(w.requires_grad());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      double total = 0;
      for (int64_t j = 0; j < S; ++j) total += w.at({0, h, i, j});
      CHECK(total == doctest::Approx(1.0));
      CHECK(w.at({0, h, i, 2}) == 0.0);                                   // padded key
      for (int64_t j = i + 1; j < S; ++j) CHECK(w.at({0, h, i, j}) == 0.0);  // future key
      CHECK(w.at({1, h, i, 0}) == doctest::Approx(0.25));                   // all masked: uniform
    }
}

TEST_CASE("attention: scores far below the masking value still give finite weights, at 1 and 2 threads") {
  // Every score near -2e9 (below the -1e9 that masked scores get), no mask:
  // the softmax must still be the softmax of the scores, not 0/0.
  xgt::ThreadsGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor q = full({1, 2, 2}, 1.0, f64), k = full({1, 3, 2}, -1e9, f64), v = leaf({1, 3, 2}, 9);
    k.set({0, 1, 0}, -1e9 + 1);  // key 1 scores highest
    AttentionOptions o;
    o.heads = 1;
    o.scale = 1.0;
    Tensor w;
    o.weights = &w;
    Tensor out = attention(q, k, v, o);
    for (double x : out.to_vector()) CHECK(std::isfinite(x));
    CHECK(w.at({0, 0, 0, 1}) == doctest::Approx(1.0 / (1.0 + 2.0 * std::exp(-1.0))));
  }
}

TEST_CASE("attention: softmax subtracts each row's largest score wherever it lies, so a spread of 200 stays finite") {
  // Query i scores 200 on key i and 0 elsewhere, over 40 keys (full vector
  // blocks and a remainder): e^200 overflows float32, so a row whose
  // subtracted maximum missed key i would be inf / inf. Each output row is
  // then value row i, and the gradients are finite.
  constexpr int64_t n = 40;
  for (Dtype dt : {f32, f64}) {
    CAPTURE(std::string(dtype_name(dt)));
    std::vector<double> diagonal(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) diagonal[static_cast<size_t>(i * n + i)] = 1.0;
    Tensor k = from_vector(diagonal, {1, n, n}, dt), q = (k * 200.0).detach().requires_grad_();
    Generator g(5);
    Tensor v = randn({1, n, n}, g, dt).requires_grad_();
    AttentionOptions o;
    o.heads = 1;
    o.scale = 1.0;
    Tensor out = attention(q, k, v, o);
    const std::vector<double> got = out.to_vector(), want = v.to_vector();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
    sum(out * out).backward();
    for (double x : q.grad().to_vector()) CHECK(std::isfinite(x));
    for (double x : v.grad().to_vector()) CHECK(std::isfinite(x));
  }
}

TEST_CASE("attention: bad shapes and options name the op and the shapes") {
  Tensor q = leaf({B, T, C}, 1), k = leaf({B, S, C}, 2), v = leaf({B, S, C}, 3);
  AttentionOptions o;
  o.heads = 4;  // 6 does not split into 4
  std::string msg = XG_THROW_MESSAGE(attention(q, k, v, o), ShapeError);
  CHECK(xgt::contains(msg, "attention"));
  CHECK(xgt::contains(msg, "4 heads"));
  o.heads = 2;
  msg = XG_THROW_MESSAGE(attention(zeros({B, T, 0}, f64), zeros({B, S, 0}, f64), zeros({B, S, 0}, f64), o),
                         ShapeError);
  CHECK(xgt::contains(msg, "width C=0 does not split into 2 heads of positive width"));
  o.heads = H;
  msg = XG_THROW_MESSAGE(attention(q, k, leaf({B, S + 1, C}, 4), o), ShapeError);
  CHECK(xgt::contains(msg, "(2,5,6)"));
  msg = XG_THROW_MESSAGE(attention(q, leaf({B + 1, S, C}, 4), leaf({B + 1, S, C}, 5), o), ShapeError);
  CHECK(xgt::contains(msg, "q (2,3,6)"));
  o.key_padding_mask = zeros({B, S + 1}, f64);
  msg = XG_THROW_MESSAGE(attention(q, k, v, o), ShapeError);
  CHECK(xgt::contains(msg, "key_padding_mask (2,5)"));
  o.key_padding_mask = Tensor();
  o.dropout = 0.1;
  msg = XG_THROW_MESSAGE(attention(q, k, v, o), ShapeError);
  CHECK(xgt::contains(msg, "needs a Generator"));
  Generator g(1);
  o.gen = &g;
  o.dropout = 1.0;
  CHECK_THROWS_AS(attention(q, k, v, o), ShapeError);
  o.dropout = 0;
  CHECK_THROWS_AS(attention(q.to(f32), k, v, o), ShapeError);
}

TEST_CASE("threads: one and two threads give the same values and gradients") {
  // Large enough that GEMMs, elementwise kernels, softmax, layer_norm,
  // dropout and attention all split across the pool at 2 threads.
  xgt::ThreadsGuard guard;
  Tensor x = leaf({4, 64, 96}, 21), w = leaf({160, 96}, 22), b = leaf({160}, 23);
  Tensor lw = leaf({160}, 24), lb = leaf({160}, 25);
  auto f = [&](const V& in) {
    Generator g(5);
    Tensor h = relu(linear(in[0], in[1], in[2]));                   // (4,64,160)
    h = layer_norm(dropout(h, 0.2, true, g), in[3], in[4]);       // (4,64,160)
    AttentionOptions o;
    o.heads = 4;
    o.causal = true;
    o.dropout = 0.1;
    o.gen = &g;
    Tensor a = attention(h, h, h, o);                               // (4,64,160)
    return log_softmax(matmul(a, transpose(h, 1, 2)), -1);          // (4,64,64)
  };
  const V in{x, w, b, lw, lb};
  set_num_threads(1);
  V one = values_and_grads(f, in);
  set_num_threads(2);
  V two = values_and_grads(f, in);
  // Column sums add per-thread partials, and attention's small per-head
  // products use plain loops instead of BLAS when heads run in parallel: the
  // same sums in another order, so float64 rounding differs (measured up to
  // ~1e-11 relative here). A wrong split or a race is off by far more.
  check_close(one, two, 1e-9);
}

TEST_CASE("attention: kv_length reads the first positions of longer key/value buffers, gradients zero past them") {
  // (B,Smax,C) buffers of which 3 of 5 positions are keys, as a preallocated cache.
  Tensor q = leaf({2, 2, 8}, 71), k = leaf({2, 5, 8}, 72), v = leaf({2, 5, 8}, 73);
  AttentionOptions o;
  o.heads = 2;
  o.kv_length = 3;
  AttentionOptions plain;
  plain.heads = 2;
  auto with_length = [&](const V& x) { return attention(x[0], x[1], x[2], o); };
  auto sliced = [&](const V& x) { return attention(x[0], slice(x[1], 1, 0, 3), slice(x[2], 1, 0, 3), plain); };
  check_close(values_and_grads(with_length, {q, k, v}), values_and_grads(sliced, {q, k, v}), 1e-12);
  XG_CHECK_GRAD(with_length, q, k, v);
  o.kv_length = 6;
  CHECK_THROWS_AS(attention(q, k, v, o), ShapeError);
}

TEST_CASE("attention: rows longer than a vector, with causality, padding and a row that sees no key") {
  // S = 37 runs the softmax's vectorised reductions past several full
  // vectors and a remainder; T != S; batch row 1 hides every key.
  const int64_t t = 5, s = 37;
  std::vector<double> hidden(static_cast<size_t>(B * s), 0.0);
  for (int64_t j : {3, 20, 36}) hidden[static_cast<size_t>(j)] = 1.0;
  for (int64_t j = 0; j < s; ++j) hidden[static_cast<size_t>(s + j)] = 1.0;
  const Tensor mask = from_vector(hidden, {B, s}, f64);
  const V in{leaf({B, t, C}, 60), leaf({B, s, C}, 61), leaf({B, s, C}, 62)};
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    auto run = [&](auto attend) {
      return values_and_grads(
          [&](const V& x) {
            Generator g(9);
            return attend(x[0], x[1], x[2], mask, causal, 0.25, &g);
          },
          in);
    };
    check_close(run([](const auto&... a) { return fused(a...); }), run([](const auto&... a) { return composed(a...); }),
                1e-9);
    for (Dtype dt : {f64, f32}) {  // the recomputed weights are the forward's
      CAPTURE(std::string(dtype_name(dt)));
      const V typed{in[0].to(dt).detach().requires_grad_(), in[1].to(dt).detach().requires_grad_(),
                    in[2].to(dt).detach().requires_grad_()};
      auto with = [&](AttentionMemory memory) {
        return values_and_grads(
            [&](const V& x) {
              AttentionOptions o;
              o.heads = H;
              o.key_padding_mask = mask.to(dt);
              o.causal = causal;
              o.memory = memory;
              return attention(x[0], x[1], x[2], o);
            },
            typed);
      };
      check_close(with(AttentionMemory::recompute), with(AttentionMemory::keep_weights), dt == f64 ? 1e-13 : 1e-6);
    }
  }
}

TEST_CASE("attention: recomputing the scores in backward equals keeping the weights, values and gradients") {
  for (Dtype dt : {f64, f32}) {
    for (double p : {0.0, 0.3})
      for (bool causal : {false, true}) {
        CAPTURE(std::string(dtype_name(dt)));
        CAPTURE(p);
        CAPTURE(causal);
        Tensor q = leaf({B, T, C}, 40).to(dt).detach().requires_grad_(), k = leaf({B, S + 2, C}, 41).to(dt).detach().requires_grad_(),
               v = leaf({B, S + 2, C}, 42).to(dt).detach().requires_grad_();
        auto run = [&](AttentionMemory memory) {
          return values_and_grads(
              [&](const V& x) {
                Generator g(12);
                AttentionOptions o;
                o.heads = H;
                o.key_padding_mask = from_vector({0, 0, 1, 0, 1, 1, 1, 1}, {B, S}, dt);
                o.causal = causal;
                o.dropout = p;
                o.gen = &g;
                o.kv_length = S;  // and a cache longer than the keys
                o.memory = memory;
                return attention(x[0], x[1], x[2], o);
              },
              {q, k, v});
        };
        check_close(run(AttentionMemory::recompute), run(AttentionMemory::keep_weights), dt == f64 ? 1e-13 : 1e-6);
      }
  }
  Tensor q = leaf({B, T, C}, 43), k = leaf({B, S, C}, 44), v = leaf({B, S, C}, 45);
  XG_CHECK_GRAD(
      [&](const V& x) {
        Generator g(13);
        AttentionOptions o;
        o.heads = H;
        o.causal = true;
        o.dropout = 0.2;
        o.gen = &g;
        o.memory = AttentionMemory::recompute;
        return attention(x[0], x[1], x[2], o);
      },
      q, k, v);
}

TEST_CASE("attention: recomputing keeps memory linear in T: no (B,H,T,S) tensor outlives forward") {
  // T = S = 512, 4 heads, float32: the weights alone would be 4 MiB a batch row.
  Generator gen(14);
  const int64_t b = 2, t = 512, c = 32;
  Tensor q = randn({b, t, c}, gen).requires_grad_(), k = randn({b, t, c}, gen).requires_grad_(),
         v = randn({b, t, c}, gen).requires_grad_();
  auto saved_bytes = [&](AttentionMemory memory) {
    AttentionOptions o;
    o.heads = 4;
    o.causal = true;
    o.memory = memory;
    const int64_t before = memory_stats().current_bytes;
    Tensor y = attention(q, k, v, o);
    const int64_t kept = memory_stats().current_bytes - before - y.numel() * 4;  // beside the output
    sum(y).backward();
    return kept;
  };
  const int64_t weights = b * 4 * t * t * 4;
  CHECK(saved_bytes(AttentionMemory::keep_weights) >= weights);
  CHECK(saved_bytes(AttentionMemory::recompute) == b * 4 * t * 2 * 4);  // each row's max and 1/sum
  // automatic keeps the weights below 64 MiB.
  CHECK(saved_bytes(AttentionMemory::automatic) >= weights);
}
