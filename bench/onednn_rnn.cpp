// oneDNN's own LSTM and GRU primitives, one layer, forward (training) +
// backward, float32: the alternative to xgrad's recurrence op, measured
// (bench/rnn.py runs it beside xg_bench rnn and PyTorch). The GRU is
// oneDNN's linear-before-reset GRU, which is PyTorch's (r scales the
// recurrent product, bias included); oneDNN's plain GRU is another cell.
//
//   onednn_rnn --cell lstm|gru --batch B --len T --input C --hidden H --threads N [--reps 10]
//
// Prints one JSON line like xg_bench: the median ms of a forward and a
// backward with the weights reordered to the backward's layout in between
// (they change every training step). What is not timed, and would be part of
// a real layer: converting (B,T,C) inputs to oneDNN's (T,B,C) and back, and
// PyTorch-ordered weights to oneDNN's layout. oneDNN's RNN primitives have no
// per-row lengths, no float64, and their backward is a kernel that cannot be
// differentiated again.
#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/serialize.h"  // parse_whole_number

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

struct Args {
  std::string cell = "lstm";
  long B = 64, T = 32, C = 256, H = 512, threads = 1, reps = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + ": value missing");
    const std::string v = argv[i + 1];
    if (k == "--cell") {
      if (v != "lstm" && v != "gru") throw std::invalid_argument("--cell " + v + ": expected lstm or gru");
      a.cell = v;
      continue;
    }
    long* dst = k == "--batch" ? &a.B : k == "--len" ? &a.T : k == "--input" ? &a.C : k == "--hidden" ? &a.H
              : k == "--threads" ? &a.threads : k == "--reps" ? &a.reps : nullptr;
    if (!dst) throw std::invalid_argument("unknown option " + k);
    // A whole number, all of the text: "1.5", "nan", "1e30" and "" are refused.
    *dst = static_cast<long>(xg::parse_whole_number(k, v, 1, 65536));
  }
  return a;
}

