#!/usr/bin/env python3
"""Mutation check: does a named test fail on each of these deliberate bugs?

    python3 tests/mutants.py [--build-dir DIR] [--only NAME,...] [--jobs N]
    python3 tests/mutants.py --list     # the mutants, one a line
    python3 tests/mutants.py --check    # every original occurs exactly once; builds nothing

Copies the source tree to a scratch directory (the tree you work in is never
touched), configures it in Release and builds everything once. Before any
mutant, the unmutated copy must pass: every doctest binary, and CTest over the
tests that are not doctest cases. Then, for each mutant, it replaces one exact
piece of code (it must occur exactly once), and:

1. Builds and runs the doctest binaries one after the other (xg_tests, then
   each application's), with doctest's XML reporter, until one names a
   failing test case: the mutant is killed by those cases. A binary that
   crashes or times out without naming a failing case is reported as
   "CRASH/TIMEOUT (no named failing test)": that is not a kill, and the
   binary's cases are left for CTest, which runs each in its own process.
2. If no doctest binary named a failure, builds everything and runs CTest over
   the tests the doctest binaries have not already passed: the command-line
   checks, the application and example runs, the mpirun jobs (dist_np1,
   dist_np2, *_mpi_np2_equals_np1, ...), the install checks and the PyTorch
   parity programs. Killed if CTest names a failing test; survived otherwise.

A mutant that does not compile is reported as "DOES NOT BUILD" and counted
apart, neither killed nor survived: its original no longer fits the code
around it, so the list is stale. The file is restored after each mutant.

Exit status: 0 if every mutant was killed; 1 if any survived or did not
build, or if the unmutated tree does not build or fails a test.

Time: each mutant's line gives its time, rebuilds included; the summary
gives the total and the spread. Measured 2026-11-25 on a 2-vCPU AMD EPYC VM
(Ninja, -j2, other work running beside it; bench/results/2026-11-25-mutants-2.txt):
81 mutants in 46 min 51 s, of which the first build took 7 min 1 s and the
unmutated suite 1 min 37 s (xg_tests 15 s, CTest's 115 other tests 80 s);
then 14-105 s a mutant, median 23 s. A mutant killed by xg_tests costs a
rebuild and one run of it (14-31 s); one left to CTest, 23-75 s, because
CTest stops at the first failure and runs the tests that failed last time
first; a survivor runs everything (55-75 s). A header (autograd/detail/
kernels.h) rebuilds most of the library, twice (mutated, then restored): 105 s.

The bf16 tests run everywhere: on a CPU without AVX512_BF16 or AMX they turn
on emulated bf16 products (engine::set_bf16_emulation), so the autocast
mutants are killed on any machine.
"""
import argparse
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# (name, file, original, mutated): small bugs a careless edit could make.
MUTANTS = [
    # autograd: backward formulas
    ("sub-backward-sign", "autograd/ops_elementwise.cpp",
     "needs_input_grad(1) ? unbroadcast(neg(g), sb)", "needs_input_grad(1) ? unbroadcast(g, sb)"),
    ("div-backward-mul", "autograd/ops_elementwise.cpp",
     "Tensor ga = div(g, b);  // d(a/b)/da = 1/b", "Tensor ga = mul(g, b);"),
    ("tanh-backward-sign", "autograd/ops_elementwise.cpp", "return 1 - y * y;", "return 1 + y * y;"),
    ("sigmoid-backward", "autograd/ops_elementwise.cpp", "return y * (1 - y);", "return y * (1 + y);"),
    ("gelu-backward-sign", "autograd/ops_elementwise.cpp",
     "return cdf + x * 0.39894228040143267794 * std::exp(-0.5 * x * x);",
     "return cdf - x * 0.39894228040143267794 * std::exp(-0.5 * x * x);"),
    ("gelu-float32-backward-sign", "autograd/ops_elementwise.cpp",
     "return cdf + x * 0.39894228f * detail::fast_expf(-0.5f * x * x);",
     "return cdf - x * 0.39894228f * detail::fast_expf(-0.5f * x * x);"),
    ("fast-expf-series-term", "autograd/detail/kernels.h", "p = mul_add(p, r, 0.5f);", "p = mul_add(p, r, 0.25f);"),
    ("log-softmax-backward", "autograd/ops_nn.cpp", "pg[j] - std::exp(py[j]) * dot", "pg[j] - py[j] * dot"),
    ("layer-norm-variance", "autograd/ops_nn.cpp", "std::sqrt(v / T(c) + T(eps))", "std::sqrt(v / T(c - 1) + T(eps))"),
    ("label-smoothing-mass", "autograd/ops_nn.cpp", "(std::exp(lp[r * v + j]) - T(e / v)) * scale",
     "(std::exp(lp[r * v + j]) - T(e / (v - 1))) * scale"),
    ("relu-dropout-scale", "autograd/ops_nn.cpp", "const double keep = 1.0 / (1.0 - p);",
     "const double keep = 1.0 / (1.0 + p);"),
    ("embedding-backward-overwrite", "autograd/ops_nn.cpp", "pt[ids[i] * c + j] += pg[i * c + j];",
     "pt[ids[i] * c + j] = pg[i * c + j];"),
    ("index-select-backward-overwrite", "autograd/ops_nn.cpp", "for (int64_t j = 0; j < inner; ++j) row[j] += gr[j];",
     "for (int64_t j = 0; j < inner; ++j) row[j] = gr[j];"),
    ("int64-conversion-rounds", "autograd/tensor.cpp", "d[i] = static_cast<int64_t>(v);",
     "d[i] = static_cast<int64_t>(std::llround(v));"),
    ("causal-mask-off-by-one", "autograd/ops_attention.cpp", "return (causal && j > i)", "return (causal && j >= i)"),
    ("attention-scale-missing-sqrt", "autograd/ops_attention.cpp", "1.0 / std::sqrt(static_cast<double>(D))",
     "1.0 / static_cast<double>(D)"),
    ("unbroadcast-lead-axes", "autograd/ops_reduce.cpp", "if (i < lead || (shape[i - lead] == 1",
     "if ((i >= lead && shape[i - lead] == 1"),
    ("tape-accumulate-drops-path", "autograd/detail/tape.h", "slot = slot.defined() ? add(slot, g) : g;", "slot = g;"),
    ("version-not-bumped-by-set", "autograd/tensor.cpp",
     "data<decltype(z)>()[i] = static_cast<decltype(z)>(v); });\n  bump_version();",
     "data<decltype(z)>()[i] = static_cast<decltype(z)>(v); });"),
    ("to-backward-no-convert", "autograd/tensor.cpp", "return std::vector<Tensor>{g.to(from)};",
     "return std::vector<Tensor>{g.to(from) * 2.0};"),
    # nn
    ("positional-encoding-base", "nn/positional_encoding.cpp", "std::pow(10000.0,", "std::pow(1000.0,"),
    ("positional-encoding-sin-cos", "nn/positional_encoding.cpp", "c % 2 == 0 ? std::sin(angle) : std::cos(angle)",
     "c % 2 == 0 ? std::cos(angle) : std::sin(angle)"),
    # optim
    ("adam-no-bias-correction-1", "optim/adam.cpp", "o_.eps, lr / bc1,", "o_.eps, lr,"),
    ("adam-no-bias-correction-2", "optim/adam.cpp", "lr / bc1, 1 / std::sqrt(bc2),", "lr / bc1, 1.0,"),
    ("adamw-decay-without-lr", "optim/adam.cpp", "decoupled_ ? 1 - lr * wd : 1};", "decoupled_ ? 1 - wd : 1};"),
    ("sgd-nesterov-ignored", "optim/sgd.cpp", "d = o_.nesterov ? d + o_.momentum * b[i] : b[i];", "d = b[i];"),
    ("grad-norm-tail-unsquared", "optim/clip.cpp", "for (; i < n; ++i) lane[0] += double(d[i]) * double(d[i]);",
     "for (; i < n; ++i) lane[0] += double(d[i]);"),
    ("clip-scale-inverted", "optim/clip.cpp", "const double scale = max_norm / (norm + 1e-6);",
     "const double scale = norm / max_norm;"),
    ("noam-max-not-min", "optim/schedule.cpp", "std::min(1 / std::sqrt(s), s * std::pow(",
     "std::max(1 / std::sqrt(s), s * std::pow("),
    # models
    ("decoder-not-causal", "models/transformer.cpp",
     "h = norm1->forward(y, drop1->forward(self_attn->forward(y, y, y, tgt_pad, /*causal=*/true)));",
     "h = norm1->forward(y, drop1->forward(self_attn->forward(y, y, y, tgt_pad, /*causal=*/false)));"),
    # issue 30: the fused ops, what bf16 saves, Adam in one pass
    ("linear-ce-no-smoothing-in-backward", "autograd/ops_loss.cpp",
     "z[j] = (std::exp(z[j] - l) - smooth) * scale;", "z[j] = std::exp(z[j] - l) * scale;"),
    ("linear-ce-weight-grad-not-summed-over-chunks", "autograd/ops_loss.cpp",
     "T(r0 == 0 ? 0 : 1), dw, pl.c);", "T(0), dw, pl.c);"),
    ("bf16-copy-ignores-version", "autograd/ops_matmul.cpp",
     "    if (buf.bf16_version == version)\n", "    if (true)\n"),
    ("relu-dropout-bit-at-zero", "autograd/ops_nn.cpp",
     "word |= uint64_t(py[i0 + j] > 0) << j;", "word |= uint64_t(py[i0 + j] >= 0) << j;"),
    ("add-layer-norm-residual-gets-zero", "autograd/ops_nn.cpp",
     "if (has_r) g.insert(g.begin() + 1, g[0]);", "if (has_r) g.insert(g.begin() + 1, zeros(g[0].shape(), g[0].dtype()));"),
    ("attention-bf16-k-from-q", "autograd/ops_attention.cpp",
     "from_bf16(*q16, qs), from_bf16(*k16, ks),", "from_bf16(*q16, qs), from_bf16(*q16, ks),"),
    ("adam-one-pass-drops-an-element", "optim/adam.cpp",
     "i1 = std::min(end, start[k + 1]) - start[k];",
     "i1 = std::min(end, start[k + 1]) - start[k] - (k == 0 && end > start[1] ? 1 : 0);"),
    ("beam-length-penalty-without-eos", "models/beam_search.cpp",
     "return h.logp / penalty(h.toks.size() + (h.done ? 1 : 0));", "return h.logp / penalty(h.toks.size());"),
    ("beam-kv-cache-row", "models/beam_search.cpp", "h.row = static_cast<int64_t>(i);", "h.row = 0;"),
    ("embedding-scale-missing", "models/transformer.cpp",
     "return pos->forward(e.forward(b.ids, {b.rows, b.cols}) * std::sqrt(static_cast<double>(cfg_.d_model)));",
     "return pos->forward(e.forward(b.ids, {b.rows, b.cols}));"),
    # the applications (apps/) and the training loop they share (train/)
    ("bpc-in-nats", "apps/char_lm/char_lm.cpp", "return nats / static_cast<double>(predicted) / std::log(2.0);",
     "return nats / static_cast<double>(predicted);"),
    ("g2p-length-batches-uniform-over-lengths", "apps/g2p/g2p.cpp",
     "const int64_t pair = static_cast<int64_t>(data_gen_.engine()() % n);",
     "const int64_t pair = buckets_[data_gen_.engine()() % buckets_.size()].first;"),
    ("edit-distance-substitution-cost", "apps/g2p/cmudict.cpp", "prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)",
     "prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 2)"),
    ("g2p-average-running-mean-weight", "train/trainer.cpp", "(1.0 / static_cast<double>(averaged_ + 1))",
     "(1.0 / static_cast<double>(averaged_ + 2))"),
    ("g2p-stress-kept-by-default", "apps/g2p/g2p.cpp", "if (!opts_.keep_stress)  // the pronunciations",
     "if (false)  // the pronunciations"),
    ("g2p-schedule-ignores-the-clock", "train/trainer.cpp",
     "if (opts_.time_limit <= 0 || !opts_.clock_schedule) return step;", "return step;"),
    ("g2p-festival-ax-kept", "apps/g2p/cmudict.cpp", "if (ph == \"ax\") ph = \"ah\";", "if (false) ph = \"ah\";"),
    # autograd/ops_matmul.cpp: matmul's and linear's products
    ("matmul-backward-b-not-transposed", "autograd/ops_matmul.cpp",  # dA = g B, B's bytes read as (N,K)
     "batched_gemm<In, Out>(batch, cstr, bstr, astr, false, true, m, k, n, g, n, b, n, ga, true);",
     "batched_gemm<In, Out>(batch, cstr, bstr, astr, false, false, m, k, n, g, n, b, k, ga, true);"),
    ("matmul-backward-a-not-transposed", "autograd/ops_matmul.cpp",  # dB = A g, A's bytes read as (K,M)
     "batched_gemm<In, Out>(batch, astr, cstr, bstr, true, false, k, n, m, a, k, g, n, gb, true);",
     "batched_gemm<In, Out>(batch, astr, cstr, bstr, false, false, k, n, m, a, m, g, n, gb, true);"),
    ("matmul-broadcast-grad-overwritten", "autograd/ops_matmul.cpp",  # a broadcast A keeps the last item's dA only
     "m, k, n, g, n, b, n, ga, true);", "m, k, n, g, n, b, n, ga, false);"),
    ("matmul-second-order-grad-not-unbroadcast", "autograd/ops_matmul.cpp",
     "if (needs_input_grad(1)) gb = detail::unbroadcast(matmul(transpose(a, -1, -2), g), b.shape());",
     "if (needs_input_grad(1)) gb = matmul(transpose(a, -1, -2), g);"),
    ("linear-bias-overwritten-by-product", "autograd/ops_matmul.cpp",  # beta 0 where the bias was copied in
     "pl.forward(x.data<T>(), w.data<T>(), b.defined(), out.data<T>());",
     "pl.forward(x.data<T>(), w.data<T>(), false, out.data<T>());"),
    ("linear-bias-grad-first-row", "autograd/ops_matmul.cpp", "return pg[r * out_f + o];", "return pg[o];"),
    ("autocast-casts-float64", "autograd/ops_matmul.cpp",
     "return autocast_precision() == Precision::bf16 && t.dtype() == Dtype::f32;",
     "return autocast_precision() == Precision::bf16;"),
    # autograd/ops_shape.cpp: slices, permutations, concatenation
    ("slice-backward-off-by-one", "autograd/ops_shape.cpp",  # the gradient lands one element early
     "scatter_add_strided(g, out, offset, strides);", "scatter_add_strided(g, out, std::max<int64_t>(offset - 1, 0), strides);"),
    ("slice-backward-ignores-step", "autograd/ops_shape.cpp",  # the step reaches the forward's strides only
     "  strides[ax] *= step;\n  Tensor out = gather_strided(a, out_shape, offset, strides);",
     "  Tensor out = gather_strided(a, out_shape, offset, [&] { auto s = strides; s[ax] *= step; return s; }());"),
    ("slice-end-clamped-one-short", "autograd/ops_shape.cpp",
     "return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };",
     "return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n - 1); };"),
    ("concat-inner-axis-row-stride", "autograd/ops_shape.cpp",  # the output's rows strided by the part's width
     "std::memcpy(d + o * row + col, s + o * w, w * sizeof(T));", "std::memcpy(d + o * w + col, s + o * w, w * sizeof(T));"),
    ("permute-backward-not-inverse", "autograd/ops_shape.cpp",
     "[inv](const Tensor& g) { return std::vector<Tensor>{permute(g, inv)}; }",
     "[p](const Tensor& g) { return std::vector<Tensor>{permute(g, p)}; }"),
    ("split-offset-not-advanced", "autograd/ops_shape.cpp", "    at += s;\n", ""),
    # autograd/serialize.cpp: safetensors
    ("safetensors-header-length-read-big-endian", "autograd/serialize.cpp",
     "n |= static_cast<uint64_t>(len[i]) << (8 * i);", "n |= static_cast<uint64_t>(len[i]) << (8 * (7 - i));"),
    ("safetensors-header-length-written-big-endian", "autograd/serialize.cpp",
     "len[i] = static_cast<unsigned char>(n >> (8 * i));", "len[i] = static_cast<unsigned char>(n >> (8 * (7 - i)));"),
    ("safetensors-end-past-data-unchecked", "autograd/serialize.cpp", "if (e.end > data_size)\n", "if (false)\n"),
    ("safetensors-byte-count-unchecked", "autograd/serialize.cpp",
     "if (e.end - e.begin != count * elem_size(e.dtype))\n", "if (false)\n"),
    ("safetensors-overlap-unchecked", "autograd/serialize.cpp", "if (e.begin < covered)\n", "if (false)\n"),
    ("safetensors-trailing-bytes-accepted", "autograd/serialize.cpp", "if (covered != data_size)\n",
     "if (covered > data_size)\n"),
    # distributed/: allreduce, broadcast, DataParallel (killed under mpirun, by CTest)
    ("data-parallel-scale-integer-division", "distributed/data_parallel.cpp",
     "opts.average ? 1.0 / world_size() : 1.0;", "opts.average ? 1 / world_size() : 1.0;"),
    ("data-parallel-mean-over-contributing-ranks", "distributed/data_parallel.cpp",  # divides by who had a gradient
     "if (flat[b.values + static_cast<int64_t>(k)] == 0) continue;  // no process had a gradient\n",
     "if (flat[b.values + static_cast<int64_t>(k)] == 0) continue;  // no process had a gradient\n"
     "        for (int64_t j = 0; j < p.numel(); ++j)\n"
     "          flat[b.offsets[k] + j] *= T(world_size()) / flat[b.values + static_cast<int64_t>(k)];\n"),
    ("data-parallel-gradient-flag-not-raised", "distributed/data_parallel.cpp",
     "flat[nv + static_cast<int64_t>(k)] = 1;", "flat[nv + static_cast<int64_t>(k)] = 0;"),
    ("data-parallel-ready-not-reset", "distributed/data_parallel.cpp", "  s.ready.assign(s.ready.size(), false);\n", ""),
    ("data-parallel-pending-not-reset", "distributed/data_parallel.cpp",
     "    b.pending = static_cast<int64_t>(b.params.size());\n  }\n  s.ready", "  }\n  s.ready"),
    ("data-parallel-parameters-not-broadcast", "distributed/data_parallel.cpp",
     "    for (Tensor& p : s_->params) broadcast(p, 0);\n", ""),
    ("data-parallel-first-bucket-cap-off-by-one", "distributed/data_parallel.cpp", "cut.size() <= 1 ?", "cut.size() < 1 ?"),
    ("data-parallel-model-hash-ignores-shapes", "distributed/data_parallel.cpp", "    for (int64_t d : p.shape()) mix(d);\n", ""),
    ("allreduce-mean-float32-not-divided", "distributed/dist.cpp",
     "for (int64_t i = 0; i < total; ++i) v[i] /= static_cast<float>(g_size);", ""),
    ("broadcast-root-check-off-by-one", "distributed/dist.cpp", "if (root < 0 || root >= g_size)",
     "if (root < 0 || root > g_size)"),
    ("trainer-shards-weighted-equally", "train/trainer.cpp",  # each process's mean loss, not weighted by its items
     "    if (shard.world > 1)  // this process's share of the batch's items, times world\n"
     "      s.loss = s.loss * (static_cast<double>(s.count) * shard.world / static_cast<double>(std::max<int64_t>(s.global_count, 1)));\n",
     ""),
    # nn/attention.cpp: MultiHeadAttention and its key/value cache
    ("mha-key-padding-mask-dropped", "nn/attention.cpp",
     "o.key_padding_mask = key_padding_mask.defined() ? key_padding_mask.detach() : Tensor();",
     "o.key_padding_mask = Tensor();"),
    ("mha-dropout-in-eval", "nn/attention.cpp", "o.dropout = is_training() ? dropout_ : 0.0;", "o.dropout = dropout_;"),
    ("mha-value-projected-from-key", "nn/attention.cpp", "kv.v = w_v->forward(value);", "kv.v = w_v->forward(key);"),
    ("mha-cache-reads-past-its-length", "nn/attention.cpp", "o.kv_length = kv.len < kv.k.size(1) ? kv.len : 0;",
     "o.kv_length = 0;"),
    ("kv-cache-rows-at-source-stride", "nn/attention.cpp", "d + (b * cap + at) * C);", "d + (b * n + at) * C);"),
    ("kv-cache-keys-written-at-start", "nn/attention.cpp", "write_positions(cache.k, have, step.k.detach());",
     "write_positions(cache.k, 0, step.k.detach());"),
    ("attention-weights-averaged-over-queries", "nn/attention.cpp", "attention_.mean({1})", "attention_.mean({2})"),
    ("attention-mask-after-softmax", "autograd/ops_attention.cpp",  # masked weights zeroed after normalising
     "      if (pl.is_masked(b, i, j)) row[j] = T(kMasked);\n"
     "      mx = std::max(mx, row[j]);\n"
     "    }\n"
     "    if (from_stat) mx = from_stat[2 * i];\n"
     "    // Scores more than 87 below the row's largest (masked ones among them)\n"
     "    // get weight 0: exp would be below float's smallest normal, and glibc\n"
     "    // takes a slow path there. float32 uses the vectorisable fast_expf.\n"
     "    T total = 0;\n"
     "    for (int64_t j = 0; j < S; ++j) {\n"
     "      const T z = row[j] - mx;\n"
     "      T e;\n"
     "      if constexpr (std::is_same_v<T, float>) e = z < -87.0f ? 0.0f : detail::fast_expf(z);\n"
     "      else e = z < -87.0 ? 0.0 : std::exp(z);\n"
     "      row[j] = e;\n"
     "      total += e;\n"
     "    }\n"
     "    const T inv = from_stat ? from_stat[2 * i + 1] : T(1) / total;\n"
     "    if (stat) {\n"
     "      stat[2 * i] = mx;\n"
     "      stat[2 * i + 1] = inv;\n"
     "    }\n"
     "    for (int64_t j = 0; j < S; ++j) row[j] *= inv;",
     "      mx = std::max(mx, row[j]);\n"
     "    }\n"
     "    if (from_stat) mx = from_stat[2 * i];\n"
     "    // Scores more than 87 below the row's largest (masked ones among them)\n"
     "    // get weight 0: exp would be below float's smallest normal, and glibc\n"
     "    // takes a slow path there. float32 uses the vectorisable fast_expf.\n"
     "    T total = 0;\n"
     "    for (int64_t j = 0; j < S; ++j) {\n"
     "      const T z = row[j] - mx;\n"
     "      T e;\n"
     "      if constexpr (std::is_same_v<T, float>) e = z < -87.0f ? 0.0f : detail::fast_expf(z);\n"
     "      else e = z < -87.0 ? 0.0 : std::exp(z);\n"
     "      row[j] = e;\n"
     "      total += e;\n"
     "    }\n"
     "    const T inv = from_stat ? from_stat[2 * i + 1] : T(1) / total;\n"
     "    if (stat) {\n"
     "      stat[2 * i] = mx;\n"
     "      stat[2 * i + 1] = inv;\n"
     "    }\n"
     "    for (int64_t j = 0; j < S; ++j) row[j] = pl.is_masked(b, i, j) ? T(0) : row[j] * inv;"),
    # autograd/autocast.cpp: the scope
    ("autocast-leaks-past-scope", "autograd/autocast.cpp", "Autocast::~Autocast() { t_precision = prev_; }",
     "Autocast::~Autocast() {}"),
    ("autocast-saves-the-new-precision", "autograd/autocast.cpp", "Autocast::Autocast(Precision p) : prev_(t_precision) {",
     "Autocast::Autocast(Precision p) : prev_(p) {"),
    ("autocast-restores-f32-not-the-outer-scope", "autograd/autocast.cpp",
     "Autocast::~Autocast() { t_precision = prev_; }", "Autocast::~Autocast() { t_precision = Precision::f32; }"),
    # engine/blas.cpp: emulated bf16 products
    ("bf16-emulation-ignores-row-stride", "engine/blas.cpp",
     "from_bf16(x + r * ld, to.data() + r * cols, cols);", "from_bf16(x + r * cols, to.data() + r * cols, cols);"),
    ("bf16-emulation-transposes-a-as-b", "engine/blas.cpp",
     "a_rows = ta ? k : m, a_cols = ta ? m : k,", "a_rows = tb ? k : m, a_cols = tb ? m : k,"),
]

