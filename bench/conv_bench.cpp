// xgrad's convolution benchmark (bench/conv_bench.py is PyTorch's twin;
// bench/conv_bench.sh runs both and compares). One forward + backward of
// each conv layer of a small CNN and a CIFAR-style ResNet on 28x28 images,
// timed per path: im2col (unfold2d and a product, the float64 path, run in
// float32), the oneDNN primitives in the default (automatic), the blocked
// and the plain layout, and the same in bf16 (Autocast) where the CPU has
// AVX512_BF16. One JSON object per line.
//
//   conv_bench [--threads T] [--batch N] [--reps R] [--warmup W]
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/xg.h"
#include "engine/conv.h"
#include "engine/gemm.h"

using namespace xg;

namespace {

struct Args {
  long threads = 1, batch = 128, reps = 10, warmup = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    long* dst = k == "--threads" ? &a.threads : k == "--batch" ? &a.batch : k == "--reps" ? &a.reps
              : k == "--warmup" ? &a.warmup : nullptr;
    if (!dst) throw std::invalid_argument("unknown option " + k);
    if (i + 1 >= argc) throw std::invalid_argument(k + ": a value is missing");
    const std::string v = argv[i + 1];
    size_t used = 0;
    long n = 0;
    try {
      n = std::stol(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // A whole number, all of the text: "1.5", "nan" and "" are refused.
    if (used == 0 || used != v.size() || n < (dst == &a.warmup ? 0 : 1) || n > 4096)
      throw std::invalid_argument(k + " " + v + ": expected a whole number from " + (dst == &a.warmup ? "0" : "1") +
                                  " to 4096");
    *dst = n;
  }
  return a;
}

// A layer: C -> O channels, k x k kernel, stride, padding, on H x H images.
struct Layer {
  const char* name;
  int64_t C, O, k, stride, pad, H;
  bool bias, input_grad;  // the first layer's input needs no gradient
};

const std::vector<Layer> kLayers{
    {"cnn.conv1 1->32 3x3", 1, 32, 3, 1, 1, 28, true, false},
    {"cnn.conv2 32->64 3x3", 32, 64, 3, 1, 1, 28, true, true},
    {"res 32->64 3x3 s2", 32, 64, 3, 2, 1, 28, false, true},
    {"res 64->64 3x3 @14", 64, 64, 3, 1, 1, 14, false, true},
    {"res 1x1 down 32->64 s2", 32, 64, 1, 2, 0, 28, false, true},
};

// onednn and onednn_bf16 run the default layout (automatic); the others force one.
enum class Path { im2col, onednn, blocked, plain, bf16, bf16_blocked, bf16_plain };
const char* path_name(Path p) {
  const char* names[] = {"im2col", "onednn", "onednn_blocked", "onednn_plain", "onednn_bf16", "onednn_bf16_blocked",
                         "onednn_bf16_plain"};
  return names[static_cast<int>(p)];
}
engine::ConvLayout layout_of(Path p) {
  return p == Path::blocked || p == Path::bf16_blocked ? engine::ConvLayout::blocked
         : p == Path::plain || p == Path::bf16_plain   ? engine::ConvLayout::plain
                                                       : engine::ConvLayout::automatic;
}

// conv2d as the im2col path computes it (unfold2d, one product), groups 1.
Tensor im2col_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  const int64_t N = x.size(0), O = w.size(0);
  const Tensor cols = unfold2d(x, o);
  const int64_t Ho = (x.size(2) + 2 * o.padding[0] - o.kernel[0]) / o.stride[0] + 1;
  Tensor y = reshape(matmul(reshape(w, {O, cols.size(1)}), cols), {N, O, Ho, Ho});
  return b.defined() ? y + reshape(b, {1, O, 1, 1}) : y;
}

// The median ms of one forward + backward of layer l on path p.
double time_step(const Layer& l, Path p, const Args& a) {
  Generator gen(1);
  Tensor x = rand({a.batch, l.C, l.H, l.H}, gen, f32, -1, 1).requires_grad_(l.input_grad);
  Tensor w = rand({l.O, l.C, l.k, l.k}, gen, f32, -0.1, 0.1).requires_grad_();
  Tensor b = l.bias ? rand({l.O}, gen, f32, -0.1, 0.1).requires_grad_() : Tensor();
  Conv2dOptions o;
  o.kernel = {l.k, l.k}, o.stride = {l.stride, l.stride}, o.padding = {l.pad, l.pad};
  engine::set_conv_layout(layout_of(p));
  const int64_t Ho = (l.H + 2 * l.pad - l.k) / l.stride + 1;
  const Tensor g = rand({a.batch, l.O, Ho, Ho}, gen, f32, -1, 1);
  std::vector<double> ms;
  for (long r = 0; r < a.warmup + a.reps; ++r) {
    x.zero_grad(), w.zero_grad();
    if (b.defined()) b.zero_grad();
    const auto t0 = std::chrono::steady_clock::now();
    Tensor y;
    if (p == Path::bf16 || p == Path::bf16_blocked || p == Path::bf16_plain) {
      Autocast scope(xg::bf16);
      y = conv2d(x, w, b, o);
    } else {
      y = p == Path::im2col ? im2col_conv(x, w, b, o) : conv2d(x, w, b, o);
    }
    y.backward(g);
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= a.warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Multiply-adds x 2 of a step: forward, weight gradient, input gradient if asked.
double step_gflop(const Layer& l, const Args& a) {
  const int64_t Ho = (l.H + 2 * l.pad - l.k) / l.stride + 1;
  const double fwd = 2.0 * a.batch * l.O * l.C * l.k * l.k * Ho * Ho;
  return fwd * (l.input_grad ? 3 : 2) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    set_num_threads(static_cast<int>(a.threads));
    const bool bf16_ok = engine::bf16_unsupported_reason().empty() && engine::conv_available();
    std::printf("{\"engine\": \"%s\", \"onednn_isa\": %d, \"threads\": %ld, \"batch\": %ld, \"bf16\": %s}\n",
                engine::describe().c_str(), static_cast<int>(dnnl_get_effective_cpu_isa()), a.threads, a.batch,
                bf16_ok ? "true" : "false");
    std::vector<Path> paths{Path::im2col};
    if (engine::conv_available()) paths.insert(paths.end(), {Path::onednn, Path::blocked, Path::plain});
    if (bf16_ok) paths.insert(paths.end(), {Path::bf16, Path::bf16_blocked, Path::bf16_plain});
    for (const Layer& l : kLayers)
      for (Path p : paths) {
        const double ms = time_step(l, p, a);
        std::printf("%s\n", fmt::format("{{\"layer\": \"{}\", \"path\": \"{}\", \"threads\": {}, \"ms\": {:.3f}, "
                                        "\"gflops\": {:.1f}}}",
                                        l.name, path_name(p), a.threads, ms, step_gflop(l, a) / (ms / 1e3))
                                .c_str());
        std::fflush(stdout);
      }
    engine::set_conv_layout(engine::ConvLayout::automatic);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "conv_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
