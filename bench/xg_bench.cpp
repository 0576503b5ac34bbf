// xgrad's side of the benchmark (bench/compare.py runs it beside bench/torch_bench.py).
// Every mode prints one JSON object per line. With XG_PHASES=1 in the
// environment, train also prints each step's forward/backward/step ms to stderr.
//
//   xg_bench train  --vocab V --len L --d-model C --heads H --layers N --d-ff F --batch B [--steps K] [--warmup W]
//                   [--threads T] [--precision f32|bf16]
//   xg_bench decode (same model flags) [--sequences 64] [--reps 3] [--cache 1|0]
//   xg_bench sgemm  [--threads T]
//   xg_bench micro  [--batch 80] [--len 10] [--only attention_core|layer_norm|linear|log_softmax_nll] [--reps 20]
//   xg_bench converge --task copy|reverse [--precision f32|bf16] [--seed 1] [--max-steps 4000] [--threads T]
//   xg_bench xtensor [--batch 80] [--len 10] [--reps 20] [--threads T]: xgrad's kernels vs xtensor expressions
//   xg_bench rnn    --cell lstm|gru --batch B --len T --input C --hidden H [--precision f32|bf16] [--threads T]
//                   [--reps 10] [--warmup 3]: one layer's forward + backward, and the time its products take
//                   alone at the engine's best speed on each of their shapes; rss_mb is the peak before
//                   those timings allocate their buffers
// Any mode: --emulate-bf16 1 lets bf16 run emulated in float32 where the CPU
// has no bf16 (engine::set_bf16_emulation): for memory figures, not times.
// A flag it does not know, a value that is not a whole number in the flag's
// range, or an unknown mode ends it with a message and exit code 2.
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/xtensor.h"
#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "autograd/xg.h"
#include "engine/gemm.h"
#include "distributed/data_parallel.h"
#include "apps/seq2seq/seq2seq.h"
#include "models/image_model.h"
#include "models/transformer.h"
#include "nn/rnn.h"
#include "optim/optim.h"

using namespace xg;
using clk = std::chrono::steady_clock;

namespace {

// Every flag, with what it sets (and in which modes) for --help.
const std::map<std::string, std::string> kFlags = {
    {"vocab", "train, decode: vocabulary size (V)"},
    {"len", "train, decode: sequence length (T); micro, xtensor: rows per sequence; rnn: time steps"},
    {"d-model", "train, decode: model width (C)"},
    {"heads", "train, decode: attention heads (H)"},
    {"layers", "train, decode: encoder and decoder layers (N)"},
    {"d-ff", "train, decode: feed-forward width"},
    {"batch", "sequences a step (B)"},
    {"steps", "train, ddp: timed steps"},
    {"warmup", "train, ddp, rnn: untimed steps before the timed ones"},
    {"threads", "threads of xgrad's pool"},
    {"precision", "train, ddp, converge, rnn: f32 or bf16 (Autocast)"},
    {"emulate-bf16", "1: bf16 products emulated in float32 where the CPU has no bf16 (memory figures only: slow)"},
    {"sequences", "decode: sequences decoded"},
    {"reps", "decode, micro, xtensor, rnn: timed repetitions"},
    {"cache", "decode: 1 with the key/value cache, 0 without"},
    {"only", "micro: one kernel (attention_core, layer_norm, linear, log_softmax_nll)"},
    {"task", "converge: copy or reverse"},
    {"seed", "converge: random seed"},
    {"max-steps", "converge: the most steps before giving up"},
    {"bucket-mb", "ddp: gradient bucket size in MB"},
    {"bucket-kb", "ddp: gradient bucket size in KB (instead of --bucket-mb)"},
    {"bf16-exchange", "ddp: 1 sends float32 gradients as bf16 (DataParallelOptions::bf16_exchange)"},
    {"model", "ddp: transformer (the --vocab ... --batch flags) or resnet (ResNet-20, --batch 28x28 images)"},
    {"comm", "ddp: 1 exchanges the gradients, 0 lets each process train alone (the cost of running side by side)"},
    {"progress-thread", "ddp: 1 (default) a thread moves the exchange forward, 0 the backward thread between formulas"},
    {"cell", "rnn: lstm or gru"},
    {"input", "rnn: input width (C)"},
    {"hidden", "rnn: hidden width (H)"}};

// The command line (CLI11): a mode, then --flag value pairs, kept as text and
// checked where they are read (geti: a whole number in range).
std::map<std::string, std::string> parse(int argc, char** argv, std::string& mode) {
  CLI::App app;
  app.name("xg_bench");
  app.description("xgrad's side of bench/run.sh: one JSON line of timings per run.");
  app.add_option("mode", mode, "train, ddp (under mpirun), decode, sgemm, micro, converge, xtensor or rnn")->required();
  std::map<std::string, std::string> a;
  for (const auto& [f, what] : kFlags)
    app.add_option_function<std::string>("--" + f, [&a, f = f](const std::string& v) { a[f] = v; }, what)
        ->type_name("VALUE");
  app.footer("Modes and their flags are listed at the top of bench/xg_bench.cpp; every mode prints one JSON line.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    std::exit(0);
  }
  return a;
}
// The value of --k (d when absent): a whole number in [lo, hi].
int64_t geti(const std::map<std::string, std::string>& a, const std::string& k, int64_t d, int64_t lo = 1,
             int64_t hi = int64_t(1) << 20) {
  auto it = a.find(k);
  if (it == a.end()) return d;
  const std::string& v = it->second;
  const std::optional<int64_t> x = parse_whole_number(v);
  if (!x || *x < lo || *x > hi)
    throw std::invalid_argument(fmt::format("--{} {}: expected a whole number from {} to {}", k, v, lo, hi));
  return *x;
}
std::string gets(const std::map<std::string, std::string>& a, const std::string& k, const std::string& d) {
  auto it = a.find(k);
  return it == a.end() ? d : it->second;
}
double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}
std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

