// Autocast(bf16): products take bf16 operands and accumulate in float32,
// forward and backward; everything else stays float32; float64 is untouched.
#include <cmath>
#include <optional>
#include <thread>

#include "engine/gemm.h"
#include "tests/helpers.h"

using namespace xg;
using V = std::vector<Tensor>;

namespace {

// The values of t rounded to bf16 (a float32 tensor without history).
Tensor rounded(const Tensor& t) {
  Tensor r = t.detach().clone();
  std::vector<uint16_t> h(static_cast<size_t>(t.numel()));
  engine::to_bf16(t.data<float>(), h.data(), t.numel());
  engine::from_bf16(h.data(), r.data<float>(), t.numel());
  return r;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector(), vb = b.to_vector();
  double d = 0;
  for (size_t i = 0; i < va.size(); ++i) d = std::max(d, std::abs(va[i] - vb[i]));
  return d;
}

// ||a - b|| / ||b||
double rel_norm_error(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector(), vb = b.to_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    num += (va[i] - vb[i]) * (va[i] - vb[i]);
    den += vb[i] * vb[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("autocast: precision names, nesting, and the scope is per thread") {
  CHECK(parse_precision("f32") == Precision::f32);
  CHECK(parse_precision("bfloat16") == Precision::bf16);
  CHECK(xgt::contains(XG_THROW_MESSAGE(parse_precision("fp16"), std::invalid_argument), "not one of f32, bf16"));
  CHECK(autocast_precision() == Precision::f32);
  if (!bf16_unsupported_reason().empty()) {  // refused where it would be slow, unless emulated on purpose
    const std::string msg = XG_THROW_MESSAGE(Autocast(bf16), std::runtime_error);
    CHECK(xgt::contains(msg, bf16_unsupported_reason()));
    CHECK(autocast_precision() == Precision::f32);
  }
  xgt::Bf16Products bf16_products;
  {
    Autocast outer(bf16);
    CHECK(autocast_precision() == Precision::bf16);
    {
      Autocast inner(Precision::f32);
      CHECK(autocast_precision() == Precision::f32);
    }
    CHECK(autocast_precision() == Precision::bf16);
  }
  CHECK(autocast_precision() == Precision::f32);
}

TEST_CASE("autocast: two threads at once, one under Autocast(bf16), the other's products stay float32") {
  xgt::Bf16Products bf16_products;
  Generator gen(8);
  const Tensor x = randn({16, 32}, gen), w = randn({8, 32}, gen);
  const Tensor want = linear(x, w);  // float32, before any thread starts
  xgt::Meeting meeting(2);
  auto meet = [&] { meeting.arrive_and_wait(); };
  Tensor in_bf16, in_f32;
  Precision seen_by_other = Precision::bf16;
  std::thread a([&] {
    Autocast scope(bf16);
    meet();
    in_bf16 = linear(x, w);
  });
  std::thread b([&] {
    meet();
    seen_by_other = autocast_precision();
    in_f32 = linear(x, w);
  });
  a.join();
  b.join();
  CHECK(seen_by_other == Precision::f32);
  CHECK(bit_equal(in_f32, want));
  CHECK(max_abs_diff(in_bf16, linear(rounded(x), rounded(w))) < 1e-4);  // the bf16 products
  CHECK(max_abs_diff(in_bf16, want) > 1e-4);                         // which are not the float32 ones
}

TEST_CASE("autocast: linear and matmul equal the float32 products of bf16-rounded operands, forward and backward") {
  xgt::for_each_bf16_route([] {
    Generator g(3);
    Tensor x = randn({4, 6, 40}, g).requires_grad_(), w = randn({72, 40}, g).requires_grad_(),
           b = randn({72}, g).requires_grad_();
    Tensor a = randn({3, 1, 24, 50}, g).requires_grad_(), m = randn({2, 50, 36}, g).requires_grad_();
    Tensor gy = randn({4, 6, 72}, g), gz = randn({3, 2, 24, 36}, g);

    Tensor y, z;
    {
      Autocast cast(bf16);
      y = linear(x, w, b);
      z = matmul(a, m);
    }
    CHECK(y.dtype() == f32);  // products accumulate and return float32
    y.backward(gy);
    z.backward(gz);

    // The reference: float32 products (exact enough here) of the rounded
    // operands, and of the rounded output gradients in backward.
    Tensor xr = rounded(x).requires_grad_(), wr = rounded(w).requires_grad_(), br = b.detach().clone().requires_grad_();
    Tensor ar = rounded(a).requires_grad_(), mr = rounded(m).requires_grad_();
    Tensor yr = linear(xr, wr, br), zr = matmul(ar, mr);
    CHECK(max_abs_diff(y, yr) < 1e-4);
    CHECK(max_abs_diff(z, zr) < 1e-4);
    linear(xr, wr, br).backward(rounded(gy));
    matmul(ar, mr).backward(rounded(gz));
    // Not yr/zr: their backward would run with unrounded gy; the second call above is the reference.
    CHECK(max_abs_diff(x.grad(), xr.grad()) < 1e-3);
    CHECK(max_abs_diff(w.grad(), wr.grad()) < 1e-3);
    CHECK(max_abs_diff(a.grad(), ar.grad()) < 1e-3);
    CHECK(max_abs_diff(m.grad(), mr.grad()) < 1e-3);
    // The bias gradient is a float32 sum of the unrounded gradient.
    CHECK(max_abs_diff(b.grad(), sum(gy, {0, 1})) < 1e-4);
    // And the operands really were rounded: the float32 result differs by more.
    CHECK(max_abs_diff(y, linear(x, w, b)) > 1e-3);
  });
}

TEST_CASE("linear's bias added inside the product, wherever the pool splits it, float32 and bf16") {
  // The pool splits a product by rows of the output, or by columns when it
  // has fewer rows than columns (each part then takes its slice of the
  // bias). Each part here is large enough for oneDNN. The reference is
  // float64's matmul plus the bias as a separate op.
  xgt::Bf16Products bf16_products;
  xgt::ThreadsGuard threads;
  Generator g(11);
  for (const int64_t rows : {40, 300})  // fewer rows than the 192 outputs, then more
    for (const int t : {1, 2})
      for (const bool bf : {false, true}) {
        CAPTURE(rows);
        CAPTURE(t);
        CAPTURE(bf);
        set_num_threads(t);
        const Tensor x = rounded(randn({rows, 128}, g)), w = rounded(randn({192, 128}, g)), b = randn({192}, g);
        Tensor y;
        {
          std::optional<Autocast> cast;
          if (bf) cast.emplace(xg::bf16);
          y = linear(x, w, b);
        }
        const Tensor ref = matmul(x.to(f64), transpose(w.to(f64), 0, 1)) + b.to(f64);
        CHECK(max_abs_diff(y.to(f64), ref) < 1e-4);
      }
}

TEST_CASE("linear's backward by blocks of rows (long inputs, narrow layers) at 2 threads, and whole at 1, f32 and bf16") {
  xgt::for_each_bf16_route([] {
    // 1,100 rows: at 2 threads, four blocks of 256 and a tail, split into one
    // part per thread whose dW partials are added at the end (at 1 thread,
    // whole products, checked alike). x feeds two linears, so the second's dx
    // is added into the gradient already waiting. The reference: float64
    // products of the operands and output gradients, each rounded to bf16
    // under Autocast(bf16); the bias gradient is the float64 sum of the
    // unrounded one.
    xgt::ThreadsGuard threads;
    Generator g(21);
    const int64_t rows = 1100, in = 40, out = 72;
    const Tensor x0 = randn({rows, in}, g), w0 = randn({out, in}, g), v0 = randn({24, in}, g), b0 = randn({out}, g);
    const Tensor gy = randn({rows, out}, g), gz = randn({rows, 24}, g);
    for (const bool bf : {false, true}) {
      auto op = [bf](const Tensor& t) { return (bf ? rounded(t) : t).to(f64); };  // an operand as the products read it
      const Tensor want_x = matmul(op(gy), op(w0)) + matmul(op(gz), op(v0));
      const Tensor want_w = matmul(transpose(op(gy), 0, 1), op(x0));
      const Tensor want_v = matmul(transpose(op(gz), 0, 1), op(x0));
      const Tensor want_b = sum(gy.to(f64), {0});
      for (const int t : {1, 2}) {
        CAPTURE(bf);
        CAPTURE(t);
        set_num_threads(t);
        Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), v = v0.clone().requires_grad_(),
               b = b0.clone().requires_grad_();
        Tensor y, z;
        {
          std::optional<Autocast> cast;
          if (bf) cast.emplace(xg::bf16);
          y = linear(x, w, b);
          z = linear(x, v);
        }
        backward({y, z}, {gy, gz});
        // Relative to the largest magnitude: float32 sums of up to 1,100 terms.
        auto close = [](const Tensor& got, const Tensor& want) {
          return max_abs_diff(got.to(f64), want) < 1e-5 * (1 + max(abs(want)).item());
        };
        CHECK(close(x.grad(), want_x));
        CHECK(close(w.grad(), want_w));
        CHECK(close(v.grad(), want_v));
        CHECK(close(b.grad(), want_b));
      }
    }
  });
}

TEST_CASE("autocast: the gradients of a small model agree with float32 at bf16 precision, float64 is never cast") {
  xgt::Bf16Products bf16_products;
  Generator g(5);
  Tensor x = randn({16, 32}, g), w1 = randn({64, 32}, g, f32, 0, 0.2).requires_grad_(),
         w2 = randn({10, 64}, g, f32, 0, 0.2).requires_grad_(), b1 = zeros({64}).requires_grad_();
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 10);
  auto loss_of = [&] { return cross_entropy(linear(layer_norm(relu(linear(x, w1, b1)), {}, {}), w2), labels); };
  Tensor l32 = loss_of();
  l32.backward();
  std::vector<Tensor> g32{w1.grad(), w2.grad(), b1.grad()};
  for (Tensor* p : {&w1, &w2, &b1}) p->zero_grad();
  Tensor l16;
  {
    Autocast cast(bf16);
    l16 = loss_of();
  }
  l16.backward();
  CHECK(l16.item() == doctest::Approx(l32.item()).epsilon(1e-2));
  CHECK(rel_norm_error(w1.grad(), g32[0]) < 2e-2);
  CHECK(rel_norm_error(w2.grad(), g32[1]) < 2e-2);
  CHECK(rel_norm_error(b1.grad(), g32[2]) < 2e-2);
  CHECK(rel_norm_error(w1.grad(), g32[0]) > 0);  // bf16 really ran

  // float64 products are not cast: bit-identical with and without the scope.
  Tensor d = randn({8, 40}, g, f64), e = randn({40, 24}, g, f64);
  Tensor plain = matmul(d, e), cast64;
  {
    Autocast cast(bf16);
    cast64 = matmul(d, e);
  }
  CHECK(bit_equal(plain, cast64));
}

TEST_CASE("autocast: linear's bf16 saved inputs take half the bytes of float32 ones") {
  xgt::Bf16Products bf16_products;
  Generator g(7);
  Tensor w = randn({256, 256}, g).requires_grad_();
  auto saved_by = [&](bool cast) {
    const int64_t before = memory_stats().current_bytes;
    Tensor x = randn({512, 256}, g);
    Tensor y;
    {
      Autocast scope(cast ? Precision::bf16 : Precision::f32);
      y = linear(x, w);
    }
    x = Tensor();  // only the tape holds the input now
    return memory_stats().current_bytes - before;
  };
  const int64_t f32_bytes = saved_by(false), bf16_bytes = saved_by(true);
  // float32: the output and the input (the weight is not counted: it existed before).
  CHECK(f32_bytes == (512 * 256 + 512 * 256) * 4);
  // bf16: the output in float32 and the input in bf16 (the weight is saved as itself).
  CHECK(bf16_bytes == 512 * 256 * 4 + 512 * 256 * 2);
}

TEST_CASE("autocast: products that save the same tensor share one bf16 copy, a write to it makes a new one") {
  xgt::Bf16Products bf16_products;
  Generator g(8);
  Tensor wq = randn({128, 128}, g).requires_grad_(), wk = randn({128, 128}, g).requires_grad_(),
         wv = randn({128, 128}, g).requires_grad_();
  const int64_t n = 64 * 128;
  Tensor x = randn({64, 128}, g);
  const int64_t before = memory_stats().current_bytes;
  Tensor q, k, v;
  {
    Autocast cast(bf16);
    q = linear(x, wq);
    k = linear(x, wk);
    v = linear(x, wv);
  }
  // Three float32 outputs and one bf16 copy of x, not three.
  CHECK(memory_stats().current_bytes - before == 3 * n * 4 + n * 2);
  // A write through xgrad's API: the next product copies the new values.
  x.copy_(x + ones({64, 128}));
  Tensor after;
  {
    Autocast cast(bf16);
    after = linear(x, wq);
  }
  CHECK(memory_stats().current_bytes - before == 4 * n * 4 + 2 * n * 2);
  // Each product's backward reads the values it was given: the first three
  // the old x, the last the new one.
  (sum(q) + sum(after)).backward();
  Tensor ref = wq.grad().detach().clone();
  wq.zero_grad();
  Tensor old_x = x.detach() - ones({64, 128});
  {
    Autocast cast(bf16);
    (sum(linear(old_x, wq)) + sum(linear(x.detach(), wq))).backward();
  }
  CHECK(bit_equal(wq.grad(), ref));
}

TEST_CASE("autocast: attention's products read bf16 copies of q, k, v and the weights, the gradients stay within bf16 "
          "rounding of float32") {
  xgt::Bf16Products bf16_products;
  Generator g(9);
  const int64_t B = 4, T = 12, C = 64;
  Tensor x = randn({B, T, C}, g).requires_grad_(), w = (ones({C}) + randn({C}, g, f32, 0, 0.1)).requires_grad_(),
         b = randn({C}, g, f32, 0, 0.1).requires_grad_();
  Tensor k = randn({B, T, C}, g).requires_grad_(), v = randn({B, T, C}, g).requires_grad_();
  Tensor gy = randn({B, T, C}, g);
  AttentionOptions o;
  o.heads = 4;
  o.causal = true;
  o.memory = AttentionMemory::keep_weights;
  auto run = [&](bool cast, int64_t* saved) {
    for (Tensor* p : {&x, &w, &b, &k, &v}) p->zero_grad();
    const int64_t before = memory_stats().current_bytes;
    Tensor y;
    {
      Autocast scope(cast ? Precision::bf16 : Precision::f32);
      // x stands for a product's output; its own float32 tensor is kept by
      // this test, so only what the ops add is counted.
      y = attention(layer_norm(x, w, b), k, v, o);
    }
    *saved = memory_stats().current_bytes - before;
    y.backward(gy);
    return V{x.grad().detach().clone(), w.grad().detach().clone(), b.grad().detach().clone(),
             k.grad().detach().clone(), v.grad().detach().clone()};
  };
  int64_t saved32 = 0, saved16 = 0;
  const V g32 = run(false, &saved32), g16 = run(true, &saved16);
  // The output is softmax(q k^T / sqrt(D)) v computed from bf16-rounded q, k
  // and v with the weights rounded to bf16 before the second product (PyTorch's
  // autocast: bmm in bf16, softmax in float32), here by separate ops in
  // float32 on rounded values: within float32's accumulation error of it,
  // and far from the same without the weights' rounding.
  {
    Tensor y16;
    {
      Autocast scope(bf16);
      y16 = attention(layer_norm(x, w, b), k, v, o);
    }
    const int64_t H = 4, D = C / H;
    auto heads = [&](const Tensor& t) { return permute(reshape(rounded(t), {B, T, H, D}), {0, 2, 1, 3}); };
    std::vector<float> causal(static_cast<size_t>(T * T), 0.0f);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) causal[static_cast<size_t>(i * T + j)] = 1.0f;
    const Tensor scores = masked_fill(matmul(heads(layer_norm(x, w, b)), transpose(heads(k), 2, 3)) *
                                          (1.0 / std::sqrt(double(D))),
                                      from_vector(causal, {T, T}), -INFINITY);
    const Tensor P = softmax(scores, -1);
    auto context = [&](const Tensor& p) {
      return reshape(permute(matmul(p, heads(v)), {0, 2, 1, 3}), {B, T, C});
    };
    const double exact = rel_norm_error(y16, context(rounded(P))), unrounded = rel_norm_error(y16, context(P));
    CAPTURE(exact);
    CAPTURE(unrounded);
    CHECK(exact < 1e-5);
    CHECK(unrounded > 10 * exact);
    // Without a tape (evaluation, decoding) the core computes in float32:
    // the same values as outside Autocast, bit for bit.
    NoGradGuard no_grad;
    const Tensor q = layer_norm(x, w, b);
    Tensor cast;
    {
      Autocast scope(bf16);
      cast = attention(q, k, v, o);
    }
    CHECK(bit_equal(cast, attention(q, k, v, o)));
  }
  const int64_t n = B * T * C, weights = B * 4 * T * T, rows = B * T;
  // float32: layer norm's output (attention's q), its xhat and rstd; the
  // attention's output and weights (k and v existed before).
  CHECK(saved32 == (n + n + rows + n + weights) * 4);
  // bf16: the layer norm's output is dropped (attention keeps a bf16 copy);
  // xhat stays float32; attention keeps bf16 copies of q, k and v.
  CHECK(saved16 == (n + rows + n + weights) * 4 + 3 * n * 2);
  // The gradients of x, w, b, k and v, from products of bf16-rounded
  // operands (8 significant bits, a unit roundoff of 2^-9 = 2.0e-3): the
  // bound is 5 units.
  for (size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(rel_norm_error(g16[i], g32[i]) < 1e-2);
    CHECK(rel_norm_error(g16[i], g32[i]) > 0);  // the bf16 copies were used
  }
  // They saved bf16 copies only: no second order.
  Tensor y;
  {
    Autocast scope(bf16);
    y = sum(attention(layer_norm(x, w, b), k, v, o) * gy);
  }
  GradOptions second;
  second.create_graph = true;
  CHECK(XG_THROW_MESSAGE(grad({y}, {x}, {}, second), std::logic_error).find("Autocast(bf16) is not supported") !=
        std::string::npos);
}

