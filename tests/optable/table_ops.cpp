// The ops of tests/optable/optable.py as xg_difftest runs them: one line per
// entry, its attributes read by PyTorch's keyword names.
#include "table_ops.h"
#include "window_options.h"

#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "autograd/xg.h"

namespace xg::optable {

namespace {

using Args = std::function<Tensor(size_t)>;
using Fn = std::function<Tensor(const json&, const Args&)>;

double num(const json& s, const char* key) {
  const json& v = s.at(key);
  if (v.is_string()) {  // JSON has no infinity: Python's json writes Infinity, read back as a string here
    const std::string t = v.get<std::string>();
    if (t == "Infinity" || t == "inf") return INFINITY;
    if (t == "-Infinity" || t == "-inf") return -INFINITY;
  }
  return v.get<double>();
}

// An int64 tensor {"shape": [...], "data": [...]} (class targets).
Tensor longs(const json& j) {
  return from_ints(j.at("data").get<std::vector<int64_t>>(), j.at("shape").get<Shape>());
}

}  // namespace

Reduction reduction_of(const json& s) {
  const std::string r = s.value("reduction", std::string("mean"));
  if (r == "none") return Reduction::none;
  if (r == "sum") return Reduction::sum;
  if (r == "batchmean") return Reduction::batchmean;
  if (r == "mean") return Reduction::mean;
  throw std::invalid_argument("optable: unknown reduction '" + r + "'");
}

InterpolateOptions interpolate_options(const json& s) {
  InterpolateOptions o;
  if (s.contains("size")) o.size(s.at("size").get<std::vector<int64_t>>());
  if (s.contains("scale_factor")) {
    const json& f = s.at("scale_factor");
    o.scale_factor(f.is_array() ? f.get<std::vector<double>>() : std::vector<double>{f.get<double>()});
  }
  o.mode(s.value("mode", std::string("nearest")));
  o.align_corners(s.value("align_corners", false));
  o.recompute_scale_factor(s.value("recompute_scale_factor", false));
  return o;
}

namespace {

Tensor other(const json& s, const Args& a) { return s.contains("other") ? scalar(num(s, "other"), a(0).dtype()) : a(1); }

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = {
      // activations
      {"leaky_relu", [](const json& s, const Args& a) { return leaky_relu(a(0), num(s, "negative_slope")); }},
      {"hardtanh", [](const json& s, const Args& a) { return hardtanh(a(0), num(s, "min_val"), num(s, "max_val")); }},
      {"relu6", [](const json&, const Args& a) { return relu6(a(0)); }},
      {"elu", [](const json& s, const Args& a) { return elu(a(0), num(s, "alpha")); }},
      {"selu", [](const json&, const Args& a) { return selu(a(0)); }},
      {"celu", [](const json& s, const Args& a) { return celu(a(0), num(s, "alpha")); }},
      {"silu", [](const json&, const Args& a) { return silu(a(0)); }},
      {"mish", [](const json&, const Args& a) { return mish(a(0)); }},
      {"hardswish", [](const json&, const Args& a) { return hardswish(a(0)); }},
      {"hardsigmoid", [](const json&, const Args& a) { return hardsigmoid(a(0)); }},
      {"gelu_tanh", [](const json&, const Args& a) { return gelu(a(0), "tanh"); }},
      {"softplus", [](const json& s, const Args& a) { return softplus(a(0), num(s, "beta"), num(s, "threshold")); }},
      {"softsign", [](const json&, const Args& a) { return softsign(a(0)); }},
      {"tanhshrink", [](const json&, const Args& a) { return tanhshrink(a(0)); }},
      {"logsigmoid", [](const json&, const Args& a) { return logsigmoid(a(0)); }},
      {"softshrink", [](const json& s, const Args& a) { return softshrink(a(0), num(s, "lambd")); }},
      {"hardshrink", [](const json& s, const Args& a) { return hardshrink(a(0), num(s, "lambd")); }},
      {"threshold", [](const json& s, const Args& a) { return threshold(a(0), num(s, "threshold"), num(s, "value")); }},
      {"log1p", [](const json&, const Args& a) { return log1p(a(0)); }},
      {"expm1", [](const json&, const Args& a) { return expm1(a(0)); }},
      {"softmin", [](const json& s, const Args& a) { return softmin(a(0), s.at("dim").get<int64_t>()); }},
      {"glu", [](const json& s, const Args& a) { return glu(a(0), s.at("dim").get<int64_t>()); }},
      {"prelu", [](const json&, const Args& a) { return prelu(a(0), a(1)); }},
      {"rrelu", [](const json& s, const Args& a) { return rrelu(a(0), num(s, "lower"), num(s, "upper"), false); }},
      // comparisons
      {"gt", [](const json& s, const Args& a) { return gt(a(0), other(s, a)); }},
      {"ge", [](const json& s, const Args& a) { return ge(a(0), other(s, a)); }},
      {"lt", [](const json& s, const Args& a) { return lt(a(0), other(s, a)); }},
      {"le", [](const json& s, const Args& a) { return le(a(0), other(s, a)); }},
      {"eq", [](const json& s, const Args& a) { return eq(a(0), other(s, a)); }},
      {"ne", [](const json& s, const Args& a) { return ne(a(0), other(s, a)); }},
      // distances
      {"vector_norm",
       [](const json& s, const Args& a) {
         return vector_norm(a(0), num(s, "ord"), s.at("dim").get<std::vector<int64_t>>(), s.at("keepdim").get<bool>());
       }},
      {"pairwise_distance",
       [](const json& s, const Args& a) {
         return pairwise_distance(
             a(0), a(1), PairwiseDistanceOptions().p(num(s, "p")).eps(num(s, "eps")).keepdim(s.at("keepdim").get<bool>()));
       }},
      {"cosine_similarity",
       [](const json& s, const Args& a) {
         return cosine_similarity(a(0), a(1),
                                  CosineSimilarityOptions().dim(s.at("dim").get<int64_t>()).eps(num(s, "eps")));
       }},
      // padding, resampling, rearranging
      {"pad",
       [](const json& s, const Args& a) {
         return pad(a(0), s.at("pad").get<std::vector<int64_t>>(), s.at("mode").get<std::string>(), num(s, "value"));
       }},
      {"interpolate", [](const json& s, const Args& a) { return interpolate(a(0), interpolate_options(s)); }},
      {"pixel_shuffle",
       [](const json& s, const Args& a) { return pixel_shuffle(a(0), s.at("upscale_factor").get<int64_t>()); }},
      {"pixel_unshuffle",
       [](const json& s, const Args& a) { return pixel_unshuffle(a(0), s.at("downscale_factor").get<int64_t>()); }},
      {"channel_shuffle",
       [](const json& s, const Args& a) { return channel_shuffle(a(0), s.at("groups").get<int64_t>()); }},
      // windows: convolution, pooling, unfold and fold
      {"conv1d", [](const json& s, const Args& a) { return conv1d(a(0), a(1), a(2), conv_func_options<1>(s)); }},
      {"conv2d", [](const json& s, const Args& a) { return conv2d(a(0), a(1), a(2), conv_func_options<2>(s)); }},
      {"conv3d", [](const json& s, const Args& a) { return conv3d(a(0), a(1), a(2), conv_func_options<3>(s)); }},
      {"conv_transpose1d",
       [](const json& s, const Args& a) { return conv_transpose1d(a(0), a(1), a(2), conv_transpose_func_options<1>(s)); }},
      {"conv_transpose2d",
       [](const json& s, const Args& a) { return conv_transpose2d(a(0), a(1), a(2), conv_transpose_func_options<2>(s)); }},
      {"conv_transpose3d",
       [](const json& s, const Args& a) { return conv_transpose3d(a(0), a(1), a(2), conv_transpose_func_options<3>(s)); }},
      {"max_pool1d", [](const json& s, const Args& a) { return max_pool1d(a(0), max_pool_options<1>(s)); }},
      {"max_pool2d", [](const json& s, const Args& a) { return max_pool2d(a(0), max_pool_options<2>(s)); }},
      {"max_pool3d", [](const json& s, const Args& a) { return max_pool3d(a(0), max_pool_options<3>(s)); }},
      {"fractional_max_pool2d",
       [](const json& s, const Args& a) { return fractional_max_pool2d(a(0), fractional_options<2>(s, a(1))); }},
      {"fractional_max_pool3d",
       [](const json& s, const Args& a) { return fractional_max_pool3d(a(0), fractional_options<3>(s, a(1))); }},
      {"avg_pool1d", [](const json& s, const Args& a) { return avg_pool1d(a(0), avg_pool_options<1>(s)); }},
      {"avg_pool2d", [](const json& s, const Args& a) { return avg_pool2d(a(0), avg_pool_options<2>(s)); }},
      {"avg_pool3d", [](const json& s, const Args& a) { return avg_pool3d(a(0), avg_pool_options<3>(s)); }},
      {"lp_pool1d", [](const json& s, const Args& a) { return lp_pool1d(a(0), lp_pool_options<1>(s)); }},
      {"lp_pool2d", [](const json& s, const Args& a) { return lp_pool2d(a(0), lp_pool_options<2>(s)); }},
      {"adaptive_avg_pool1d",
       [](const json& s, const Args& a) { return adaptive_avg_pool1d(a(0), size<1>(s, "output_size", 1)[0]); }},
      {"adaptive_avg_pool2d",
       [](const json& s, const Args& a) { return adaptive_avg_pool2d(a(0), size<2>(s, "output_size", 1)); }},
      {"adaptive_avg_pool3d",
       [](const json& s, const Args& a) { return adaptive_avg_pool3d(a(0), size<3>(s, "output_size", 1)); }},
      {"adaptive_max_pool1d",
       [](const json& s, const Args& a) { return adaptive_max_pool1d(a(0), size<1>(s, "output_size", 1)[0]); }},
      {"adaptive_max_pool2d",
       [](const json& s, const Args& a) { return adaptive_max_pool2d(a(0), size<2>(s, "output_size", 1)); }},
      {"adaptive_max_pool3d",
       [](const json& s, const Args& a) { return adaptive_max_pool3d(a(0), size<3>(s, "output_size", 1)); }},
      {"unfold",
       [](const json& s, const Args& a) { return unfold2d(a(0), window(UnfoldOptions(size<2>(s, "kernel_size", 1)), s)); }},
      {"fold",
       [](const json& s, const Args& a) {
         return fold2d(a(0), window(FoldOptions(size<2>(s, "output_size", 1), size<2>(s, "kernel_size", 1)), s));
       }},
      // the rest of the layers as functions
      {"std",
       [](const json& s, const Args& a) {
         return xg::std(a(0), s.at("axes").get<std::vector<int64_t>>(), s.at("correction").get<int64_t>(),
                        s.at("keepdims").get<bool>());
       }},
      {"flatten",
       [](const json& s, const Args& a) {
         return flatten(a(0), s.at("start_dim").get<int64_t>(), s.at("end_dim").get<int64_t>());
       }},
      {"unflatten",
       [](const json& s, const Args& a) {
         return unflatten(a(0), s.at("dim").get<int64_t>(), s.at("sizes").get<Shape>());
       }},
      {"batch_norm_relu",
       [](const json& s, const Args& a) {
         return batch_norm_relu(a(0), Tensor(), Tensor(), a(1), a(2), true, 0.1, num(s, "eps"), {});
       }},
      {"group_norm",
       [](const json& s, const Args& a) { return group_norm(a(0), s.at("groups").get<int64_t>(), a(1), a(2), num(s, "eps")); }},
      {"instance_norm", [](const json& s, const Args& a) { return instance_norm(a(0), a(1), a(2), num(s, "eps")); }},
      {"local_response_norm",
       [](const json& s, const Args& a) {
         return local_response_norm(a(0), s.at("size").get<int64_t>(), num(s, "alpha"), num(s, "beta"), num(s, "k"));
       }},
      {"bilinear", [](const json& s, const Args& a) { return bilinear(a(0), a(1), a(2), a(3)); }},
      // losses
      {"l1_loss", [](const json& s, const Args& a) { return l1_loss(a(0), a(1), reduction_of(s)); }},
      {"mse_loss", [](const json& s, const Args& a) { return mse_loss(a(0), a(1), reduction_of(s)); }},
      {"smooth_l1_loss",
       [](const json& s, const Args& a) {
         return smooth_l1_loss(a(0), a(1), SmoothL1LossOptions().reduction(reduction_of(s)).beta(num(s, "beta")));
       }},
      {"huber_loss",
       [](const json& s, const Args& a) {
         return huber_loss(a(0), a(1), HuberLossOptions().reduction(reduction_of(s)).delta(num(s, "delta")));
       }},
      {"binary_cross_entropy",
       [](const json& s, const Args& a) {
         return binary_cross_entropy(a(0), a(1), BCELossOptions().weight(a(2)).reduction(reduction_of(s)));
       }},
      {"binary_cross_entropy_with_logits",
       [](const json& s, const Args& a) {
         return binary_cross_entropy_with_logits(
             a(0), a(1), BCEWithLogitsLossOptions().weight(a(2)).reduction(reduction_of(s)).pos_weight(a(3)));
       }},
      {"kl_div",
       [](const json& s, const Args& a) {
         return kl_div(a(0), a(1), KLDivLossOptions().reduction(reduction_of(s)).log_target(s.at("log_target").get<bool>()));
       }},
      {"poisson_nll_loss",
       [](const json& s, const Args& a) {
         return poisson_nll_loss(a(0), a(1),
                                 PoissonNLLLossOptions()
                                     .log_input(s.at("log_input").get<bool>())
                                     .full(s.at("full").get<bool>())
                                     .eps(num(s, "eps"))
                                     .reduction(reduction_of(s)));
       }},
      {"gaussian_nll_loss",
       [](const json& s, const Args& a) {
         return gaussian_nll_loss(
             a(0), a(1), a(2),
             GaussianNLLLossOptions().full(s.at("full").get<bool>()).eps(num(s, "eps")).reduction(reduction_of(s)));
       }},
      {"soft_margin_loss", [](const json& s, const Args& a) { return soft_margin_loss(a(0), a(1), reduction_of(s)); }},
      {"hinge_embedding_loss",
       [](const json& s, const Args& a) {
         return hinge_embedding_loss(a(0), a(1),
                                     HingeEmbeddingLossOptions().margin(num(s, "margin")).reduction(reduction_of(s)));
       }},
      {"multilabel_soft_margin_loss",
       [](const json& s, const Args& a) {
         return multilabel_soft_margin_loss(a(0), a(1),
                                            MultilabelSoftMarginLossOptions().weight(a(2)).reduction(reduction_of(s)));
       }},
      {"nll_loss",
       [](const json& s, const Args& a) {
         return nll_loss(a(0), longs(s.at("target")),
                         NLLLossOptions().weight(a(1)).ignore_index(s.at("ignore_index").get<int64_t>()).reduction(
                             reduction_of(s)));
       }},
      {"cross_entropy",
       [](const json& s, const Args& a) {
         const bool probs = !s.contains("target");
         const auto o = CrossEntropyLossOptions()
                            .weight(a(probs ? 2 : 1))
                            .ignore_index(s.at("ignore_index").get<int64_t>())
                            .reduction(reduction_of(s))
                            .label_smoothing(num(s, "label_smoothing"));
         return cross_entropy(a(0), probs ? a(1) : longs(s.at("target")), o);
       }},
      {"margin_ranking_loss",
       [](const json& s, const Args& a) {
         return margin_ranking_loss(a(0), a(1), a(2),
                                    MarginLossOptions().margin(num(s, "margin")).reduction(reduction_of(s)));
       }},
      {"cosine_embedding_loss",
       [](const json& s, const Args& a) {
         return cosine_embedding_loss(a(0), a(1), a(2),
                                      MarginLossOptions().margin(num(s, "margin")).reduction(reduction_of(s)));
       }},
      {"ctc_loss",  // through log_softmax, as its PyTorch twin (tests/optable/optable.py)
       [](const json& s, const Args& a) {
         return ctc_loss(log_softmax(a(0), -1), longs(s.at("targets")), longs(s.at("input_lengths")),
                         longs(s.at("target_lengths")),
                         CTCLossOptions()
                             .blank(s.at("blank").get<int64_t>())
                             .reduction(reduction_of(s))
                             .zero_infinity(s.at("zero_infinity").get<bool>()));
       }},
      {"multi_margin_loss",
       [](const json& s, const Args& a) {
         return multi_margin_loss(a(0), longs(s.at("target")),
                                  MultiMarginLossOptions()
                                      .p(s.at("p").get<int64_t>())
                                      .margin(num(s, "margin"))
                                      .weight(a(1))
                                      .reduction(reduction_of(s)));
       }},
      {"multilabel_margin_loss",
       [](const json& s, const Args& a) {
         return multilabel_margin_loss(a(0), longs(s.at("target")), reduction_of(s));
       }},
      {"triplet_margin_loss",
       [](const json& s, const Args& a) {
         return triplet_margin_loss(a(0), a(1), a(2),
                                    TripletMarginLossOptions()
                                        .margin(num(s, "margin"))
                                        .p(num(s, "p"))
                                        .eps(num(s, "eps"))
                                        .swap(s.at("swap").get<bool>())
                                        .reduction(reduction_of(s)));
       }},
      {"triplet_margin_with_distance_loss",
       [](const json& s, const Args& a) {
         return triplet_margin_with_distance_loss(a(0), a(1), a(2),
                                                  TripletMarginWithDistanceLossOptions()
                                                      .margin(num(s, "margin"))
                                                      .swap(s.at("swap").get<bool>())
                                                      .reduction(reduction_of(s)));
       }},
  };
  return t;
}

}  // namespace

bool has(const std::string& op) { return table().count(op) != 0; }

Tensor run(const std::string& op, const json& s, const std::function<Tensor(size_t)>& arg) {
  const auto it = table().find(op);
  if (it == table().end()) throw std::invalid_argument("optable: unknown op '" + op + "'");
  const size_t n = s.contains("args") ? s.at("args").size() : 0;
  // arguments past those given are undefined (PyTorch's None)
  return it->second(s, [&](size_t i) { return i < n ? arg(i) : Tensor(); });
}

std::vector<std::string> names() {
  std::vector<std::string> v;
  for (const auto& [k, f] : table()) v.push_back(k);
  return v;
}

}  // namespace xg::optable