// A memory object of `d`, filled with small random values (zeros for states).
dnnl::memory filled(const dnnl::memory::desc& d, const dnnl::engine& eng, std::mt19937& rng, float scale) {
  dnnl::memory m(d, eng);
  float* p = static_cast<float*>(m.get_data_handle());
  std::uniform_real_distribution<float> u(-scale, scale);
  for (size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = scale == 0 ? 0.0f : u(rng);
  return m;
}

template <class Fwd, class Bwd>
double run(const Args& a, const typename Fwd::primitive_desc& fpd, const typename Bwd::primitive_desc& bpd,
           const dnnl::engine& eng, bool lstm) {
  std::mt19937 rng(1);
  dnnl::stream s(eng);
  const float w = 1.0f / static_cast<float>(a.H);
  auto m = [&](const dnnl::memory::desc& d, float scale) { return filled(d, eng, rng, scale); };
  std::unordered_map<int, dnnl::memory> f{
      {DNNL_ARG_SRC_LAYER, m(fpd.src_layer_desc(), 1)}, {DNNL_ARG_SRC_ITER, m(fpd.src_iter_desc(), 0)},
      {DNNL_ARG_WEIGHTS_LAYER, m(fpd.weights_layer_desc(), w)},
      {DNNL_ARG_WEIGHTS_ITER, m(fpd.weights_iter_desc(), w)}, {DNNL_ARG_BIAS, m(fpd.bias_desc(), w)},
      {DNNL_ARG_DST_LAYER, m(fpd.dst_layer_desc(), 0)}, {DNNL_ARG_DST_ITER, m(fpd.dst_iter_desc(), 0)},
      {DNNL_ARG_WORKSPACE, m(fpd.workspace_desc(), 0)}, {DNNL_ARG_SCRATCHPAD, m(fpd.scratchpad_desc(), 0)}};
  if (lstm) {
    f[DNNL_ARG_SRC_ITER_C] = m(fpd.src_iter_c_desc(), 0);
    f[DNNL_ARG_DST_ITER_C] = m(fpd.dst_iter_c_desc(), 0);
  }
  std::unordered_map<int, dnnl::memory> b = f;
  b[DNNL_ARG_WEIGHTS_LAYER] = m(bpd.weights_layer_desc(), 0);
  b[DNNL_ARG_WEIGHTS_ITER] = m(bpd.weights_iter_desc(), 0);
  b[DNNL_ARG_SCRATCHPAD] = m(bpd.scratchpad_desc(), 0);
  b[DNNL_ARG_DIFF_SRC_LAYER] = m(bpd.diff_src_layer_desc(), 0);
  b[DNNL_ARG_DIFF_SRC_ITER] = m(bpd.diff_src_iter_desc(), 0);
  b[DNNL_ARG_DIFF_WEIGHTS_LAYER] = m(bpd.diff_weights_layer_desc(), 0);
  b[DNNL_ARG_DIFF_WEIGHTS_ITER] = m(bpd.diff_weights_iter_desc(), 0);
  b[DNNL_ARG_DIFF_BIAS] = m(bpd.diff_bias_desc(), 0);
  b[DNNL_ARG_DIFF_DST_LAYER] = m(bpd.diff_dst_layer_desc(), 1);  // the gradient of sum(output)
  b[DNNL_ARG_DIFF_DST_ITER] = m(bpd.diff_dst_iter_desc(), 0);
  if (lstm) {
    b[DNNL_ARG_DIFF_SRC_ITER_C] = m(bpd.diff_src_iter_c_desc(), 0);
    b[DNNL_ARG_DIFF_DST_ITER_C] = m(bpd.diff_dst_iter_c_desc(), 0);
  }
  Fwd fwd(fpd);
  Bwd bwd(bpd);
  dnnl::reorder to_bwd_layer(f[DNNL_ARG_WEIGHTS_LAYER], b[DNNL_ARG_WEIGHTS_LAYER]);
  dnnl::reorder to_bwd_iter(f[DNNL_ARG_WEIGHTS_ITER], b[DNNL_ARG_WEIGHTS_ITER]);
  std::vector<double> times;
  for (long r = 0; r < a.reps + 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fwd.execute(s, f);
    to_bwd_layer.execute(s, f[DNNL_ARG_WEIGHTS_LAYER], b[DNNL_ARG_WEIGHTS_LAYER]);
    to_bwd_iter.execute(s, f[DNNL_ARG_WEIGHTS_ITER], b[DNNL_ARG_WEIGHTS_ITER]);
    bwd.execute(s, b);
    s.wait();
    if (r >= 3)
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    omp_set_num_threads(static_cast<int>(a.threads));
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    const bool lstm = a.cell == "lstm";
    const long G = lstm ? 4 : 3;
    const auto dir = dnnl::rnn_direction::unidirectional_left2right;
    const dnnl::memory::desc src({a.T, a.B, a.C}, dt::f32, tag::tnc), dst({a.T, a.B, a.H}, dt::f32, tag::tnc),
        state({1, 1, a.B, a.H}, dt::f32, tag::ldnc),
        bias({1, 1, lstm ? G : G + 1, a.H}, dt::f32, tag::ldgo),  // linear-before-reset: n's two biases
        w_layer({1, 1, a.C, G, a.H}, dt::f32, tag::any), w_iter({1, 1, a.H, G, a.H}, dt::f32, tag::any);
    double ms = 0;
    if (lstm) {
      dnnl::lstm_forward::primitive_desc fpd(
          dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, dir, src, state, state, w_layer, w_iter, bias,
                                   dst, state, state),
          eng);
      dnnl::lstm_backward::primitive_desc bpd(
          dnnl::lstm_backward::desc(dnnl::prop_kind::backward, dir, src, state, state, w_layer, w_iter, bias, dst,
                                    state, state, src, state, state, w_layer, w_iter, bias, dst, state, state),
          eng, fpd);
      ms = run<dnnl::lstm_forward, dnnl::lstm_backward>(a, fpd, bpd, eng, true);
    } else {
      dnnl::lbr_gru_forward::primitive_desc fpd(
          dnnl::lbr_gru_forward::desc(dnnl::prop_kind::forward_training, dir, src, state, w_layer, w_iter, bias, dst,
                                  state),
          eng);
      dnnl::lbr_gru_backward::primitive_desc bpd(
          dnnl::lbr_gru_backward::desc(dnnl::prop_kind::backward, dir, src, state, w_layer, w_iter, bias, dst, state, src,
                                   state, w_layer, w_iter, bias, dst, state),
          eng, fpd);
      ms = run<dnnl::lbr_gru_forward, dnnl::lbr_gru_backward>(a, fpd, bpd, eng, false);
    }
    const dnnl_version_t* v = dnnl_version();
    std::printf("{\"mode\":\"rnn\",\"side\":\"onednn\",\"cell\":\"%s\",\"threads\":%ld,\"median_ms\":%.2f,"
                "\"onednn\":\"%d.%d.%d\"}\n",
                a.cell.c_str(), a.threads, ms, v->major, v->minor, v->patch);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onednn_rnn: %s\n", e.what());
    return 2;
  }
}