struct Cfg {
  int64_t vocab, len, d_model, heads, layers, d_ff, batch;
};
models::TransformerConfig tcfg(const Cfg& c) {
  models::TransformerConfig t;
  t.src_vocab = t.tgt_vocab = c.vocab;
  t.d_model = c.d_model;
  t.heads = c.heads;
  t.layers = c.layers;
  t.d_ff = c.d_ff;
  t.dropout = 0.1;
  t.max_len = c.len + 2;
  return t;
}
Cfg model_cfg(const std::map<std::string, std::string>& a) {
  const Cfg c{geti(a, "vocab", 16, 4, 1 << 20),    geti(a, "len", 12, 1, 4096),     geti(a, "d-model", 64, 1, 8192),
          geti(a, "heads", 4, 1, 1024),        geti(a, "layers", 2, 1, 64),     geti(a, "d-ff", 256, 1, 1 << 16),
          geti(a, "batch", 64, 1, 4096)};
  // A model that cannot fit is refused before it is built (allocation would
  // otherwise succeed and the machine page until it runs out).
  models::check_fits_in_memory(tcfg(c).parameter_count());
  return c;
}
// Matmul FLOPs of one forward pass (S = T = L), the same formula in torch_bench.py.
double forward_flops(const Cfg& c) {
  const double B = c.batch, L = c.len, C = c.d_model, F = c.d_ff, V = c.vocab, N = c.layers;
  const double enc = 8 * B * L * C * C + 4 * B * L * L * C + 4 * B * L * C * F;
  const double dec = 16 * B * L * C * C + 8 * B * L * L * C + 4 * B * L * C * F;
  return N * (enc + dec) + 2 * B * L * C * V;
}
// Random full-length batches (no padding), as in torch_bench.py.
models::Batch random_batch(Generator& g, int64_t rows, int64_t cols, int64_t vocab, int64_t first) {
  models::Batch b{{}, rows, cols};
  for (int64_t i = 0; i < rows * cols; ++i)
    b.ids.push_back(first + static_cast<int64_t>(g.engine()() % static_cast<uint64_t>(vocab - first)));
  return b;
}

// One training step's batch: random sources, and targets shifted by one
// into decoder inputs and outputs (B, L each).
struct StepBatch {
  models::Batch src, tin, tout;
};
StepBatch random_step(Generator& g, const Cfg& c) {
  StepBatch b{random_batch(g, c.batch, c.len, c.vocab, 3), {{}, c.batch, c.len}, {{}, c.batch, c.len}};
  const models::Batch tgt = random_batch(g, c.batch, c.len + 1, c.vocab, 3);
  for (int64_t r = 0; r < c.batch; ++r)
    for (int64_t j = 0; j < c.len; ++j) {
      b.tin.ids.push_back(tgt.at(r, j));
      b.tout.ids.push_back(tgt.at(r, j + 1));
    }
  return b;
}