# The doctest binaries, tried in this order: (CMake target, path in the build
# directory). Each doctest case is also a CTest of its own (doctest_discover_tests).
DOCTEST_BINARIES = [
    ("xg_tests", "tests/xg_tests"),
    ("seq2seq_tests", "apps/seq2seq/seq2seq_tests"),
    ("char_lm_tests", "apps/char_lm/char_lm_tests"),
    ("g2p_tests", "apps/g2p/g2p_tests"),
]
# CTest statuses that are not a test failing: nothing ran.
NOT_RUN = ("Not Run", "Disabled")


def check_mutants(tree, mutants):
    """Problems with the list against the sources in `tree`: each original must occur exactly once."""
    problems = []
    names = [m[0] for m in mutants]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"mutant name {n} is used {names.count(n)} times")
    for name, path, old, new in mutants:
        f = os.path.join(tree, path)
        if old == new:
            problems.append(f"{name}: the mutated text equals the original")
        if not os.path.isfile(f):
            problems.append(f"{name}: {path} does not exist")
            continue
        n = open(f).read().count(old)
        if n != 1:
            problems.append(f"{name}: the original text occurs {n} times in {path}, expected once")
    return problems


def minutes(seconds):
    s = int(round(seconds))
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def build(build_dir, jobs, target=None):
    """(ok, output) of building `target` (everything if None)."""
    cmd = ["cmake", "--build", build_dir, "-j", str(jobs)] + (["--target", target] if target else [])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    return r.returncode == 0, r.stdout