TEST_CASE("autocast: the ops PyTorch's autocast leaves in float32 stay float32, though built on products") {
  xgt::Bf16Products bf16_products;
  Generator g(8);
  const Tensor img = randn({2, 3, 5, 4}, g), x1 = randn({6, 5}, g), x2 = randn({6, 4}, g), w = randn({3, 5, 4}, g);
  const Tensor table = randn({10, 7}, g), ids = from_ints({1, 2, 3, 4, 5, 9}, {2, 3});
  const Tensor scores = randn({4, 6}, g), labels = from_ints({1, 3, -1, 0, 0, 0, 2, -1, 0, 0, 0, 0, 5, 4, 3, -1, 0, 0,
                                                              0, -1, 0, 0, 0, 0},
                                                             {4, 6});
  auto run = [&] {
    return V{interpolate(img, InterpolateOptions().size({7, 9}).mode("bilinear")),
             interpolate(img, InterpolateOptions().scale_factor({1.5}).mode("bicubic").align_corners(true)),
             cross_map_lrn2d(img, 2), bilinear(x1, x2, w), embedding_bag(ids, table),
             multilabel_margin_loss(scores, labels)};
  };
  const V full = run();
  V cast;
  {
    Autocast on(bf16);
    cast = run();
  }
  for (size_t i = 0; i < full.size(); ++i) {
    CAPTURE(i);
    CHECK(bit_equal(cast[i], full[i]));
  }
}