int train_mode(const std::map<std::string, std::string>& a) {
  Cfg c = model_cfg(a);
  const int64_t steps = geti(a, "steps", 20), warm = geti(a, "warmup", 3, 0);
  const Precision precision = parse_precision(gets(a, "precision", "f32"));
  models::Transformer model(tcfg(c));
  optim::AdamOptions ao;
  ao.lr = 1e-4;
  ao.beta2 = 0.98;
  ao.eps = 1e-9;
  optim::Adam opt(model.parameters(), ao);
  Generator g(1);
  std::vector<double> times;
  int64_t saved = 0;
  for (int64_t s = 0; s < warm + steps; ++s) {
    const auto [src, tin, tout] = random_step(g, c);
    auto t0 = clk::now();
    opt.zero_grad();
    const int64_t before = memory_stats().current_bytes;
    Tensor loss;
    {
      Autocast cast(precision);  // forward and loss, as torch.autocast
      loss = model.loss(src, tin, tout, 0.1);
    }
    saved = memory_stats().current_bytes - before;  // what forward keeps for backward
    auto t1 = clk::now();
    loss.backward();
    auto t2 = clk::now();
    opt.step();
    double ms = ms_since(t0);
    if (std::getenv("XG_PHASES"))
      std::fprintf(stderr, "fwd %.2f bwd %.2f step %.2f\n", std::chrono::duration<double, std::milli>(t1 - t0).count(),
                   std::chrono::duration<double, std::milli>(t2 - t1).count(), ms_since(t2));
    if (s >= warm) times.push_back(ms);
  }
  // Tensor storage at its peak; what parameters, gradients and Adam's two
  // moments take by themselves; and what the last forward saved for backward.
  const double mb = 1024.0 * 1024.0, state = 4.0 * model.num_parameters() * sizeof(float) / mb;
  std::printf("{\"mode\":\"train\",\"precision\":\"%s\",\"ms\":%s,\"flops\":%.6g,\"params\":%lld,\"rss_mb\":%.1f,"
              "\"tensor_peak_mb\":%.1f,\"state_mb\":%.1f,\"activations_mb\":%.1f}\n",
              precision_name(precision), list(times).c_str(), 3 * forward_flops(c), (long long)model.num_parameters(), peak_rss_mb(),
              memory_stats().peak_bytes / mb, state, saved / mb);
  return 0;
}

int decode(const std::map<std::string, std::string>& a) {
  Cfg c = model_cfg(a);
  const int64_t n = geti(a, "sequences", 64), reps = geti(a, "reps", 3);
  const bool use_cache = geti(a, "cache", 1, 0, 1) != 0;
  models::Transformer model(tcfg(c));
  model.eval();
  Generator g(2);
  models::Batch src = random_batch(g, n, c.len, c.vocab, 3);
  std::vector<double> times;
  for (int64_t r = 0; r < reps + 1; ++r) {
    auto t0 = clk::now();
    std::vector<std::vector<int64_t>> out;
    if (use_cache) {
      // eos = -1: never stops early, so both sides decode exactly `len` tokens
      out = models::greedy_decode(model, src, 1, -1, c.len);
    } else {
      // Like for like with PyTorch's side: no KV cache, the decoder reruns on
      // the whole prefix at every step; the encoder runs once.
      NoGradGuard no_grad;
      const Tensor pad = model.padding_mask(src);
      const Tensor memory = model.encode(src);
      models::Batch ys{std::vector<int64_t>(static_cast<size_t>(n), 1), n, 1};
      out.assign(static_cast<size_t>(n), {});
      for (int64_t t = 0; t < c.len; ++t) {
        const Tensor logits = model.decode(ys, memory, pad);  // (n, t+1, V)
        models::Batch next{{}, n, t + 2};
        for (int64_t r = 0; r < n; ++r) {
          const float* row = logits.data<float>() + (r * (t + 1) + t) * c.vocab;
          const int64_t best = std::max_element(row, row + c.vocab) - row;
          out[static_cast<size_t>(r)].push_back(best);
          for (int64_t j = 0; j <= t; ++j) next.ids.push_back(ys.at(r, j));
          next.ids.push_back(best);
        }
        ys = std::move(next);
      }
    }
    double ms = ms_since(t0);
    if (r > 0) times.push_back(ms);
    if (static_cast<int64_t>(out[0].size()) != c.len) std::fprintf(stderr, "decode: unexpected length\n");
  }
  std::printf("{\"mode\":\"decode\",\"ms\":%s,\"rss_mb\":%.1f}\n", list(times).c_str(), peak_rss_mb());
  return 0;
}

