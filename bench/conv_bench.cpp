// xgrad's convolution benchmark (bench/conv_bench.py is PyTorch's twin;
// bench/conv_bench.sh runs both and compares). One forward + backward of
// each conv layer of a small CNN and a CIFAR-style ResNet on 28x28 images,
// timed per path: im2col (unfold2d and a product, the float64 path, run in
// float32), the oneDNN primitives in the default (automatic), the blocked
// and the plain layout, and the same in bf16 (Autocast) where the CPU has
// AVX512_BF16. Then the batch norms and max poolings of the same models,
// forward + backward, on xgrad's own loops (the ops the models call) beside
// oneDNN's batch-normalization and pooling primitives, on NCHW and on its
// blocked nChw16c (as if the activations stayed blocked between layers: no
// reorders timed), oneDNN on T OpenMP threads. One JSON object per line.
//
//   conv_bench [--threads T] [--batch N] [--reps R] [--warmup W]
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
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
    // A whole number, all of the text: "1.5", "nan" and "" are refused.
    *dst = static_cast<long>(parse_whole_number(k, argv[i + 1], dst == &a.warmup ? 0 : 1, 4096));
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
Tensor im2col_conv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t pad) {
  const int64_t N = x.size(0), O = w.size(0);
  const Tensor cols = unfold2d(x, UnfoldOptions({w.size(2), w.size(3)}).padding(pad).stride(stride));
  const int64_t Ho = (x.size(2) + 2 * pad - w.size(2)) / stride + 1;
  Tensor y = reshape(matmul(reshape(w, {O, cols.size(1)}), cols), {N, O, Ho, Ho});
  return b.defined() ? y + reshape(b, {1, O, 1, 1}) : y;
}

