#!/usr/bin/env python3
"""Mutation check: does the test suite fail on each of these deliberate bugs?

    python3 tests/mutants.py [--build-dir DIR] [--only NAME,...] [--list]

Copies the source tree to a scratch directory, builds the test binary there
once, then for each mutant: replaces one exact piece of code (it must occur
exactly once), rebuilds the test binary, runs the whole doctest suite, and
restores the file. A mutant is killed when the suite fails (or runs over
10 minutes); the script exits 1 if any mutant survives. The tree you work in
is never touched. About a minute per mutant on 2 cores.
"""
import argparse
import os
import shutil
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
    ("fast-expf-series-term", "autograd/detail/kernels.h", "p = p * r + 0.5f;", "p = p * r + 0.25f;"),
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
    ("tape-accumulate-drops-path", "autograd/autograd.cpp", "  slot = add(slot, g);\n", "  slot = g;\n"),
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
    ("adam-no-bias-correction-1", "optim/adam.cpp", "const double step_size = lr / bc1,", "const double step_size = lr,"),
    ("adam-no-bias-correction-2", "optim/adam.cpp", "inv_sqrt_bc2 = 1 / std::sqrt(bc2);", "inv_sqrt_bc2 = 1;"),
    ("adamw-decay-without-lr", "optim/adam.cpp", "shrink = decoupled_ ? T(1 - lr * wd)", "shrink = decoupled_ ? T(1 - wd)"),
    ("sgd-nesterov-ignored", "optim/sgd.cpp", "d = o_.nesterov ? d + o_.momentum * b[i] : b[i];", "d = b[i];"),
    ("grad-norm-tail-unsquared", "optim/clip.cpp", "for (; i < n; ++i) lane[0] += double(d[i]) * double(d[i]);",
     "for (; i < n; ++i) lane[0] += double(d[i]);"),
    ("clip-scale-inverted", "optim/clip.cpp", "const double scale = max_norm / (norm + 1e-6);",
     "const double scale = norm / max_norm;"),
    ("noam-max-not-min", "optim/schedule.cpp", "std::min(1 / std::sqrt(s), s * std::pow(",
     "std::max(1 / std::sqrt(s), s * std::pow("),
    # models
    ("decoder-not-causal", "models/transformer.cpp",
     "h = norm1->forward(y + drop1->forward(self_attn->forward(y, y, y, tgt_pad, /*causal=*/true)));",
     "h = norm1->forward(y + drop1->forward(self_attn->forward(y, y, y, tgt_pad, /*causal=*/false)));"),
    ("beam-length-penalty-without-eos", "models/transformer.cpp",
     "return h.logp / penalty(h.toks.size() + (h.done ? 1 : 0));", "return h.logp / penalty(h.toks.size());"),
    ("beam-kv-cache-row", "models/transformer.cpp", "h.row = static_cast<int64_t>(i);", "h.row = 0;"),
    ("embedding-scale-missing", "models/transformer.cpp",
     "return pos->forward(e.forward(b.ids, {b.rows, b.cols}) * std::sqrt(static_cast<double>(cfg_.d_model)));",
     "return pos->forward(e.forward(b.ids, {b.rows, b.cols}));"),
    # train: the character LM's and G2P's measures
    ("bpc-in-nats", "train/char_lm.cpp", "return nats / static_cast<double>(predicted) / std::log(2.0);",
     "return nats / static_cast<double>(predicted);"),
    ("g2p-length-batches-uniform-over-lengths", "train/g2p.cpp",
     "const int64_t pair = static_cast<int64_t>(data_gen_.engine()() % n);",
     "const int64_t pair = buckets_[data_gen_.engine()() % buckets_.size()].first;"),
    ("edit-distance-substitution-cost", "train/g2p.cpp", "prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)",
     "prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 2)"),
    ("g2p-average-running-mean-weight", "train/g2p.cpp", "(1.0 / static_cast<double>(averaged_ + 1))",
     "(1.0 / static_cast<double>(averaged_ + 2))"),
    ("g2p-stress-kept-by-default", "train/g2p.cpp", "if (!opts_.keep_stress)  // the pronunciations",
     "if (false)  // the pronunciations"),
    ("g2p-schedule-ignores-the-clock", "train/g2p.cpp", "if (opts_.time_limit <= 0) return step;",
     "return step;"),
    ("g2p-festival-ax-kept", "train/g2p.cpp", "if (ph == \"ax\") ph = \"ah\";", "if (false) ph = \"ah\";"),
]