// The machine's peaks. "gflops": OpenBLAS's own threading on one 1024^3
// product (the same call PyTorch's side makes). "peaks": each engine on the
// Transformer's shapes (M = batch x length), split by rows across xgrad's pool
// at --threads, one single-threaded engine call per block: OpenBLAS sgemm,
// the f32 engine of this build (oneDNN by default), and bf16 inputs with f32
// output (oneDNN; absent where bf16 is unsupported).
int sgemm(const std::map<std::string, std::string>& a) {
  const int threads = static_cast<int>(geti(a, "threads", 1));
  const int n = 1024;
  const double flop = 2.0 * n * n * n;
  std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n);
  openblas_set_num_threads(threads);
  double best = 0;
  for (int r = 0; r < 23; ++r) {  // the first 3 wake the BLAS threads
    auto t0 = clk::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    double s = ms_since(t0) / 1000;
    if (r >= 3) best = std::max(best, flop / s / 1e9);
  }
  openblas_set_num_threads(1);
  set_num_threads(threads);
  struct Shape3 {
    int64_t m, n, k;
  };
  const std::vector<Shape3> shapes = {{1024, 512, 128}, {800, 2048, 512}, {800, 512, 2048}, {64, 512, 512}, {1024, 1024, 1024}};
  std::vector<float> X(2048 * 2048, 0.5f), Y(2048 * 2048, 0.25f), Z(2048 * 2048);
  std::vector<engine::bf16_t> X16(X.size()), Y16(Y.size());
  engine::to_bf16(X.data(), X16.data(), static_cast<int64_t>(X.size()));
  engine::to_bf16(Y.data(), Y16.data(), static_cast<int64_t>(Y.size()));
  // Best GFLOP/s of 20 timed products after 3 warm-up ones.
  auto peak = [&](const Shape3& sh, const std::function<void(int64_t, int64_t)>& rows) {
    double top = 0;
    for (int r = 0; r < 23; ++r) {
      auto t0 = clk::now();
      parallel_for((sh.m + 15) / 16, 2 * 16 * sh.n * sh.k, [&](int64_t u0, int64_t u1) {
        rows(u0 * 16, std::min<int64_t>(sh.m, u1 * 16));
      });
      const double s = ms_since(t0) / 1000;
      if (r >= 3) top = std::max(top, 2.0 * sh.m * sh.n * sh.k / s / 1e9);
    }
    return top;
  };
  const bool bf16_ok = engine::bf16_unsupported_reason().empty();
  std::string rows = "[";
  for (const auto& sh : shapes) {
    const double ob = peak(sh, [&](int64_t i0, int64_t i1) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, sh.n, sh.k, 1.0f, X.data() + i0 * sh.k, sh.k,
                  Y.data(), sh.n, 0.0f, Z.data() + i0 * sh.n, sh.n);
    });
    const double f32 = peak(sh, [&](int64_t i0, int64_t i1) {
      engine::gemm(false, false, i1 - i0, sh.n, sh.k, 1.0f, X.data() + i0 * sh.k, sh.k, Y.data(), sh.n, 0.0f,
                   Z.data() + i0 * sh.n, sh.n);
    });
    const double b16 = !bf16_ok ? 0 : peak(sh, [&](int64_t i0, int64_t i1) {
      engine::gemm_bf16(false, false, i1 - i0, sh.n, sh.k, 1.0f, X16.data() + i0 * sh.k, sh.k, Y16.data(), sh.n,
                        0.0f, Z.data() + i0 * sh.n, sh.n);
    });
    rows += fmt::format("{}{{\"shape\":\"{}x{}x{}\",\"openblas\":{:.1f},\"f32\":{:.1f},\"bf16\":{:.1f}}}",
                        rows.size() > 1 ? "," : "", sh.m, sh.n, sh.k, ob, f32, b16);
  }
  rows += "]";
  std::printf("{\"mode\":\"sgemm\",\"gflops\":%.2f,\"core\":\"%s\",\"engine\":\"%s\",\"peaks\":%s}\n", best,
              engine::blas_core().c_str(), engine::describe().c_str(), rows.c_str());
  return 0;
}