TEST_CASE("autocast: attention heads in bf16 of every size the one-pass kernel takes equal their composition on "
          "rounded values, on both routes") {
  // Where the CPU has AVX512_BF16 and the route is native, heads of D = 16,
  // 32 or 48 without dropout run in one pass per head
  // (engine::attention_head_bf16, and its backward); elsewhere, and on the
  // widened route, in batched products. Either way: softmax(q k^T /
  // sqrt(D)) v from bf16-rounded q, k and v with the weights rounded before
  // the second product, the reported weights the unrounded softmax, and the
  // gradients of both routes alike: they differ in the order of their sums
  // and where that flips a rounding to bf16 (under 1e-7 on Zen 5; 4e-3 with
  // the backward's weights truncated to bf16 instead of rounded). Rows of 1
  // to 70 keys (a kernel's vectors of 16, its blocks of 4 rows and of 64
  // columns, odd counts), masks of each kind.
  struct Case {
    int64_t B, T, S, H, D;
    bool causal, padding;
  };
  const Case cases[] = {{2, 50, 50, 4, 32, false, false}, {3, 7, 13, 2, 16, false, true},
                        {2, 66, 66, 2, 32, true, false},  {1, 1, 1, 1, 16, false, false},
                        {2, 5, 70, 3, 48, false, true},   {1, 9, 9, 2, 40, true, true},
                        {2, 12, 12, 2, 64, true, false}};
  for (const Case& c : cases) {
    CAPTURE(c.T);
    CAPTURE(c.S);
    CAPTURE(c.D);
    const int64_t C = c.H * c.D;
    Generator g(11);
    Tensor q = randn({c.B, c.T, C}, g).requires_grad_(), k = randn({c.B, c.S, C}, g).requires_grad_(),
           v = randn({c.B, c.S, C}, g).requires_grad_();
    const Tensor gy = randn({c.B, c.T, C}, g);
    AttentionOptions o;
    o.heads = c.H;
    o.causal = c.causal;
    std::vector<float> pad(static_cast<size_t>(c.B * c.S), 0.0f);
    if (c.padding)
      for (int64_t b = 0; b < c.B; ++b) pad[static_cast<size_t>(b * c.S + (b + 1) % c.S)] = 1.0f;
    if (c.padding) o.key_padding_mask = from_vector(pad, {c.B, c.S});
    // The reference, in float32 on rounded values.
    auto heads = [&](const Tensor& t, int64_t n) { return permute(reshape(rounded(t), {c.B, n, c.H, c.D}), {0, 2, 1, 3}); };
    std::vector<float> mask(static_cast<size_t>(c.B * c.T * c.S), 0.0f);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.T; ++i)
        for (int64_t j = 0; j < c.S; ++j)
          if ((c.causal && j > i) || pad[static_cast<size_t>(b * c.S + j)] != 0.0f)
            mask[static_cast<size_t>((b * c.T + i) * c.S + j)] = 1.0f;
    const Tensor scores = masked_fill(matmul(heads(q, c.T), transpose(heads(k, c.S), 2, 3)) * (1.0 / std::sqrt(double(c.D))),
                                      reshape(from_vector(mask, {c.B, c.T, c.S}), {c.B, 1, c.T, c.S}), -1e9);
    const Tensor P = softmax(scores, -1);
    const Tensor want = reshape(permute(matmul(rounded(P), heads(v, c.S)), {0, 2, 1, 3}), {c.B, c.T, C});
    V grads[2];
    int route = 0;
    xgt::for_each_bf16_route([&] {
      Tensor weights;
      o.weights = &weights;
      Tensor y;
      {
        Autocast scope(bf16);
        y = attention(q, k, v, o);
      }
      o.weights = nullptr;
      CHECK(rel_norm_error(y, want) < 1e-5);
      CHECK(rel_norm_error(weights, P) < 1e-5);
      for (Tensor* t : {&q, &k, &v}) t->zero_grad();
      y.backward(gy);
      grads[route++] = V{q.grad().detach().clone(), k.grad().detach().clone(), v.grad().detach().clone()};
    });
    if (route == 2)  // (with one key, q's and k's gradients are 0 on both)
      for (size_t i = 0; i < 3; ++i)
        CHECK((max_abs_diff(grads[0][i], grads[1][i]) == 0.0 || rel_norm_error(grads[0][i], grads[1][i]) < 1e-4));
  }
}