def first_error(output):
    """The compiler's or linker's first error line, for the report."""
    lines = output.splitlines()
    for pattern in (r"\berror:", r"\berror\b|FAILED"):
        for line in lines:
            if re.search(pattern, line, re.IGNORECASE):
                return line.strip()[:300]
    return (output.strip().splitlines() or ["(no output)"])[-1][:300]


def run_group(cmd, cwd, timeout, out_path):
    """Runs `cmd` in a process group of its own, its output into out_path.
    Returns (exit code, timed out). On timeout: SIGTERM to the group (doctest
    then reports the case it was in), SIGKILL 10 s later."""
    with open(out_path, "w") as out:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return p.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return p.returncode, True


def signal_text(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class DoctestRun:
    """One run of a doctest binary with the XML reporter."""

    def __init__(self, exe, timeout, scratch):
        xml_path = os.path.join(scratch, os.path.basename(exe) + ".xml")
        log_path = os.path.join(scratch, os.path.basename(exe) + ".log")
        if os.path.exists(xml_path):
            os.remove(xml_path)
        t0 = time.time()
        self.code, self.timed_out = run_group([exe, "--reporters=xml", f"--out={xml_path}"], os.path.dirname(exe),
                                              timeout, log_path)
        self.seconds = time.time() - t0
        xml = open(xml_path, errors="replace").read() if os.path.exists(xml_path) else ""
        self.log_tail = open(log_path, errors="replace").read()[-2000:]
        self.complete = "<OverallResultsTestCases" in xml
        # Each case's verdict, in the order they ran: test_case_success closes
        # the <TestCase> opened before it; <Exception crash="true"> names a
        # signal doctest caught inside that case.
        self.failed, self.crashed = [], {}
        current = None
        for m in re.finditer(r'<TestCase name="([^"]*)"|test_case_success="(true|false)"|'
                             r'<Exception crash="true"[^>]*>([^<]*)', xml):
            if m.group(1) is not None:
                current = html.unescape(m.group(1))
            elif m.group(2) is not None:
                if m.group(2) == "false" and current is not None:
                    # The case our own SIGTERM interrupted did not fail: it ran out of time.
                    if not (self.timed_out and "SIGTERM" in self.crashed.get(current, "")):
                        self.failed.append(current)
            elif current is not None:
                self.crashed[current] = m.group(3).strip()
        self.clean = self.code == 0 and self.complete and not self.failed and not self.timed_out

    def named(self):
        return [f"{n} (crashed: {self.crashed[n]})" if n in self.crashed else n for n in self.failed]

    def trouble(self):
        """Why the run was not clean, when it named no failing case."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if not self.complete:
            return f"{signal_text(self.code)}, its report unfinished"
        return signal_text(self.code)


class Suite:
    """The scratch build and what runs in it."""

    def __init__(self, build_dir, scratch, jobs, ctest_exclude):
        self.build_dir, self.scratch, self.jobs, self.ctest_exclude = build_dir, scratch, jobs, ctest_exclude
        self.doctest_timeout = {}  # per binary, from the unmutated run
        self.ctest_timeout = 3600

    def exe(self, rel):
        return os.path.join(self.build_dir, rel)

    def ctest_list(self):
        r = subprocess.run(["ctest", "-N", "--show-only=json-v1"], cwd=self.build_dir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("ctest -N failed: " + r.stderr[-2000:])
        return json.loads(r.stdout)["tests"]

    def ctest(self, skip_binaries, stop_on_failure):
        """Runs every CTest except the cases of the doctest binaries in
        `skip_binaries` (which passed already). Returns (failed: [(name,
        status)], ran: count, seconds, note)."""
        skip = {os.path.realpath(self.exe(rel)) for rel in skip_binaries}
        numbers = [str(i + 1) for i, t in enumerate(self.ctest_list())
                   if not (t.get("command") and os.path.realpath(t["command"][0]) in skip)]
        if not numbers:
            return [], 0, 0.0, ""
        listing = os.path.join(self.scratch, "ctest-tests.txt")
        with open(listing, "w") as f:  # ctest -I: start,end,stride, then test numbers
            f.write("0,0,0," + ",".join(numbers) + "\n")
        cmd = ["ctest", "-j", str(self.jobs), "--output-on-failure", "--timeout", "300", "-I", listing]
        if stop_on_failure:
            cmd.append("--stop-on-failure")
        if self.ctest_exclude:
            cmd += ["-E", self.ctest_exclude]
        log = os.path.join(self.scratch, "ctest.log")
        t0 = time.time()
        code, timed_out = run_group(cmd, self.build_dir, self.ctest_timeout, log)
        seconds = time.time() - t0
        text = open(log, errors="replace").read()
        failed, in_list = [], False
        for line in text.splitlines():
            if line.startswith("The following tests FAILED:"):
                in_list = True
                continue
            if in_list:
                m = re.match(r"\s*\d+\s+-\s+(.*\S)\s+\(([^()]*)\)\s*$", line)
                if not m:
                    in_list = False
                    continue
                if m.group(2) not in NOT_RUN:
                    failed.append((m.group(1), m.group(2)))
        note = ""
        if timed_out:
            note = f"ctest timed out after {seconds:.0f} s"
        elif code != 0 and not failed:
            note = f"ctest {signal_text(code)} but named no failing test: " + text.strip()[-300:]
        return failed, len(numbers), seconds, note


def say(*parts):
    print(*parts, flush=True)


def run_mutant(suite, mutant):
    """(verdict, detail): verdict is 'killed', 'survived' or 'no-build'."""
    notes = []
    passed = []  # doctest binaries that ran clean: CTest skips their cases
    for target, rel in DOCTEST_BINARIES:
        ok, out = build(suite.build_dir, suite.jobs, target)
        if not ok:
            return "no-build", f"building {target}: {first_error(out)}", notes
        run = DoctestRun(suite.exe(rel), suite.doctest_timeout[target], suite.scratch)
        if run.failed:
            named = run.named()
            more = f" (+{len(named) - 3} more)" if len(named) > 3 else ""
            extra = "" if run.complete else f"; then {run.trouble()}"
            return "killed", f"by {target}: {len(named)} case(s): " + "; ".join(named[:3]) + more + extra, notes
        if run.clean:
            passed.append(rel)
        else:
            notes.append(f"{target}: CRASH/TIMEOUT (no named failing test): {run.trouble()}; its cases go to CTest")
    ok, out = build(suite.build_dir, suite.jobs)
    if not ok:
        return "no-build", f"building everything: {first_error(out)}", notes
    failed, ran, seconds, note = suite.ctest(passed, stop_on_failure=True)
    if note:
        notes.append("CTest: " + note)
    if failed:
        shown = [f"{n} ({s})" for n, s in failed[:3]]
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return "killed", f"by CTest: " + "; ".join(shown) + more + f" (of {ran} tests, stopped at the first failure)", notes
    return "survived", f"no doctest case and none of {ran} CTest tests failed", notes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="scratch directory (default: a new temporary one, removed at the end)")
    p.add_argument("--only", help="comma-separated mutant names")
    p.add_argument("--list", action="store_true", help="print the mutants and exit")
    p.add_argument("--check", action="store_true",
                   help="check that every original occurs exactly once in this tree, build nothing, and exit")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel build and CTest jobs")
    p.add_argument("--ctest-exclude", help="regex of CTest names never to run (tests this machine cannot pass)")
    a = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if a.list:
        for name, path, _, _ in MUTANTS:
            print(f"{name:<46} {path}")
        return 0
    if a.check:
        problems = check_mutants(root, MUTANTS)
        for pr in problems:
            print("mutants.py: " + pr)
        files = sorted({m[1] for m in MUTANTS})
        print(f"{len(MUTANTS)} mutants in {len(files)} files: " +
              ("every original occurs exactly once" if not problems else f"{len(problems)} problem(s)"))
        return 1 if problems else 0
    chosen = MUTANTS
    if a.only:
        names = a.only.split(",")
        unknown = [n for n in names if n not in {m[0] for m in MUTANTS}]
        if unknown:
            sys.exit(f"mutants.py: unknown mutant(s) {', '.join(unknown)} (see --list)")
        chosen = [m for m in MUTANTS if m[0] in names]

    t_start = time.time()
    scratch = os.path.abspath(a.build_dir or tempfile.mkdtemp(prefix="xg-mutants-"))
    src = os.path.join(scratch, "src")
    build_dir = os.path.join(scratch, "build")
    if os.path.exists(src):
        shutil.rmtree(src)
    # shutil.copy, not copy2: fresh modification times, so a reused build
    # directory rebuilds every object from this copy rather than keep stale ones.
    shutil.copytree(root, src, ignore=shutil.ignore_patterns(".git", "build*", "__pycache__"), copy_function=shutil.copy)
    problems = check_mutants(src, chosen)
    if problems:
        sys.exit("mutants.py: " + "\nmutants.py: ".join(problems))

    say(f"{len(chosen)} mutants; scratch tree and build in {scratch}")
    say(f"building everything (Release, -j{a.jobs}) ...")
    configure = ["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    r = subprocess.run(configure, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("mutants.py: cmake could not configure the tree:\n" + r.stdout[-3000:])
    ok, out = build(build_dir, a.jobs)
    if not ok:
        sys.exit("mutants.py: the unmutated tree does not build:\n" + out[-3000:])
    t_built = time.time()
    say(f"built in {minutes(t_built - t_start)}")

    suite = Suite(build_dir, scratch, a.jobs, a.ctest_exclude)
    for target, rel in DOCTEST_BINARIES:
        run = DoctestRun(suite.exe(rel), 1800, scratch)
        if not run.clean:
            sys.exit(f"mutants.py: {target} fails without any mutant ({run.trouble()}): " +
                     "; ".join(run.named()[:5]) + "\n" + run.log_tail)
        # A mutated run gets 5 times the unmutated one's time, and a minute more.
        suite.doctest_timeout[target] = 5 * run.seconds + 60
        say(f"unmutated {target}: passes in {run.seconds:.0f} s")
    failed, ran, seconds, note = suite.ctest([rel for _, rel in DOCTEST_BINARIES], stop_on_failure=False)
    if failed or note:
        sys.exit(f"mutants.py: CTest fails without any mutant: " +
                 "; ".join(f"{n} ({s})" for n, s in failed) + (f" {note}" if note else "") +
                 "\n(--ctest-exclude REGEX leaves out tests this machine cannot pass)")
    suite.ctest_timeout = 5 * seconds + 600
    say(f"unmutated CTest (the {ran} tests that are not doctest cases): passes in {seconds:.0f} s")
    t_baseline = time.time()

    results = []  # (name, path, verdict, detail, seconds)
    width = max(len(m[0]) for m in chosen)
    for i, (name, path, old, new) in enumerate(chosen, 1):
        f = os.path.join(src, path)
        text = open(f).read()
        t0 = time.time()
        try:
            open(f, "w").write(text.replace(old, new, 1))
            verdict, detail, notes = run_mutant(suite, (name, path, old, new))
        finally:
            open(f, "w").write(text)
        dt = time.time() - t0
        for n in notes:
            say(f"  {name}: {n}")
        label = {"killed": "killed", "survived": "SURVIVED", "no-build": "DOES NOT BUILD"}[verdict]
        say(f"[{i}/{len(chosen)}] {name:<{width}} {label} {detail}  [{dt:.0f} s]")
        results.append((name, path, verdict, detail, dt))

    if not a.build_dir:
        shutil.rmtree(scratch, ignore_errors=True)
    t_end = time.time()
    killed = [r for r in results if r[2] == "killed"]
    survived = [r for r in results if r[2] == "survived"]
    no_build = [r for r in results if r[2] == "no-build"]
    times = sorted(r[4] for r in results)
    say("")
    say("summary")
    say(f"  {len(results)} mutants: {len(killed)} killed, {len(survived)} survived, {len(no_build)} did not build")
    if times:
        say(f"  per mutant {times[0]:.0f}-{times[-1]:.0f} s, median {times[len(times) // 2]:.0f} s "
            "(rebuilds included)")
    say(f"  total {minutes(t_end - t_start)}: first build {minutes(t_built - t_start)}, "
        f"unmutated suite {minutes(t_baseline - t_built)}, mutants {minutes(t_end - t_baseline)}")
    by = {}
    for r in killed:
        by.setdefault(r[3].split(":")[0], []).append(r[0])
    for k in sorted(by):
        say(f"  killed {k}: {len(by[k])}")
    for title, group in (("survived", survived), ("did not build (the list is stale)", no_build)):
        if group:
            say(f"  {title}:")
            for name, path, _, detail, _ in group:
                say(f"    {name} ({path}): {detail}")
    return 1 if survived or no_build else 0


if __name__ == "__main__":
    sys.exit(main())