// Forward + backward of the hot ops on the "annotated" shapes (--batch 16
// --len 64: base's).
int micro(const std::map<std::string, std::string>& a) {
  Generator g(3);
  const int64_t B = geti(a, "batch", 80), L = geti(a, "len", 10), C = 512, H = 8, V = 11;  // heads of width D = C / H = 64
  const std::string only = gets(a, "only", "");  // one op (for profiles)
  const std::set<std::string> ops = {"attention_core", "layer_norm", "linear", "log_softmax_nll"};
  if (!only.empty() && !ops.count(only))
    throw std::invalid_argument("--only " + only + ": expected one of attention_core, layer_norm, linear, log_softmax_nll");
  const int64_t reps = geti(a, "reps", 20);
  auto time_it = [&](const std::string& name, const std::function<Tensor()>& f, const std::vector<Tensor>& leaves) {
    if (!only.empty() && name != only) return;
    std::vector<double> times;
    for (int r = 0; r < reps + 5; ++r) {
      for (const Tensor& t : leaves) const_cast<Tensor&>(t).zero_grad();
      auto t0 = clk::now();
      Tensor y = f();
      sum(y).backward();
      if (r >= 5) times.push_back(ms_since(t0));
    }
    std::printf("{\"mode\":\"micro\",\"op\":\"%s\",\"ms\":%s}\n", name.c_str(), list(times).c_str());
  };
  // (B,L,C) in and out, heads inside, as in MultiHeadAttention (the fused op)
  Tensor q = randn({B, L, C}, g).requires_grad_(), k = randn({B, L, C}, g).requires_grad_(),
         v = randn({B, L, C}, g).requires_grad_();
  AttentionOptions ao;
  ao.heads = H;
  time_it("attention_core", [&] { return attention(q, k, v, ao); }, {q, k, v});
  Tensor x = randn({B * L, C}, g).requires_grad_(), w = ones({C}).requires_grad_(), b = zeros({C}).requires_grad_();
  time_it("layer_norm", [&] { return layer_norm(x, w, b); }, {x, w, b});
  Tensor W = randn({4 * C, C}, g).requires_grad_(), bias = zeros({4 * C}).requires_grad_();
  time_it("linear", [&] { return linear(x, W, bias); }, {x, W, bias});
  Tensor logits = randn({B * L, V}, g).requires_grad_();
  std::vector<int64_t> tgt(B * L);
  for (auto& t : tgt) t = static_cast<int64_t>(g.engine()() % V);
  time_it("log_softmax_nll", [&] { return cross_entropy(logits, tgt); }, {logits});
  return 0;
}

// xgrad's elementwise kernels against the same expression evaluated by
// xtensor (forward only, no tape), on annotated's feed-forward activations
// (B*L, 4C) = (800, 2048): a broadcast bias add, exp, a row sum.
int xtensor_vs_kernels(const std::map<std::string, std::string>& a) {
  NoGradGuard ng;
  Generator g(4);
  const int64_t R = geti(a, "batch", 80) * geti(a, "len", 10), F = 2048, reps = geti(a, "reps", 20);
  Tensor x = randn({R, F}, g), b = randn({F}, g);
  auto xx = as_xtensor<float>(x);
  auto xb = as_xtensor<float>(b);
  xt::xtensor<float, 2> out = xt::zeros<float>({static_cast<size_t>(R), static_cast<size_t>(F)});
  xt::xtensor<float, 1> rows = xt::zeros<float>({static_cast<size_t>(R)});
  auto time_it = [&](const char* op, const char* side, const std::function<void()>& f) {
    std::vector<double> times;
    for (int64_t r = 0; r < reps + 3; ++r) {
      auto t0 = clk::now();
      f();
      if (r >= 3) times.push_back(ms_since(t0));
    }
    std::printf("{\"mode\":\"xtensor\",\"op\":\"%s\",\"side\":\"%s\",\"threads\":%d,\"ms\":%s}\n", op, side,
                num_threads(), list(times).c_str());
  };
  Tensor keep;
  time_it("bias_add", "xgrad", [&] { keep = x + b; });
  time_it("bias_add", "xtensor", [&] { xt::noalias(out) = xx + xb; });
  time_it("exp", "xgrad", [&] { keep = exp(x); });
  time_it("exp", "xtensor", [&] { xt::noalias(out) = xt::exp(xx); });
  time_it("row_sum", "xgrad", [&] { keep = sum(x, {1}); });
  time_it("row_sum", "xtensor", [&] { xt::noalias(rows) = xt::sum(xx, {1}); });
  return 0;
}

