// xg::dist under mpirun (tests/CMakeLists.txt runs this at 2 processes, and at
// 1): every process runs every test case in the same order, so the collectives
// inside them match. The equivalence cases compare N processes with per-process
// batch B against one process with batch N*B, trained side by side in each
// process (the reference model never communicates).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "autograd/xg.h"
#include "tests/distributed/key_bias.h"
#include "distributed/data_parallel.h"
#include "distributed/zero.h"
#include "models/transformer.h"
#include "optim/optim.h"
#include "models/seq2seq.h"

using namespace xg;

namespace {

models::TransformerConfig small_config() {
  models::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 12;
  c.layers = 2;
  c.d_model = 32;
  c.heads = 4;
  c.d_ff = 64;
  c.dropout = 0;
  c.max_len = 32;
  c.seed = 7;
  return c;
}

// A global batch of `rows` copy-task examples of varied lengths (the same on
// every process), and the rows [lo, hi) of it.
std::vector<models::Example> global_batch(int64_t rows, uint64_t seed) {
  const uint64_t vocab = 12, min_len = 2, max_len = 9;
  Generator g(seed);
  std::vector<models::Example> ex;
  for (int64_t i = 0; i < rows; ++i) {
    models::Example e;
    const uint64_t len = min_len + g.engine()() % (max_len - min_len + 1);
    for (uint64_t k = 0; k < len; ++k) e.src.push_back(models::kFirstSymbol + static_cast<int64_t>(g.engine()() % (vocab - models::kFirstSymbol)));
    e.tgt = e.src;
    ex.push_back(e);
  }
  return ex;
}

struct Diff {
  double max_abs = 0, rel_norm = 0;  // max |a-b|; ||a-b|| / ||b|| over the parameters compared
  double key_bias_max_abs = 0;       // the same max over the key projections' biases alone
  double key_bias_grad = 0;          // max |gradient| of those biases in the last step (either model), relative to all gradients
  double grad_rel = 0;               // max |ddp gradient - single gradient| / max |single gradient|, last step, other parameters
};

using xgt::is_key_bias;  // compared apart: see key_bias.h

// a: the DataParallel model, b: the single-process one. Weights and the last
// step's gradients are compared, each model's own.
Diff compare(const nn::Module& a, const nn::Module& b) {
  Diff d;
  double num = 0, den = 0, gmax = 0, kgmax = 0, gdiff = 0;
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE(pa[i].first == pb[i].first);
    const auto x = pa[i].second.to_vector(), y = pb[i].second.to_vector();
    for (size_t j = 0; j < x.size(); ++j) {
      const double e = std::abs(x[j] - y[j]);
      if (is_key_bias(pa[i].first, j, x.size())) {
        d.key_bias_max_abs = std::max(d.key_bias_max_abs, e);
        continue;
      }
      d.max_abs = std::max(d.max_abs, e);
      num += e * e;
      den += y[j] * y[j];
    }
    const Tensor ga = pa[i].second.grad(), gb = pb[i].second.grad();
    if (!ga.defined() && !gb.defined()) continue;  // no step taken yet
    REQUIRE(ga.defined());
    REQUIRE(gb.defined());
    const auto u = ga.to_vector(), v = gb.to_vector();
    for (size_t j = 0; j < u.size(); ++j) {
      if (is_key_bias(pa[i].first, j, u.size())) {
        kgmax = std::max({kgmax, std::abs(u[j]), std::abs(v[j])});
        continue;
      }
      gmax = std::max(gmax, std::abs(v[j]));
      gdiff = std::max(gdiff, std::abs(u[j] - v[j]));
    }
  }
  d.rel_norm = std::sqrt(num / den);
  d.key_bias_grad = gmax > 0 ? kgmax / gmax : 0;
  d.grad_rel = gmax > 0 ? gdiff / gmax : 0;
  return d;
}

// Trains two copies of one model for `steps` Adam steps: `ddp` on this
// process's slice of each global batch through DataParallel, `ref` alone on the
// whole batch. `micro` > 1 splits each process's slice further into micro
// batches accumulated with set_sync(false).
constexpr double kLr = 1e-3;