def sh(cmd, cwd, timeout=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="scratch directory (default: a new temporary one, removed at the end)")
    p.add_argument("--only", help="comma-separated mutant names")
    p.add_argument("--list", action="store_true", help="print the mutants and exit")
    a = p.parse_args()
    if a.list:
        for name, path, _, _ in MUTANTS:
            print(f"{name:<34} {path}")
        return 0
    chosen = MUTANTS
    if a.only:
        names = a.only.split(",")
        unknown = [n for n in names if n not in {m[0] for m in MUTANTS}]
        if unknown:
            sys.exit(f"mutants.py: unknown mutant(s) {', '.join(unknown)} (see --list)")
        chosen = [m for m in MUTANTS if m[0] in names]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    scratch = a.build_dir or tempfile.mkdtemp(prefix="xg-mutants-")
    src = os.path.join(scratch, "src")
    build = os.path.join(scratch, "build")
    if os.path.exists(src):
        shutil.rmtree(src)
    # shutil.copy, not copy2: fresh modification times, so a reused build
    # directory rebuilds every object from this copy rather than keep stale ones.
    shutil.copytree(root, src, ignore=shutil.ignore_patterns(".git", "build*", "__pycache__"), copy_function=shutil.copy)
    # Every original must be found exactly once before anything is built.
    for name, path, old, _ in chosen:
        n = open(os.path.join(src, path)).read().count(old)
        if n != 1:
            sys.exit(f"mutants.py: mutant {name}: the original text occurs {n} times in {path}, expected once")
    print(f"building the test binary in {build} ...", flush=True)
    r = sh(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"], root)
    if r.returncode != 0:
        sys.exit(r.stdout)
    r = sh(["cmake", "--build", build, "--target", "xg_tests", "-j", str(os.cpu_count() or 2)], root)
    if r.returncode != 0:
        sys.exit("mutants.py: the unmutated tree does not build:\n" + r.stdout[-3000:])
    tests = os.path.join(build, "tests", "xg_tests")
    r = sh([tests], build, timeout=600)
    if r.returncode != 0:
        sys.exit("mutants.py: the suite fails without any mutant:\n" + r.stdout[-3000:])
    survived = []
    for name, path, old, new in chosen:
        f = os.path.join(src, path)
        text = open(f).read()
        open(f, "w").write(text.replace(old, new))
        t0 = time.time()
        try:
            r = sh(["cmake", "--build", build, "--target", "xg_tests", "-j", str(os.cpu_count() or 2)], root)
            if r.returncode != 0:
                verdict = "killed (does not compile)"
            else:
                try:
                    t = sh([tests], build, timeout=600)
                    failed = [ln for ln in t.stdout.splitlines() if "TEST CASE:" in ln]
                    verdict = (f"killed by {len(failed)} test case(s), e.g. {failed[0].split('TEST CASE:')[1].strip()}"
                               if t.returncode != 0 and failed else
                               "killed (suite failed)" if t.returncode != 0 else "SURVIVED")
                except subprocess.TimeoutExpired:
                    verdict = "killed (timeout)"
        finally:
            open(f, "w").write(text)
        if verdict == "SURVIVED":
            survived.append(name)
        print(f"{name:<34} {verdict}  [{time.time() - t0:.0f} s]", flush=True)
    sh(["cmake", "--build", build, "--target", "xg_tests"], root)  # leave the scratch build unmutated
    if not a.build_dir:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(chosen) - len(survived)} of {len(chosen)} mutants killed" +
          (f"; survived: {', '.join(survived)}" if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