int converge(const std::map<std::string, std::string>& a) {
  seq2seq::Seq2SeqOptions j;  // the library's defaults: the copy task, a small model
  j.model.dropout = 0;
  j.task.task = seq2seq::parse_task(gets(a, "task", "copy"));
  j.seed = static_cast<uint64_t>(geti(a, "seed", 1, 0));
  train::TrainOptions o = seq2seq::default_recipe();
  o.steps = geti(a, "max-steps", 4000);
  o.precision = parse_precision(gets(a, "precision", "f32"));
  o.seed = j.seed;
  seq2seq::Seq2SeqJob job(j);
  train::Trainer t(job, o);
  const int64_t eval_every = 100;
  auto t0 = clk::now();
  double em = 0;
  while (t.steps_done() < o.steps) {
    t.step();
    if (t.steps_done() % eval_every == 0) {
      em = job.evaluate_all(0).exact_match;
      if (em >= 0.99) break;
    }
  }
  std::printf("{\"mode\":\"converge\",\"precision\":\"%s\",\"task\":\"%s\",\"seed\":%llu,\"steps\":%lld,\"seconds\":%.2f,\"exact_match\":%.4f}\n",
              precision_name(o.precision), seq2seq::task_name(j.task.task), (unsigned long long)o.seed,
              (long long)t.steps_done(),
              ms_since(t0) / 1000, em);
  return 0;
}

}  // namespace

// Data-parallel training under `mpirun -np P` (weak scaling: --batch per
// process, global batch P*B), each process on its own random batches. Rank 0
// prints the step times, the time each step blocked in DataParallel::wait()
// (communication not hidden behind backward) and the time one blocking
// allreduce of all the gradients takes by itself.
int ddp_mode(const std::map<std::string, std::string>& a) {
  const int64_t steps = geti(a, "steps", 20), warm = geti(a, "warmup", 3, 0);
  const Precision precision = parse_precision(gets(a, "precision", "f32"));
  const std::string which = gets(a, "model", "transformer");
  if (which != "transformer" && which != "resnet")
    throw std::invalid_argument("--model '" + which + "': expected transformer or resnet");
  // Either model and its optimiser, and one step's loss on a fresh random
  // batch: the Transformer of --vocab ... --batch with Adam, or ResNet-20 on
  // --batch random 28x28 images with AdamW (vision train's defaults).
  Cfg c = model_cfg(a);
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  Generator g(1 + static_cast<uint64_t>(dist::rank()));
  std::function<Tensor()> loss_of_batch;
  int64_t items = 0;  // tokens or images a step, every process
  if (which == "transformer") {
    auto t = std::make_shared<models::Transformer>(tcfg(c));
    optim::AdamOptions ao;
    ao.lr = 1e-4;
    ao.beta2 = 0.98;
    ao.eps = 1e-9;
    opt = std::make_unique<optim::Adam>(t->parameters(), ao);
    loss_of_batch = [t, &g, &c] {
      const auto [src, tin, tout] = random_step(g, c);
      return t->loss(src, tin, tout, 0.1);
    };
    model = t;
    items = c.batch * c.len;
  } else {
    model = models::make_image_model(models::ResNetConfig{}).module;
    optim::AdamWOptions wo;
    wo.lr = 1e-3;
    opt = std::make_unique<optim::AdamW>(model->parameters(), wo);
    loss_of_batch = [model, &g, &c] {
      const Tensor images = rand({c.batch, 1, 28, 28}, g);
      std::vector<int64_t> labels(static_cast<size_t>(c.batch));
      for (auto& y : labels) y = static_cast<int64_t>(g.uniform() * 10) % 10;
      return cross_entropy(model->forward(images), labels);
    };
    items = c.batch;
  }
  dist::DataParallelOptions o;
  o.bucket_bytes =
      a.count("bucket-kb") ? geti(a, "bucket-kb", 0, 1, 4 << 20) << 10 : geti(a, "bucket-mb", 25, 1, 4096) << 20;
  o.progress_thread = geti(a, "progress-thread", 1, 0, 1) == 1;
  o.bf16_exchange = geti(a, "bf16-exchange", 0, 0, 1) == 1;
  // --comm 0: the same processes without any exchange (each trains alone):
  // what running side by side costs by itself (shared memory bandwidth).
  const bool comm = geti(a, "comm", 1, 0, 1) == 1;
  std::vector<Tensor> params, buffers;
  if (comm) {
    params = model->parameters();
    for (auto& [name, t] : model->named_buffers()) buffers.push_back(t);
  }
  dist::DataParallel ddp(params, buffers, o);
  std::vector<double> times, waits, packs;
  for (int64_t s = 0; s < warm + steps; ++s) {
    dist::barrier();  // every process starts the step together
    const double waited = ddp.stats().wait_seconds, packed = ddp.stats().pack_seconds;
    auto t0 = clk::now();
    opt->zero_grad();
    Tensor loss;
    {
      Autocast cast(precision);
      loss = loss_of_batch();
    }
    loss.backward();
    ddp.wait();
    opt->step();
    if (s >= warm) {
      times.push_back(ms_since(t0));
      waits.push_back(1e3 * (ddp.stats().wait_seconds - waited));
      packs.push_back(1e3 * (ddp.stats().pack_seconds - packed));
    }
  }
  // One blocking allreduce of every gradient byte, alone: what wait() would
  // cost if nothing overlapped.
  std::vector<double> alone;
  Tensor all = zeros({std::max<int64_t>(1, ddp.stats().bytes / 4)});
  for (int i = 0; i < 5; ++i) {
    dist::barrier();
    auto t0 = clk::now();
    dist::allreduce(all);
    alone.push_back(ms_since(t0));
  }
  std::sort(alone.begin(), alone.end());
  if (dist::rank() == 0)
    std::printf("{\"mode\":\"ddp\",\"side\":\"xgrad\",\"processes\":%d,\"threads\":%d,\"precision\":\"%s\","
                "\"ms\":%s,\"wait_ms\":%s,\"pack_ms\":%s,\"allreduce_ms\":%.3f,\"bytes\":%lld,\"buckets\":%lld,"
                "\"started_in_backward\":%lld,\"progress_thread\":%d,\"%s_per_step\":%lld,\"core\":\"%s\"}\n",
                dist::world_size(), num_threads(), precision_name(precision), list(times).c_str(),
                list(waits).c_str(), list(packs).c_str(), alone[alone.size() / 2], (long long)ddp.stats().bytes,
                (long long)ddp.stats().buckets, (long long)ddp.stats().started_in_backward,
                ddp.stats().progress_thread ? 1 : 0, which == "resnet" ? "images" : "tokens",
                (long long)(dist::world_size() * items),
                engine::blas_core().c_str());
  return 0;
}