Diff train_side_by_side(Dtype dtype, int steps, int64_t rows_per_rank, int micro, int64_t bucket_bytes,
                        dist::DataParallelStats* stats = nullptr, bool progress_thread = true) {
  const int world = dist::world_size(), rank = dist::rank();
  // Alone, the data-parallel side takes its batch in two micro batches, so
  // that the comparison is not of one computation with itself.
  if (world == 1 && micro == 1) micro = 2;
  models::Transformer ddp_model(small_config()), ref_model(small_config());
  ddp_model.to(dtype);
  ref_model.to(dtype);
  dist::DataParallelOptions o;
  o.bucket_bytes = bucket_bytes;
  o.progress_thread = progress_thread;
  dist::DataParallel ddp(ddp_model, o);
  optim::AdamOptions ao;
  ao.lr = kLr;
  optim::Adam opt(ddp_model.parameters(), ao), ref_opt(ref_model.parameters(), ao);
  const int64_t rows = rows_per_rank * world;
  for (int s = 0; s < steps; ++s) {
    const auto all = global_batch(rows, 100 + s);
    const int64_t all_tokens = models::make_batch(all).target_tokens;
    // Reference: the whole batch, its mean loss.
    ref_opt.zero_grad();
    const auto rb = models::make_batch(all);
    ref_model.loss(rb.src, rb.tgt_in, rb.tgt_out, 0.1).backward();
    ref_opt.step();
    // Data parallel: this rank's rows, in `micro` pieces; each piece's mean
    // loss weighted by its share of the batch's tokens times world.
    opt.zero_grad();
    const int64_t lo = rows * rank / world, hi = rows * (rank + 1) / world;
    for (int m = 0; m < micro; ++m) {
      const int64_t a = lo + (hi - lo) * m / micro, b = lo + (hi - lo) * (m + 1) / micro;
      const auto part = models::make_batch(std::vector<models::Example>(all.begin() + a, all.begin() + b));
      const double w = static_cast<double>(part.target_tokens) * world / static_cast<double>(all_tokens);
      ddp.set_sync(m == micro - 1);
      (ddp_model.loss(part.src, part.tgt_in, part.tgt_out, 0.1) * w).backward();
    }
    ddp.wait();
    opt.step();
  }
  if (stats) *stats = ddp.stats();
  return compare(ddp_model, ref_model);
}

}  // namespace

TEST_CASE("dist: ranks and sizes") {
  CHECK(dist::initialized());
  CHECK(dist::world_size() >= 1);
  CHECK(dist::rank() >= 0);
  CHECK(dist::rank() < dist::world_size());
  CHECK(dist::local_size() >= 1);
  CHECK(dist::cores_per_rank() >= 1);
  CHECK(dist::all_equal(42));
  CHECK(dist::all_equal(dist::rank()) == (dist::world_size() == 1));
}

TEST_CASE("dist: allreduce sums and averages float32 and float64") {
  const int w = dist::world_size(), r = dist::rank();
  for (Dtype d : {f32, f64}) {
    Tensor t = full({3, 5}, r + 1.0, d);
    t.set({0, 0}, 10.0 * r);
    dist::allreduce(t, dist::ReduceOp::sum);
    CHECK(t.at({1, 2}) == w * (w + 1) / 2.0);
    CHECK(t.at({0, 0}) == 10.0 * w * (w - 1) / 2.0);
    Tensor m = full({4}, r + 1.0, d);
    dist::allreduce(m, dist::ReduceOp::mean);
    CHECK(m.at({3}) == doctest::Approx((w + 1) / 2.0));
  }
  CHECK(dist::allreduce(2.0 * r, dist::ReduceOp::sum) == doctest::Approx(w * (w - 1)));
}

TEST_CASE("dist: broadcast from a root") {
  const int w = dist::world_size(), r = dist::rank();
  Tensor t = full({2, 3}, r * 1.5, f64);
  dist::broadcast(t, w - 1);
  CHECK(t.at({1, 2}) == (w - 1) * 1.5);
  CHECK_THROWS_AS(dist::broadcast(t, w), std::invalid_argument);
}

