// recurrence (autograd/ops_rnn.cpp): the fused recurrent layer.
#include <doctest/doctest.h>

#include <cmath>

#include "helpers.h"

using namespace xg;

namespace {

const RecurrentCell kCells[] = {RecurrentCell::tanh, RecurrentCell::relu, RecurrentCell::lstm, RecurrentCell::gru};
int64_t gates(RecurrentCell c) { return c == RecurrentCell::lstm ? 4 : c == RecurrentCell::gru ? 3 : 1; }

// The same recurrence written step by step with ops (what the layer ran
// before the fused op): the reference the op must equal.
Tensor composed(RecurrentCell cell, const Tensor& proj, const Tensor& w, const Tensor& b, const Tensor& h0,
                const Tensor& c0, const std::vector<int64_t>& lengths, bool reverse) {
  const int64_t B = proj.size(0), T = proj.size(1), H = w.size(1);
  Tensor h = h0, c = c0;
  std::vector<Tensor> out(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    const int64_t t = reverse ? T - 1 - i : i;
    const Tensor x = reshape(slice(proj, 1, t, t + 1), {B, gates(cell) * H});
    const Tensor hh = linear(h, w, b);
    Tensor h_new, c_new = c;
    switch (cell) {
      case RecurrentCell::tanh: h_new = tanh(add(x, hh)); break;
      case RecurrentCell::relu: h_new = relu(add(x, hh)); break;
      case RecurrentCell::lstm: {
        const auto g = chunk(add(x, hh), 4, 1);
        c_new = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
        h_new = mul(sigmoid(g[3]), tanh(c_new));
        break;
      }
      case RecurrentCell::gru: {
        const auto xs = chunk(x, 3, 1), hs = chunk(hh, 3, 1);
        const Tensor r = sigmoid(add(xs[0], hs[0])), z = sigmoid(add(xs[1], hs[1]));
        const Tensor n = tanh(add(xs[2], mul(r, hs[2])));
        h_new = add(n, mul(z, sub(h, n)));
        break;
      }
    }
    if (!lengths.empty()) {  // rows past their length keep their state
      std::vector<double> m(static_cast<size_t>(B));
      for (int64_t r = 0; r < B; ++r) m[static_cast<size_t>(r)] = t < lengths[static_cast<size_t>(r)] ? 1 : 0;
      const Tensor mask = from_vector(m, {B, 1}, proj.dtype());
      h_new = add(h, mul(mask, sub(h_new, h)));
      if (c.defined()) c_new = add(c, mul(mask, sub(c_new, c)));
    }
    h = h_new;
    c = c_new;
    out[static_cast<size_t>(t)] = cell == RecurrentCell::lstm ? concat({h, c}, 1) : h;
  }
  return stack(out, 1);
}

struct Inputs {
  Tensor proj, w, b, h0, c0;
};
Inputs inputs(RecurrentCell cell, int64_t B, int64_t T, int64_t H, uint64_t seed, bool bias = true) {
  const int64_t G = gates(cell);
  Inputs in;
  in.proj = xgt::leaf({B, T, G * H}, seed, -1.5, 1.5);
  in.w = xgt::leaf({G * H, H}, seed + 1, -0.8, 0.8);
  if (bias) in.b = xgt::leaf({G * H}, seed + 2, -0.5, 0.5);
  in.h0 = xgt::leaf({B, H}, seed + 3, -1, 1);
  if (cell == RecurrentCell::lstm) in.c0 = xgt::leaf({B, H}, seed + 4, -1, 1);
  return in;
}
std::vector<Tensor> leaves(const Inputs& in) {
  std::vector<Tensor> v{in.proj, in.w, in.h0};
  if (in.b.defined()) v.push_back(in.b);
  if (in.c0.defined()) v.push_back(in.c0);
  return v;
}

}  // namespace

TEST_CASE("recurrence: gradcheck in float64 of every input, every cell, both directions, with and without lengths") {
  for (RecurrentCell cell : kCells)
    for (bool reverse : {false, true})
      for (bool with_lengths : {false, true})
        for (bool bias : {true, false}) {
          CAPTURE(static_cast<int>(cell));
          CAPTURE(reverse);
          CAPTURE(with_lengths);
          CAPTURE(bias);
          const Inputs in = inputs(cell, 3, 4, 3, 11, bias);
          const std::vector<int64_t> lengths = with_lengths ? std::vector<int64_t>{4, 1, 3} : std::vector<int64_t>{};
          XG_CHECK_GRAD(
              [&](const std::vector<Tensor>&) {
                return recurrence(cell, in.proj, in.w, in.b, in.h0, in.c0, lengths, reverse);
              },
              leaves(in));
        }
}

TEST_CASE("recurrence equals the same recurrence composed of ops, values and gradients (float64)") {
  for (RecurrentCell cell : kCells)
    for (bool reverse : {false, true}) {
      CAPTURE(static_cast<int>(cell));
      CAPTURE(reverse);
      const Inputs in = inputs(cell, 4, 6, 5, 21);
      const std::vector<int64_t> lengths{6, 2, 5, 1};
      const auto fused = xgt::values_and_grads(
          [&](const std::vector<Tensor>&) {
            return recurrence(cell, in.proj, in.w, in.b, in.h0, in.c0, lengths, reverse);
          },
          leaves(in));
      const auto reference = xgt::values_and_grads(
          [&](const std::vector<Tensor>&) { return composed(cell, in.proj, in.w, in.b, in.h0, in.c0, lengths, reverse); },
          leaves(in));
      xgt::check_close(fused, reference, 1e-12);
    }
}