// One recurrent layer (nn::LSTM or nn::GRU), forward and backward of the sum
// of its output with the input requiring a gradient (bench/rnn.py runs the
// same in PyTorch). `products_ms` is what the layer's matrix products take
// by themselves, each shape at the best speed the engine reaches on it
// (best of 10 after 2 warm-up calls, split across the threads as matmul
// splits it): the bound the layer's time is measured against.
int rnn_mode(const std::map<std::string, std::string>& a) {
  const std::string cell = gets(a, "cell", "lstm");
  if (cell != "lstm" && cell != "gru") throw std::invalid_argument("--cell " + cell + ": expected lstm or gru");
  const int64_t B = geti(a, "batch", 64, 1, 4096), T = geti(a, "len", 32, 1, 4096), C = geti(a, "input", 256, 1, 8192),
                H = geti(a, "hidden", 512, 1, 8192), reps = geti(a, "reps", 10), warm = geti(a, "warmup", 3, 0);
  const Precision precision = parse_precision(gets(a, "precision", "f32"));
  const int64_t G = cell == "lstm" ? 4 : 3, GH = G * H;
  Generator gen(1);
  const auto o = nn::RNNOptions(C, H).batch_first(true);
  std::unique_ptr<nn::RNNBase> layer;
  if (cell == "lstm")
    layer = std::make_unique<nn::LSTM>(o, gen);
  else
    layer = std::make_unique<nn::GRU>(o, gen);
  Tensor x = randn({B, T, C}, gen).requires_grad_();
  std::vector<double> times;
  for (int64_t r = 0; r < warm + reps; ++r) {
    layer->zero_grad();
    x.zero_grad();
    auto t0 = clk::now();
    Tensor y;
    {
      Autocast cast(precision);
      y = layer->forward(x, Tensor()).output;
    }
    sum(y).backward();
    if (r >= warm) times.push_back(ms_since(t0));
  }
  const double layer_rss_mb = peak_rss_mb();  // before the buffers of the product timings below
  // The products: (m, n, k, transposed A, transposed B, how many).
  struct Product {
    int64_t m, n, k;
    bool ta, tb;
    int64_t count;
  };
  const std::vector<Product> products = {
      {B * T, GH, C, false, true, 1},  // input products, forward
      {B, GH, H, false, true, T},      // recurrent product, each step
      {B * T, C, GH, false, false, 1},  // input's gradient
      {GH, C, B * T, true, false, 1},   // weight_ih's gradient
      {B, H, GH, false, false, T},      // the state's gradient, each step
      {GH, H, B * T, true, false, 1}};  // weight_hh's gradient, all steps at once
  const bool bf16 = precision == Precision::bf16;
  std::vector<float> A(4 * 1024 * 1024 + B * T * GH), Bm(A.size()), Cm(A.size());
  std::vector<engine::bf16_t> A16(A.size()), B16(A.size());
  double bound_ms = 0;
  std::string each;  // [m, n, k, ta, tb, count, best ms of one]
  for (const Product& p : products) {
    if (p.m * p.k > static_cast<int64_t>(A.size()) || p.k * p.n > static_cast<int64_t>(A.size()) ||
        p.m * p.n > static_cast<int64_t>(A.size()))
      throw std::invalid_argument("--batch/--len/--hidden: a product is too large for the benchmark's buffers");
    const int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
    double best = 1e30;
    for (int r = 0; r < 12; ++r) {
      auto t0 = clk::now();
      // Split as matmul splits: blocks of 16 rows of C, or of columns when n > m.
      const bool by_rows = p.m >= p.n;
      const int64_t units = ((by_rows ? p.m : p.n) + 15) / 16;
      parallel_for(units, 2 * 16 * (by_rows ? p.n : p.m) * p.k, [&](int64_t u0, int64_t u1) {
        const int64_t i0 = u0 * 16, i1 = std::min(by_rows ? p.m : p.n, u1 * 16);
        const int64_t m = by_rows ? i1 - i0 : p.m, n = by_rows ? p.n : i1 - i0;
        const int64_t ao = by_rows ? (p.ta ? i0 : i0 * lda) : 0, bo = by_rows ? 0 : (p.tb ? i0 * ldb : i0);
        const int64_t co = by_rows ? i0 * p.n : i0;
        if (bf16)
          engine::gemm_bf16(p.ta, p.tb, m, n, p.k, 1.0f, A16.data() + ao, lda, B16.data() + bo, ldb, 0.0f,
                            Cm.data() + co, p.n);
        else
          engine::gemm(p.ta, p.tb, m, n, p.k, 1.0f, A.data() + ao, lda, Bm.data() + bo, ldb, 0.0f, Cm.data() + co,
                       p.n);
      });
      if (r >= 2) best = std::min(best, ms_since(t0));
    }
    bound_ms += best * static_cast<double>(p.count);
    each += fmt::format("{}[{},{},{},{},{},{},{:.3f}]", each.empty() ? "" : ",", p.m, p.n, p.k, int(p.ta), int(p.tb),
                        p.count, best);
  }
  std::sort(times.begin(), times.end());
  std::printf("{\"mode\":\"rnn\",\"side\":\"xgrad\",\"cell\":\"%s\",\"batch\":%lld,\"len\":%lld,\"input\":%lld,"
              "\"hidden\":%lld,\"threads\":%d,\"precision\":\"%s\",\"ms\":%s,\"median_ms\":%.2f,\"flops\":%.6g,"
              "\"products_ms\":%.2f,\"products\":[%s],\"core\":\"%s\",\"rss_mb\":%.1f}\n",
              cell.c_str(), (long long)B, (long long)T, (long long)C, (long long)H, num_threads(),
              precision_name(precision), list(times).c_str(), times[times.size() / 2],
              3.0 * 2.0 * B * T * GH * (C + H), bound_ms, each.c_str(), engine::blas_core().c_str(), layer_rss_mb);
  return 0;
}