TEST_CASE("dist: tensors of different sizes are an error on every process, not a hang") {
  const int w = dist::world_size(), r = dist::rank();
  if (w == 1) return;
  Tensor t = zeros({r + 2});
  std::string msg;
  try {
    dist::allreduce(t);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  CHECK(msg.find("different sizes (from 2 to " + std::to_string(w + 1) + " elements") != std::string::npos);
  Tensor b = zeros({r + 2});
  CHECK_THROWS_AS(dist::broadcast(b, 0), std::invalid_argument);
  dist::barrier();
}

TEST_CASE("dist: DataParallel starts with rank 0's parameters") {
  models::TransformerConfig c = small_config();
  c.seed = 7 + dist::rank();  // different initialisations
  models::Transformer m(c);
  dist::DataParallel ddp(m);
  models::Transformer m0(small_config());  // rank 0's initialisation
  const Diff d = compare(m, m0);
  CHECK(d.max_abs == 0);
  CHECK(d.key_bias_max_abs == 0);
}

TEST_CASE("dist: DataParallel refuses models that differ between processes") {
  if (dist::world_size() == 1) return;
  models::TransformerConfig c = small_config();
  if (dist::rank() == 1) c.d_ff = 48;
  models::Transformer m(c);
  std::string msg;
  try {
    dist::DataParallel ddp(m);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  CHECK(msg.find("the processes' models differ") != std::string::npos);
}

TEST_CASE("dist: N processes with batch B equal one with batch N*B, float64, 5 Adam steps") {
  dist::DataParallelStats st;
  const Diff d = train_side_by_side(f64, 5, 4, 1, 25 << 20, &st);
  MESSAGE("float64 at " << dist::world_size() << " processes: max |ddp - single| = " << d.max_abs
                          << ", relative norm " << d.rel_norm << "; key biases " << d.key_bias_max_abs
                          << " (their gradient " << d.key_bias_grad << " of the largest)");
  MESSAGE("float64 gradients: max |ddp - single| / max |single| = " << d.grad_rel);
  CHECK(d.max_abs <= 1e-12);
  CHECK(d.grad_rel <= 1e-13);       // measured 5.3e-16 (np 1, micro batches) and 5.1e-16 (np 2)
  CHECK(d.key_bias_grad <= 1e-12);  // rounding noise: zero in exact arithmetic
  // The key biases' own values are not checked: Adam turns their zero-mean
  // noise gradients into steps of up to lr, in either model.
}

TEST_CASE("dist: N processes with batch B equal one with batch N*B, float32, 5 Adam steps") {
  const Diff d = train_side_by_side(f32, 5, 4, 1, 25 << 20);
  MESSAGE("float32 at " << dist::world_size() << " processes: max |ddp - single| = " << d.max_abs
                          << ", relative norm " << d.rel_norm << "; key biases " << d.key_bias_max_abs
                          << " (their gradient " << d.key_bias_grad << " of the largest)");
  MESSAGE("float32 gradients: max |ddp - single| / max |single| = " << d.grad_rel);
  CHECK(d.rel_norm <= 1e-5);
  CHECK(d.grad_rel <= 1e-5);  // measured 6.2e-7 (np 1, micro batches) and 4.0e-7 (np 2)
  CHECK(d.key_bias_grad <= 1e-4);
}

TEST_CASE("dist: small buckets start during backward and give the same result") {
  dist::DataParallelStats st;
  const Diff d = train_side_by_side(f64, 3, 2, 1, 4096, &st);
  CHECK(d.max_abs <= 1e-12);
  CHECK(st.buckets > 10);
  CHECK(st.steps == 3);
  if (dist::world_size() > 1) CHECK(st.started_in_backward == 3 * st.buckets);
}

TEST_CASE("dist: the progress thread runs beside backward and changes no value") {
  dist::DataParallelStats with, without;
  const Diff a = train_side_by_side(f64, 3, 2, 1, 4096, &with, true);
  const Diff b = train_side_by_side(f64, 3, 2, 1, 4096, &without, false);
  // Debian's OpenMPI 4.1 provides MPI_THREAD_MULTIPLE; an MPI without it
  // would run the fallback, and fail here to say so.
  CHECK(with.progress_thread == (dist::world_size() > 1));
  CHECK_FALSE(without.progress_thread);
  CHECK(without.completed_by_thread == 0);
  CHECK(a.max_abs <= 1e-12);
  // The same reduction in the same order: the same weights and gradients.
  CHECK(a.max_abs == b.max_abs);
  CHECK(a.grad_rel == b.grad_rel);
  CHECK(with.started_in_backward == without.started_in_backward);
}

TEST_CASE("dist: the progress thread completes the buckets started in backward while the program computes") {
  // Two buckets; after backward the program works (sleeps) before wait():
  // the thread, not wait(), must have completed them by then.
  Tensor a = ones({1000}, f64).requires_grad_(), b = ones({1000}, f64).requires_grad_();
  dist::DataParallelOptions o;
  o.bucket_bytes = 8000;
  dist::DataParallel ddp({a, b}, {}, o);
  REQUIRE(ddp.stats().buckets == 2);
  (sum(a * 2.0) + sum(b * 3.0)).backward();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ddp.wait();
  if (dist::world_size() > 1) CHECK(ddp.stats().completed_by_thread == 2);
  CHECK(a.grad().at({7}) == doctest::Approx(2.0));
}

TEST_CASE("dist: gradient accumulation communicates only on the last micro-batch") {
  dist::DataParallelStats st;
  const Diff d = train_side_by_side(f64, 3, 4, 2, 4096, &st);
  CHECK(d.max_abs <= 1e-12);
  // Each step: the first micro-batch's backward starts nothing, the last one
  // starts every bucket.
  if (dist::world_size() > 1) CHECK(st.started_in_backward == 3 * st.buckets);
}

TEST_CASE("dist: a second backward before wait() is a clear error") {
  if (dist::world_size() == 1) return;
  Tensor w = ones({3}, f64).requires_grad_();
  dist::DataParallel ddp({w}, {});
  sum(w * 2.0).backward();
  std::string msg;
  try {
    sum(w * 3.0).backward();
  } catch (const std::logic_error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("second backward() reached parameter 0 (3,) before wait()") != std::string::npos);
  ddp.wait();  // the first backward's bucket, in flight on every process
}

TEST_CASE("dist: a parameter some processes do not use gets the others' gradient, none if no process uses it") {
  Tensor a = ones({2}, f64).requires_grad_(), b = ones({2}, f64).requires_grad_(), c = ones({2}, f64).requires_grad_();
  dist::DataParallel ddp({a, b, c}, {});
  const int w = dist::world_size(), r = dist::rank();
  Tensor loss = sum(a * 3.0);
  if (r == 0) loss = loss + sum(b * 4.0);  // b: rank 0 only; c: nobody
  loss.backward();
  ddp.wait();
  CHECK(a.grad().at({1}) == doctest::Approx(3));
  REQUIRE(b.grad().defined());
  CHECK(b.grad().at({0}) == doctest::Approx(4.0 / w));
  CHECK_FALSE(c.grad().defined());
}

TEST_CASE("dist: buckets in reverse order, the first parameters' bucket kept small") {
  models::Transformer m(small_config());
  dist::DataParallelOptions o;
  o.bucket_bytes = 64 << 10;
  o.last_bucket_bytes = 8 << 10;
  dist::DataParallel ddp(m, o);
  const auto b = ddp.buckets();
  const auto params = m.parameters();
  REQUIRE(b.size() > 2);
  CHECK(b.front().front() == static_cast<int64_t>(params.size()) - 1);  // the last parameter starts first
  CHECK(b.back().back() == 0);                                          // the first one is in the last bucket
  int64_t last = 0;
  for (int64_t i : b.back()) last += params[i].numel() * 4;
  CHECK((last <= (8 << 10) || b.back().size() == 1));
}

TEST_CASE("dist: buckets of fewer elements than processes are reduced as the others") {
  // One value and its flag a bucket: fewer elements than processes from
  // np 3 on, which a ring allreduce splits into empty pieces.
  Tensor a = ones({1}, f64).requires_grad_(), b = ones({1}, f64).requires_grad_();
  dist::DataParallelOptions o;
  o.bucket_bytes = 1;
  dist::DataParallel ddp({a, b}, {}, o);
  REQUIRE(ddp.stats().buckets == 2);
  const int r = dist::rank(), w = dist::world_size();
  (sum(a * (r + 1.0)) + sum(b * (r * r + 2.0))).backward();
  ddp.wait();
  double mean_b = 0;
  for (int k = 0; k < w; ++k) mean_b += (k * k + 2.0) / w;
  CHECK(a.grad().at({0}) == doctest::Approx((w + 1.0) / 2));  // mean of r + 1
  CHECK(b.grad().at({0}) == doctest::Approx(mean_b));
}

TEST_CASE("dist: a gradient left from the last exchange is exchanged again unchanged") {
  Tensor a = ones({2}, f64).requires_grad_(), b = ones({2}, f64).requires_grad_();
  dist::DataParallel ddp({a, b}, {});
  const int r = dist::rank(), w = dist::world_size();
  (sum(a * (r + 1.0)) + sum(b * (r + 2.0))).backward();
  ddp.wait();
  const double mean_b = (w + 3.0) / 2;  // mean of r + 2
  CHECK(b.grad().at({0}) == doctest::Approx(mean_b));
  a.zero_grad();
  sum(a * 5.0).backward();  // b not reached: its gradient is the view from the last exchange
  ddp.wait();
  CHECK(a.grad().at({1}) == doctest::Approx(5.0));
  CHECK(b.grad().at({1}) == doctest::Approx(mean_b));
}

TEST_CASE("dist: bucket sizes below one byte are refused") {
  Tensor w = ones({2}).requires_grad_();
  dist::DataParallelOptions o;
  o.bucket_bytes = 0;
  std::string msg;
  try {
    dist::DataParallel ddp({w}, {}, o);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  CHECK(msg.find("DataParallel: bucket_bytes 0 and last_bucket_bytes 1048576: expected at least 1") != std::string::npos);
}

TEST_CASE("dist: bf16_exchange sends half the bytes and gives the mean gradient to bf16 rounding") {
  models::Transformer a(small_config()), b(small_config());
  dist::DataParallelOptions o;
  dist::DataParallel exact(a, o);
  o.bf16_exchange = true;
  dist::DataParallel half(b, o);
  CHECK(half.stats().bytes * 2 == exact.stats().bytes);
  const auto all = global_batch(4 * dist::world_size(), 900);
  const auto part = models::make_batch(std::vector<models::Example>(all.begin() + 4 * dist::rank(), all.begin() + 4 * dist::rank() + 4));
  a.loss(part.src, part.tgt_in, part.tgt_out, 0.1).backward();
  b.loss(part.src, part.tgt_in, part.tgt_out, 0.1).backward();
  exact.wait();
  half.wait();
  // Each process's gradient over N rounded to bf16 (relative 2^-9), then N - 1
  // sums each rounded: within N x 2^-8 of the largest magnitude of each tensor.
  double worst = 0;
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    const auto x = pa[i].grad().to_vector(), y = pb[i].grad().to_vector();
    double big = 0, diff = 0;
    for (size_t j = 0; j < x.size(); ++j) big = std::max(big, std::abs(x[j])), diff = std::max(diff, std::abs(x[j] - y[j]));
    if (big > 0) worst = std::max(worst, diff / big);
  }
  MESSAGE("bf16 exchange at " << dist::world_size() << " processes: worst gradient difference " << worst
                              << " of the tensor's largest magnitude");
  if (dist::world_size() > 1) {
    CHECK(worst > 0);  // rounded: not the float32 exchange
    CHECK(worst <= dist::world_size() * std::pow(2.0, -8));
  }
}

// Two copies of one model trained side by side through DataParallel, one by
// Adam, the other by the same Adam under ZeroRedundancyOptimizer.
struct ZeroRun {
  models::Transformer plain, sharded;
  dist::DataParallel ddp_plain, ddp_sharded;
  optim::Adam opt;
  dist::ZeroRedundancyOptimizer zero;
  explicit ZeroRun(Dtype dtype)
      : plain(small_config()),
        sharded(small_config()),
        ddp_plain((plain.to(dtype), plain)),
        ddp_sharded((sharded.to(dtype), sharded)),
        opt(plain.parameters(), adam()),
        zero(optim::one_group(sharded.parameters()), kLr, [](std::vector<optim::ParamGroup> shard) {
          return std::make_unique<optim::Adam>(std::move(shard), adam());
        }) {}
  static optim::AdamOptions adam() {
    optim::AdamOptions o;
    o.lr = kLr;
    o.weight_decay = 0.01;
    return o;
  }
  void steps(int first, int n) {
    const int world = dist::world_size(), rank = dist::rank();
    for (int s = first; s < first + n; ++s) {
      const auto all = global_batch(4 * world, 300 + s);
      const auto part = models::make_batch(std::vector<models::Example>(all.begin() + 4 * rank, all.begin() + 4 * rank + 4));
      for (auto [model, ddp, o] : {std::tuple<models::Transformer*, dist::DataParallel*, optim::Optimizer*>{&plain, &ddp_plain, &opt},
                                   {&sharded, &ddp_sharded, &zero}}) {
        o->zero_grad();
        model->loss(part.src, part.tgt_in, part.tgt_out, 0.1).backward();
        ddp->wait();
        o->step();
      }
    }
  }
};

double max_state_difference(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (const auto& [k, t] : a) {
    REQUIRE(b.count(k));
    const auto x = t.to_vector(), y = b.at(k).to_vector();
    REQUIRE(x.size() == y.size());
    for (size_t j = 0; j < x.size(); ++j) worst = std::max(worst, std::abs(x[j] - y[j]));
  }
  return worst;
}

TEST_CASE("dist: ZeroRedundancyOptimizer gives Adam's weights bit for bit, with 1/N of its state") {
  for (Dtype dtype : {f64, f32}) {
    ZeroRun r(dtype);
    r.steps(0, 4);
    const Diff d = compare(r.sharded, r.plain);
    CHECK(d.max_abs == 0);
    CHECK(d.key_bias_max_abs == 0);
    // Each process's share of the state: the unsharded state over N, plus
    // at most the largest parameter's two moments (whole parameters are shared out).
    int64_t largest = 0;
    for (const Tensor& p : r.plain.parameters()) largest = std::max(largest, p.numel() * dtype_size(p.dtype()));
    const int64_t full = r.opt.state_bytes(), mine = r.zero.state_bytes();
    MESSAGE(std::string(dtype_name(dtype)) << " at " << dist::world_size() << " processes: Adam state " << full
                              << " bytes unsharded, " << mine << " on rank " << dist::rank() << " (bound "
                              << full / dist::world_size() + 2 * largest << ")");
    CHECK(mine <= full / dist::world_size() + 2 * largest);
    CHECK(dist::allreduce(static_cast<double>(mine)) == static_cast<double>(full));
  }
}

TEST_CASE("dist: ZeroRedundancyOptimizer's state dict is Adam's, and loading it resumes the same run") {
  ZeroRun r(f64);
  r.steps(0, 3);
  const auto gathered = r.zero.state_dict();
  CHECK(max_state_difference(gathered, r.opt.state_dict()) == 0);
  const auto on_last = r.zero.consolidate_state_dict(dist::world_size() - 1);  // on one rank only
  if (dist::rank() == dist::world_size() - 1)
    CHECK(max_state_difference(on_last, gathered) == 0);
  else
    CHECK(on_last.empty());
  // A fresh sharded optimiser loaded from the unsharded state continues as Adam does.
  models::Transformer fresh(small_config());
  fresh.to(f64);
  fresh.load_state_dict(r.sharded.state_dict());
  dist::DataParallel ddp(fresh);
  dist::ZeroRedundancyOptimizer z(optim::one_group(fresh.parameters()), kLr, [](std::vector<optim::ParamGroup> shard) {
    return std::make_unique<optim::Adam>(std::move(shard), ZeroRun::adam());
  });
  z.load_state_dict(r.opt.state_dict());
  CHECK(z.steps() == 3);
  CHECK(max_state_difference(z.state_dict(), gathered) == 0);
  // A state of another model size is refused by name, and nothing changes.
  auto bad = gathered;
  bad["0.exp_avg"] = zeros({3}, f64);
  std::string msg;
  try {
    z.load_state_dict(bad);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("ZeroRedundancyOptimizer state: '0.exp_avg' is (3,) float64, parameter 0 is (12,32)") != std::string::npos);
  CHECK(max_state_difference(z.state_dict(), gathered) == 0);
}

int main(int argc, char** argv) {
  dist::Environment env(&argc, &argv);
  doctest::Context ctx(argc, argv);
  if (dist::rank() != 0) ctx.setOption("out", "/dev/null");  // one report, from rank 0
  const int failed = ctx.run();
  // Every process's verdict: a failure on any rank fails the job.
  const double any = dist::allreduce(failed ? 1.0 : 0.0);
  if (dist::rank() == 0 && any > 0 && !failed) std::fprintf(stderr, "test_dist: a test failed on another rank\n");
  std::fprintf(stderr, "test_dist: rank %d of %d done, %d failed here\n", dist::rank(), dist::world_size(), failed);
  return any > 0 ? 1 : 0;
}