TEST_CASE("autocast: the one-pass head kernel refuses, naming its test, where it does not run") {
  // On the widened route (any CPU) and for head sizes it does not take.
  xgt::Bf16Products bf16_products;
  const engine::Bf16Route before = engine::bf16_route();
  engine::set_bf16_route(engine::Bf16Route::widened);
  CHECK_FALSE(engine::small_heads_bf16(16));
  std::vector<uint16_t> x(16, 0);
  std::vector<float> P(1), out(16);
  auto rows = [](void*, float*) {};
  CHECK_THROWS_WITH_AS(engine::attention_head_bf16(1, 1, 16, 1.0f, x.data(), 16, x.data(), x.data(), 16, P.data(), rows,
                                                   nullptr, out.data(), 16),
                       "attention_head_bf16: not available here (small_heads_bf16)", std::logic_error);
  auto backward_rows = [](void*, float*) {};
  CHECK_THROWS_WITH_AS(engine::attention_head_backward_bf16(1, 1, 16, 1.0f, x.data(), 16, x.data(), x.data(), 16,
                                                            P.data(), x.data(), backward_rows, nullptr, out.data(),
                                                            out.data(), out.data()),
                       "attention_head_backward_bf16: not available here (small_heads_bf16)", std::logic_error);
  engine::set_bf16_route(before);
  for (const int64_t D : {0, 8, 40, 64, 80}) CHECK_FALSE(engine::small_heads_bf16(D));
}