int main(int argc, char** argv) {
  try {
    std::string mode;
    auto a = parse(argc, argv, mode);
    set_num_threads(static_cast<int>(geti(a, "threads", 1, 1, available_cores())));
    if (geti(a, "emulate-bf16", 0, 0, 1)) {
      engine::set_bf16_emulation(true);
      if (!engine::bf16_unsupported_reason().empty())
        std::fprintf(stderr, "xg_bench: bf16 products emulated in float32 (%s): times are not bf16's\n",
                     engine::bf16_unsupported_reason().c_str());
    }
    if (mode == "train") return train_mode(a);
    if (mode == "ddp") {
      dist::Environment env(&argc, &argv);
      return ddp_mode(a);
    }
    if (mode == "decode") return decode(a);
    if (mode == "sgemm") return sgemm(a);
    if (mode == "micro") return micro(a);
    if (mode == "converge") return converge(a);
    if (mode == "xtensor") return xtensor_vs_kernels(a);
    if (mode == "rnn") return rnn_mode(a);
    std::fprintf(stderr, "xg_bench: unknown mode %s (train, decode, sgemm, micro, converge, xtensor or rnn)\n",
                 mode.c_str());
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "xg_bench: %s (modes: train, decode, sgemm, micro, converge, xtensor, rnn)\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "xg_bench: out of memory: the model, batch or length is too large for this machine\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xg_bench: %s\n", e.what());
  }
  return 2;
}