// The median ms of `step` over a.reps runs after a.warmup, each run after an
// untimed `setup`.
template <class Setup, class Step>
double median_ms(const Args& a, Setup&& setup, Step&& step) {
  std::vector<double> ms;
  for (long r = 0; r < a.warmup + a.reps; ++r) {
    setup();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= a.warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The median ms of one forward + backward of layer l on path p.
double time_step(const Layer& l, Path p, const Args& a) {
  Generator gen(1);
  Tensor x = rand({a.batch, l.C, l.H, l.H}, gen, f32, -1, 1).requires_grad_(l.input_grad);
  Tensor w = rand({l.O, l.C, l.k, l.k}, gen, f32, -0.1, 0.1).requires_grad_();
  Tensor b = l.bias ? rand({l.O}, gen, f32, -0.1, 0.1).requires_grad_() : Tensor();
  const auto o = Conv2dFuncOptions().stride(l.stride).padding(l.pad);
  engine::set_conv_layout(layout_of(p));
  const int64_t Ho = (l.H + 2 * l.pad - l.k) / l.stride + 1;
  const Tensor g = rand({a.batch, l.O, Ho, Ho}, gen, f32, -1, 1);
  const auto zero_grads = [&] {
    x.zero_grad(), w.zero_grad();
    if (b.defined()) b.zero_grad();
  };
  return median_ms(a, zero_grads, [&] {
    Tensor y;
    if (p == Path::bf16 || p == Path::bf16_blocked || p == Path::bf16_plain) {
      Autocast scope(xg::bf16);
      y = conv2d(x, w, b, o);
    } else {
      y = p == Path::im2col ? im2col_conv(x, w, b, l.stride, l.pad) : conv2d(x, w, b, o);
    }
    y.backward(g);
  });
}

// A batch norm or a 2x2 max pooling over C channels of H x H images.
struct Plane {
  const char* name;
  int64_t C, H;
};
const std::vector<Plane> kNorms{{"resnet bn 16 @28", 16, 28}, {"resnet bn 32 @14", 32, 14},
                                {"resnet bn 64 @7", 64, 7},   {"cnn bn 32 @28", 32, 28},
                                {"cnn bn 64 @14", 64, 14}};
const std::vector<Plane> kPools{{"cnn maxpool 2x2 32 @28", 32, 28}, {"cnn maxpool 2x2 64 @14", 64, 14}};

// xgrad's batch norm (training, running statistics updated) or max pooling,
// forward + backward, the zero-grads untimed as above.
double xgrad_plane(const Plane& l, bool norm, const Args& a) {
  Generator gen(1);
  Tensor x = rand({a.batch, l.C, l.H, l.H}, gen, f32, -1, 1).requires_grad_();
  Tensor w = rand({l.C}, gen, f32, 0.5, 1.5).requires_grad_(), b = rand({l.C}, gen, f32, -0.5, 0.5).requires_grad_();
  Tensor mean = zeros({l.C}), var = ones({l.C});
  const auto o = MaxPool2dOptions(2);
  const int64_t Ho = norm ? l.H : l.H / 2;
  const Tensor g = rand({a.batch, l.C, Ho, Ho}, gen, f32, -1, 1);
  return median_ms(a, [&] { x.zero_grad(), w.zero_grad(), b.zero_grad(); }, [&] {
    Tensor y = norm ? batch_norm(x, mean, var, w, b, /*training=*/true) : max_pool2d(x, o);
    y.backward(g);
  });
}

// The same on oneDNN's primitive, every tensor in format f, on a.threads
// OpenMP threads.
double onednn_plane(const Plane& l, bool norm, const Args& a, dnnl::memory::format_tag f) {
  using namespace dnnl;
  const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  stream st(cpu);
  omp_set_num_threads(static_cast<int>(a.threads));
  const memory::dim N = a.batch, C = l.C, H = l.H, Ho = norm ? l.H : l.H / 2;
  const memory::desc xd({N, C, H, H}, memory::data_type::f32, f), yd({N, C, Ho, Ho}, memory::data_type::f32, f),
      cd({C}, memory::data_type::f32, memory::format_tag::x);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  const auto filled = [&](const memory::desc& d) {
    memory m(d, cpu);
    float* p = static_cast<float*>(m.get_data_handle());
    for (size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = u(rng);
    return m;
  };
  memory x = filled(xd), y = filled(yd), dy = filled(yd), dx = filled(xd);
  if (norm) {
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    const batch_normalization_forward::primitive_desc fpd(
        batch_normalization_forward::desc(prop_kind::forward_training, xd, 1e-5f, flags), cpu);
    const batch_normalization_backward::primitive_desc bpd(
        batch_normalization_backward::desc(prop_kind::backward, xd, xd, 1e-5f, flags), cpu, fpd);
    const batch_normalization_forward fwd(fpd);
    const batch_normalization_backward bwd(bpd);
    memory mean = filled(cd), var = filled(cd), scale = filled(cd), shift = filled(cd), dscale = filled(cd),
           dshift = filled(cd);
    return median_ms(a, [] {}, [&] {
      fwd.execute(st, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
                       {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}});
      bwd.execute(st, {{DNNL_ARG_SRC, x}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}, {DNNL_ARG_DIFF_DST, dy},
                       {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_DIFF_SRC, dx}, {DNNL_ARG_DIFF_SCALE, dscale},
                       {DNNL_ARG_DIFF_SHIFT, dshift}});
      st.wait();
    });
  }
  const memory::dims two{2, 2}, none{0, 0};
  const pooling_forward::primitive_desc fpd(
      pooling_forward::desc(prop_kind::forward_training, algorithm::pooling_max, xd, yd, two, two, none, none), cpu);
  const pooling_backward::primitive_desc bpd(
      pooling_backward::desc(algorithm::pooling_max, xd, yd, two, two, none, none), cpu, fpd);
  const pooling_forward fwd(fpd);
  const pooling_backward bwd(bpd);
  memory ws(fpd.workspace_desc(), cpu);
  return median_ms(a, [] {}, [&] {
    fwd.execute(st, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}, {DNNL_ARG_WORKSPACE, ws}});
    bwd.execute(st, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, dx}, {DNNL_ARG_WORKSPACE, ws}});
    st.wait();
  });
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
    for (const bool norm : {true, false})
      for (const Plane& l : norm ? kNorms : kPools) {
        const std::pair<const char*, double> rows[] = {
            {"xgrad", xgrad_plane(l, norm, a)},
            {"onednn_nchw", onednn_plane(l, norm, a, dnnl::memory::format_tag::nchw)},
            {"onednn_blocked", onednn_plane(l, norm, a, dnnl::memory::format_tag::nChw16c)}};
        for (const auto& [path, ms] : rows)
          std::printf("%s\n", fmt::format("{{\"op\": \"{}\", \"path\": \"{}\", \"threads\": {}, \"ms\": {:.3f}}}",
                                          l.name, path, a.threads, ms)
                                  .c_str());
        std::fflush(stdout);
      }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "conv_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