TEST_CASE("recurrence: the same result on 1 and 2 threads, and past a row's length the state is carried") {
  xgt::ThreadsGuard guard;
  const Inputs in = inputs(RecurrentCell::lstm, 5, 7, 9, 31);
  const std::vector<int64_t> lengths{7, 3, 1, 7, 5};
  auto run = [&](int threads) {
    set_num_threads(threads);
    return xgt::values_and_grads(
        [&](const std::vector<Tensor>&) {
          return recurrence(RecurrentCell::lstm, in.proj, in.w, in.b, in.h0, in.c0, lengths, false);
        },
        leaves(in));
  };
  const auto one = run(1), two = run(2);
  xgt::check_close(one, two, 1e-15);
  const Tensor& states = one[0];  // (B,T,2H): row 1 stops after 3 steps
  auto at = [&](int64_t b, int64_t t) { return slice(slice(states, 0, b, b + 1), 1, t, t + 1); };
  CHECK(max(abs(sub(at(1, 2), at(1, 6)))).item() == 0.0);  // row 1 (length 3): its last state, carried
  CHECK(max(abs(sub(at(2, 0), at(2, 6)))).item() == 0.0);  // row 2 (length 1)
  CHECK(max(abs(sub(at(0, 2), at(0, 6)))).item() > 0.0);   // row 0 (length 7) moves on
}

TEST_CASE("recurrence under Autocast(bf16): close to float32, the gradients too") {
  xgt::Bf16Products bf16_products;
  for (RecurrentCell cell : {RecurrentCell::lstm, RecurrentCell::gru}) {
    CAPTURE(static_cast<int>(cell));
    Inputs in = inputs(cell, 8, 10, 32, 41);
    for (Tensor* t : {&in.proj, &in.w, &in.b, &in.h0, &in.c0})
      if (t->defined()) *t = t->detach().to(f32).requires_grad_();
    auto run = [&](Precision p) {
      return xgt::values_and_grads(
          [&](const std::vector<Tensor>&) {
            Autocast cast(p);
            return recurrence(cell, in.proj, in.w, in.b, in.h0, in.c0, {}, false);
          },
          leaves(in));
    };
    const auto full = run(Precision::f32), half = run(Precision::bf16);
    // bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 0.2%) in each
    // product's operands; over 10 steps the states and gradients stay within
    // 3% of the largest value of each tensor (measured: below 1%).
    for (size_t i = 0; i < full.size(); ++i) {
      CAPTURE(i);
      const double scale = max(abs(full[i])).item();
      const double diff = max(abs(sub(full[i], half[i]))).item();
      CHECK(diff <= 0.03 * scale);
      CHECK(diff > 0);  // the products did run in bf16
    }
  }
}

TEST_CASE("recurrence: bad arguments name the argument and the expected shape") {
  const Inputs in = inputs(RecurrentCell::gru, 2, 3, 4, 51);
  auto msg = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    FAIL_CHECK("no error");
    return std::string();
  };
  CHECK(xgt::contains(msg([&] { recurrence(RecurrentCell::lstm, in.proj, in.w, in.b, in.h0, in.c0, {}, false); }),
                      "recurrence (lstm): weight_hh of shape (12,4): expected (4*H,H)"));
  CHECK(xgt::contains(
      msg([&] { recurrence(RecurrentCell::gru, slice(in.proj, 2, 0, 6), in.w, in.b, in.h0, Tensor(), {}, false); }),
      "recurrence (gru): input products of shape (2,3,6): expected (B,T,12)"));
  CHECK(xgt::contains(
      msg([&] { recurrence(RecurrentCell::gru, in.proj, in.w, in.b, slice(in.h0, 1, 0, 2), Tensor(), {}, false); }),
      "recurrence (gru): h0 of shape (2,2): expected (2,4) (B,H)"));
  CHECK(xgt::contains(msg([&] { recurrence(RecurrentCell::gru, in.proj, in.w, in.b, in.h0, in.h0, {}, false); }),
                      "c0 is the LSTM's cell state; this cell has none"));
  CHECK(xgt::contains(msg([&] { recurrence(RecurrentCell::gru, in.proj, in.w, in.b, in.h0, Tensor(), {3, 4}, false); }),
                      "recurrence (gru): lengths[1] = 4: expected 1..3"));
  CHECK(xgt::contains(msg([&] { recurrence(RecurrentCell::gru, in.proj, in.w, in.b, in.h0, Tensor(), {3}, false); }),
                      "1 lengths for 2 rows"));
  CHECK(xgt::contains(
      msg([&] { recurrence(RecurrentCell::gru, in.proj, in.w, slice(in.b, 0, 0, 5), in.h0, Tensor(), {}, false); }),
      "bias_hh of shape (5,): expected (12)"));
}
