// The module table: one line per torch.nn class, its constructor called with
// PyTorch's keyword arguments read by name.
#include "table_modules.h"

#include <functional>
#include <optional>
#include <stdexcept>
#include <utility>

#include "nn/nn.h"
#include "table_ops.h"
#include "window_options.h"

namespace xg::optable {

namespace {

using json = nlohmann::json;
using Tensors = std::map<std::string, Tensor>;
using Factory = std::function<ModuleCall(const json&, const Tensors&)>;

// Every module the table builds is made as a temporary and moved into its
// shared_ptr, as Sequential(Linear(4, 8), ReLU()) and register_module("fc",
// Linear(4, 8)) do: every parity, gradient and fuzz run of a table module is
// then also a check that a moved module kept its parameters and options.
template <class M, class... A>
std::shared_ptr<M> made(A&&... a) {
  return std::make_shared<M>(M(std::forward<A>(a)...));
}

double num(const json& k, const char* key, double fallback) { return k.contains(key) ? k.at(key).get<double>() : fallback; }
int64_t integer(const json& k, const char* key, int64_t fallback) {
  return k.contains(key) ? k.at(key).get<int64_t>() : fallback;
}
// None where the key is absent or null (PyTorch's None).
std::optional<int64_t> maybe_integer(const json& k, const char* key) {
  if (!k.contains(key) || k.at(key).is_null()) return std::nullopt;
  return k.at(key).get<int64_t>();
}
bool flag(const json& k, const char* key, bool fallback) { return k.contains(key) ? k.at(key).get<bool>() : fallback; }
std::vector<int64_t> ints(const json& k, const char* key) {
  const json& v = k.at(key);
  return v.is_array() ? v.get<std::vector<int64_t>>() : std::vector<int64_t>{v.get<int64_t>()};
}
template <size_t D>
nn::ConvOptions<D> conv_options(const json& k) {
  auto o = nn::ConvOptions<D>(integer(k, "in_channels", 1), integer(k, "out_channels", 1), size<D>(k, "kernel_size", 1))
               .stride(size<D>(k, "stride", 1))
               .dilation(size<D>(k, "dilation", 1))
               .groups(integer(k, "groups", 1))
               .bias(flag(k, "bias", true))
               .padding_mode(k.value("padding_mode", std::string("zeros")));
  if (given(k, "padding") && k.at("padding").is_string()) return o.padding(k.at("padding").get<std::string>().c_str());
  return o.padding(size<D>(k, "padding", 0).values());
}
template <size_t D>
nn::ConvTransposeOptions<D> conv_transpose_options(const json& k) {
  return nn::ConvTransposeOptions<D>(integer(k, "in_channels", 1), integer(k, "out_channels", 1),
                                     size<D>(k, "kernel_size", 1))
      .stride(size<D>(k, "stride", 1))
      .padding(size<D>(k, "padding", 0))
      .output_padding(size<D>(k, "output_padding", 0))
      .groups(integer(k, "groups", 1))
      .bias(flag(k, "bias", true))
      .dilation(size<D>(k, "dilation", 1));
}
// A module whose forward takes the values and the indices (the unpooling classes).
template <class M, class Options>
ModuleCall unpool(const Options& o) {
  auto m = made<M>(o);
  return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1)); }};
}

// The i-th argument, or undefined past those given (an optional mask).
Tensor opt(const std::vector<Tensor>& a, size_t i) { return i < a.size() ? a[i] : Tensor(); }

nn::TransformerLayerOptions layer_options(const json& k) {
  return nn::TransformerLayerOptions(integer(k, "d_model", 1), integer(k, "nhead", 1))
      .dim_feedforward(integer(k, "dim_feedforward", 2048))
      .dropout(num(k, "dropout", 0.1))
      .activation(k.value("activation", std::string("relu")))
      .layer_norm_eps(num(k, "layer_norm_eps", 1e-5))
      .batch_first(flag(k, "batch_first", false))
      .norm_first(flag(k, "norm_first", false));
}

Tensor tensor_arg(const Tensors& t, const char* key) { return t.count(key) ? t.at(key) : Tensor(); }

// A FractionalMaxPool: its values, then its indices as floats, in one tensor (as its twin, optable.py).
template <size_t D>
ModuleCall fractional(const json& k, const Tensors& t) {
  auto m = made<nn::FractionalMaxPoolNd<D>>(fractional_options<D>(k, tensor_arg(t, "_random_samples")));
  return {m, [m](const std::vector<Tensor>& a) {
            const MaxPool2dResult r = m->forward_with_indices(a.at(0));
            return concat({reshape(r.values, {-1}), reshape(r.indices.to(r.values.dtype()), {-1})}, 0);
          }};
}

// forward(x) of a one-input module.
template <class M>
ModuleCall unary(std::shared_ptr<M> m) {
  return {m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0)); }};
}
// forward(a, b) and forward(a, b, c) of the losses and distances.
template <class M>
ModuleCall binary(std::shared_ptr<M> m) {
  return {m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1)); }};
}
template <class M>
ModuleCall ternary(std::shared_ptr<M> m) {
  return {m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1), a.at(2)); }};
}

template <class M, class... A>
ModuleCall one(A&&... a) {
  return unary(made<M>(std::forward<A>(a)...));
}

template <class M>
ModuleCall batch_norm(const json& k) {
  return one<M>(integer(k, "num_features", 1), num(k, "eps", 1e-5), num(k, "momentum", 0.1), flag(k, "affine", true),
                flag(k, "track_running_stats", true));
}

// RNN, LSTM or GRU from torch.nn's keyword arguments.
template <class M>
ModuleCall recurrent(const json& k) {
  Generator g(0);
  return one<M>(nn::RNNOptions(integer(k, "input_size", 1), integer(k, "hidden_size", 1))
                    .num_layers(integer(k, "num_layers", 1))
                    .nonlinearity(k.value("nonlinearity", std::string("tanh")))
                    .bias(flag(k, "bias", true))
                    .batch_first(flag(k, "batch_first", false))
                    .bidirectional(flag(k, "bidirectional", false)),
                std::ref(g));
}

const std::map<std::string, Factory>& table() {
  static const std::map<std::string, Factory> t = {
      // activations
      {"ReLU", [](const json&, const Tensors&) { return one<nn::ReLU>(); }},
      {"ReLU6", [](const json&, const Tensors&) { return one<nn::ReLU6>(); }},
      {"SELU", [](const json&, const Tensors&) { return one<nn::SELU>(); }},
      {"SiLU", [](const json&, const Tensors&) { return one<nn::SiLU>(); }},
      {"Mish", [](const json&, const Tensors&) { return one<nn::Mish>(); }},
      {"Hardswish", [](const json&, const Tensors&) { return one<nn::Hardswish>(); }},
      {"Hardsigmoid", [](const json&, const Tensors&) { return one<nn::Hardsigmoid>(); }},
      {"Sigmoid", [](const json&, const Tensors&) { return one<nn::Sigmoid>(); }},
      {"Tanh", [](const json&, const Tensors&) { return one<nn::Tanh>(); }},
      {"Softsign", [](const json&, const Tensors&) { return one<nn::Softsign>(); }},
      {"Tanhshrink", [](const json&, const Tensors&) { return one<nn::Tanhshrink>(); }},
      {"LogSigmoid", [](const json&, const Tensors&) { return one<nn::LogSigmoid>(); }},
      {"Identity", [](const json&, const Tensors&) { return one<nn::Identity>(); }},
      {"Softmax2d", [](const json&, const Tensors&) { return one<nn::Softmax2d>(); }},
      {"LeakyReLU", [](const json& k, const Tensors&) { return one<nn::LeakyReLU>(num(k, "negative_slope", 0.01)); }},
      {"Hardtanh",
       [](const json& k, const Tensors&) { return one<nn::Hardtanh>(num(k, "min_val", -1), num(k, "max_val", 1)); }},
      {"ELU", [](const json& k, const Tensors&) { return one<nn::ELU>(num(k, "alpha", 1)); }},
      {"CELU", [](const json& k, const Tensors&) { return one<nn::CELU>(num(k, "alpha", 1)); }},
      {"GELU",
       [](const json& k, const Tensors&) { return one<nn::GELU>(k.value("approximate", std::string("none"))); }},
      {"Softplus",
       [](const json& k, const Tensors&) { return one<nn::Softplus>(num(k, "beta", 1), num(k, "threshold", 20)); }},
      {"Softshrink", [](const json& k, const Tensors&) { return one<nn::Softshrink>(num(k, "lambd", 0.5)); }},
      {"Hardshrink", [](const json& k, const Tensors&) { return one<nn::Hardshrink>(num(k, "lambd", 0.5)); }},
      {"Threshold",
       [](const json& k, const Tensors&) { return one<nn::Threshold>(num(k, "threshold", 0), num(k, "value", 0)); }},
      {"Softmax", [](const json& k, const Tensors&) { return one<nn::Softmax>(integer(k, "dim", -1)); }},
      {"Softmin", [](const json& k, const Tensors&) { return one<nn::Softmin>(integer(k, "dim", -1)); }},
      {"LogSoftmax", [](const json& k, const Tensors&) { return one<nn::LogSoftmax>(integer(k, "dim", -1)); }},
      {"GLU", [](const json& k, const Tensors&) { return one<nn::GLU>(integer(k, "dim", -1)); }},
      {"PReLU",
       [](const json& k, const Tensors&) { return one<nn::PReLU>(integer(k, "num_parameters", 1), num(k, "init", 0.25)); }},
      {"RReLU", [](const json& k, const Tensors&) { return one<nn::RReLU>(num(k, "lower", 0.125), num(k, "upper", 1.0 / 3)); }},
      // losses
      {"L1Loss", [](const json& k, const Tensors&) { return binary(made<nn::L1Loss>(reduction_of(k))); }},
      {"MSELoss", [](const json& k, const Tensors&) { return binary(made<nn::MSELoss>(reduction_of(k))); }},
      {"SmoothL1Loss",
       [](const json& k, const Tensors&) {
         return binary(made<nn::SmoothL1Loss>(
             SmoothL1LossOptions().reduction(reduction_of(k)).beta(num(k, "beta", 1))));
       }},
      {"HuberLoss",
       [](const json& k, const Tensors&) {
         return binary(
             made<nn::HuberLoss>(HuberLossOptions().reduction(reduction_of(k)).delta(num(k, "delta", 1))));
       }},
      {"BCELoss",
       [](const json& k, const Tensors& t) {
         return binary(
             made<nn::BCELoss>(BCELossOptions().weight(tensor_arg(t, "weight")).reduction(reduction_of(k))));
       }},
      {"BCEWithLogitsLoss",
       [](const json& k, const Tensors& t) {
         return binary(made<nn::BCEWithLogitsLoss>(BCEWithLogitsLossOptions()
                                                                   .weight(tensor_arg(t, "weight"))
                                                                   .reduction(reduction_of(k))
                                                                   .pos_weight(tensor_arg(t, "pos_weight"))));
       }},
      {"KLDivLoss",
       [](const json& k, const Tensors&) {
         return binary(made<nn::KLDivLoss>(
             KLDivLossOptions().reduction(reduction_of(k)).log_target(flag(k, "log_target", false))));
       }},
      {"PoissonNLLLoss",
       [](const json& k, const Tensors&) {
         return binary(made<nn::PoissonNLLLoss>(PoissonNLLLossOptions()
                                                                .log_input(flag(k, "log_input", true))
                                                                .full(flag(k, "full", false))
                                                                .eps(num(k, "eps", 1e-8))
                                                                .reduction(reduction_of(k))));
       }},
      {"GaussianNLLLoss",
       [](const json& k, const Tensors&) {
         return ternary(made<nn::GaussianNLLLoss>(
             GaussianNLLLossOptions().full(flag(k, "full", false)).eps(num(k, "eps", 1e-6)).reduction(reduction_of(k))));
       }},
      {"SoftMarginLoss",
       [](const json& k, const Tensors&) { return binary(made<nn::SoftMarginLoss>(reduction_of(k))); }},
      {"HingeEmbeddingLoss",
       [](const json& k, const Tensors&) {
         return binary(made<nn::HingeEmbeddingLoss>(
             HingeEmbeddingLossOptions().margin(num(k, "margin", 1)).reduction(reduction_of(k))));
       }},
      {"MultiLabelSoftMarginLoss",
       [](const json& k, const Tensors& t) {
         return binary(made<nn::MultiLabelSoftMarginLoss>(
             MultilabelSoftMarginLossOptions().weight(tensor_arg(t, "weight")).reduction(reduction_of(k))));
       }},
      {"NLLLoss",
       [](const json& k, const Tensors& t) {
         return binary(made<nn::NLLLoss>(NLLLossOptions()
                                                         .weight(tensor_arg(t, "weight"))
                                                         .ignore_index(integer(k, "ignore_index", -100))
                                                         .reduction(reduction_of(k))));
       }},
      {"CrossEntropyLoss",
       [](const json& k, const Tensors& t) {
         return binary(made<nn::CrossEntropyLoss>(CrossEntropyLossOptions()
                                                                  .weight(tensor_arg(t, "weight"))
                                                                  .ignore_index(integer(k, "ignore_index", -100))
                                                                  .reduction(reduction_of(k))
                                                                  .label_smoothing(num(k, "label_smoothing", 0))));
       }},
      {"MultiMarginLoss",
       [](const json& k, const Tensors& t) {
         return binary(made<nn::MultiMarginLoss>(MultiMarginLossOptions()
                                                                 .p(integer(k, "p", 1))
                                                                 .margin(num(k, "margin", 1))
                                                                 .weight(tensor_arg(t, "weight"))
                                                                 .reduction(reduction_of(k))));
       }},
      {"CTCLoss",  // after a log_softmax, as its PyTorch twin (tests/optable/optable.py)
       [](const json& k, const Tensors&) {
         auto m = made<nn::CTCLoss>(CTCLossOptions()
                                                    .blank(integer(k, "blank", 0))
                                                    .reduction(reduction_of(k))
                                                    .zero_infinity(flag(k, "zero_infinity", false)));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             return m->forward(log_softmax(a.at(0), -1), a.at(1), a.at(2), a.at(3));
                           }};
       }},
      {"MultiLabelMarginLoss",
       [](const json& k, const Tensors&) { return binary(made<nn::MultiLabelMarginLoss>(reduction_of(k))); }},
      {"MarginRankingLoss",
       [](const json& k, const Tensors&) {
         return ternary(made<nn::MarginRankingLoss>(
             MarginLossOptions().margin(num(k, "margin", 0)).reduction(reduction_of(k))));
       }},
      {"CosineEmbeddingLoss",
       [](const json& k, const Tensors&) {
         return ternary(made<nn::CosineEmbeddingLoss>(
             MarginLossOptions().margin(num(k, "margin", 0)).reduction(reduction_of(k))));
       }},
      {"TripletMarginLoss",
       [](const json& k, const Tensors&) {
         return ternary(made<nn::TripletMarginLoss>(TripletMarginLossOptions()
                                                                    .margin(num(k, "margin", 1))
                                                                    .p(num(k, "p", 2))
                                                                    .eps(num(k, "eps", 1e-6))
                                                                    .swap(flag(k, "swap", false))
                                                                    .reduction(reduction_of(k))));
       }},
      {"TripletMarginWithDistanceLoss",
       [](const json& k, const Tensors&) {
         return ternary(made<nn::TripletMarginWithDistanceLoss>(
             TripletMarginWithDistanceLossOptions().margin(num(k, "margin", 1)).swap(flag(k, "swap", false)).reduction(
                 reduction_of(k))));
       }},
      // layers with parameters (the state dict overwrites their initial values)
      {"Linear",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::Linear>(integer(k, "in_features", 1), integer(k, "out_features", 1), std::ref(g),
                                flag(k, "bias", true));
       }},
      {"LayerNorm",
       [](const json& k, const Tensors&) {
         return one<nn::LayerNorm>(integer(k, "normalized_shape", 1), num(k, "eps", 1e-5),
                                   flag(k, "elementwise_affine", true));
       }},
      {"Embedding",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::Embedding>(integer(k, "num_embeddings", 1), integer(k, "embedding_dim", 1), std::ref(g),
                                   maybe_integer(k, "padding_idx"));
       }},
      {"Dropout",
       [](const json& k, const Tensors&) {
         return one<nn::Dropout>(num(k, "p", 0.5), std::make_shared<Generator>(0));
       }},
      // the recurrent layers: forward(x) gives the output alone
      {"RNN", [](const json& k, const Tensors&) { return recurrent<nn::RNN>(k); }},
      {"LSTM", [](const json& k, const Tensors&) { return recurrent<nn::LSTM>(k); }},
      {"GRU", [](const json& k, const Tensors&) { return recurrent<nn::GRU>(k); }},
      {"RNNCell",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::RNNCell>(integer(k, "input_size", 1), integer(k, "hidden_size", 1), g,
                                                flag(k, "bias", true), k.value("nonlinearity", std::string("tanh")));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1)); }};
       }},
      {"GRUCell",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::GRUCell>(integer(k, "input_size", 1), integer(k, "hidden_size", 1), g,
                                                flag(k, "bias", true));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1)); }};
       }},
      {"LSTMCell",  // (x, h, c) -> [h' | c'] along the last dimension
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::LSTMCell>(integer(k, "input_size", 1), integer(k, "hidden_size", 1), g,
                                                 flag(k, "bias", true));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             const auto [h, c] = m->forward(a.at(0), a.at(1), a.at(2));
                             return concat({h, c}, -1);
                           }};
       }},
      // padding, resampling, rearranging
      {"ConstantPad1d", [](const json& k, const Tensors&) { return one<nn::ConstantPad1d>(ints(k, "padding"), num(k, "value", 0)); }},
      {"ConstantPad2d", [](const json& k, const Tensors&) { return one<nn::ConstantPad2d>(ints(k, "padding"), num(k, "value", 0)); }},
      {"ConstantPad3d", [](const json& k, const Tensors&) { return one<nn::ConstantPad3d>(ints(k, "padding"), num(k, "value", 0)); }},
      {"ZeroPad2d", [](const json& k, const Tensors&) { return one<nn::ZeroPad2d>(ints(k, "padding")); }},
      {"ReflectionPad1d", [](const json& k, const Tensors&) { return one<nn::ReflectionPad1d>(ints(k, "padding")); }},
      {"ReflectionPad2d", [](const json& k, const Tensors&) { return one<nn::ReflectionPad2d>(ints(k, "padding")); }},
      {"ReflectionPad3d", [](const json& k, const Tensors&) { return one<nn::ReflectionPad3d>(ints(k, "padding")); }},
      {"ReplicationPad1d", [](const json& k, const Tensors&) { return one<nn::ReplicationPad1d>(ints(k, "padding")); }},
      {"ReplicationPad2d", [](const json& k, const Tensors&) { return one<nn::ReplicationPad2d>(ints(k, "padding")); }},
      {"ReplicationPad3d", [](const json& k, const Tensors&) { return one<nn::ReplicationPad3d>(ints(k, "padding")); }},
      {"Upsample", [](const json& k, const Tensors&) { return one<nn::Upsample>(interpolate_options(k)); }},
      {"UpsamplingNearest2d",
       [](const json& k, const Tensors&) {
         const InterpolateOptions o = interpolate_options(k);
         return one<nn::UpsamplingNearest2d>(o.size(), o.scale_factor());
       }},
      {"UpsamplingBilinear2d",
       [](const json& k, const Tensors&) {
         const InterpolateOptions o = interpolate_options(k);
         return one<nn::UpsamplingBilinear2d>(o.size(), o.scale_factor());
       }},
      {"PixelShuffle", [](const json& k, const Tensors&) { return one<nn::PixelShuffle>(integer(k, "upscale_factor", 1)); }},
      {"PixelUnshuffle",
       [](const json& k, const Tensors&) { return one<nn::PixelUnshuffle>(integer(k, "downscale_factor", 1)); }},
      {"ChannelShuffle", [](const json& k, const Tensors&) { return one<nn::ChannelShuffle>(integer(k, "groups", 1)); }},
      {"Unflatten",
       [](const json& k, const Tensors&) {
         return one<nn::Unflatten>(integer(k, "dim", 0), Shape(ints(k, "unflattened_size")));
       }},
      // the Transformer's layers: forward's optional masks in PyTorch's order
      {"MultiheadAttention",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::MultiheadAttention>(
             nn::MultiheadAttentionOptions(integer(k, "embed_dim", 1), integer(k, "num_heads", 1))
                 .dropout(num(k, "dropout", 0))
                 .bias(flag(k, "bias", true))
                 .batch_first(flag(k, "batch_first", false)),
             g);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             return m->forward(a.at(0), a.at(1), a.at(2), opt(a, 3), false, opt(a, 4)).output;
                           }};
       }},
      {"AdaptiveLogSoftmaxWithLoss",  // output, loss and log_prob in one tensor, as its twin (optable.py)
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::AdaptiveLogSoftmaxWithLoss>(
             integer(k, "in_features", 1), integer(k, "n_classes", 2), ints(k, "cutoffs"), g, num(k, "div_value", 4.0),
             flag(k, "head_bias", false));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             const nn::ASMoutput out = m->forward(a.at(0), a.at(1));
                             const Tensor rows = reshape(a.at(0), {-1, a.at(0).size(-1)});
                             return concat({reshape(out.output, {-1}), reshape(out.loss, {1}),
                                            reshape(m->log_prob(rows), {-1})},
                                           0);
                           }};
       }},
      {"FractionalMaxPool2d", [](const json& k, const Tensors& t) { return fractional<2>(k, t); }},
      {"FractionalMaxPool3d", [](const json& k, const Tensors& t) { return fractional<3>(k, t); }},
      {"TransformerEncoderLayer",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::TransformerEncoderLayer>(layer_options(k), g);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), opt(a, 1), opt(a, 2)); }};
       }},
      {"TransformerDecoderLayer",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::TransformerDecoderLayer>(layer_options(k), g);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             return m->forward(a.at(0), a.at(1), opt(a, 2), opt(a, 3), opt(a, 4), opt(a, 5));
                           }};
       }},
      {"TransformerEncoder",
       [](const json& k, const Tensors&) {
         Generator g(0);
         const nn::TransformerLayerOptions o = layer_options(k);
         auto norm = flag(k, "final_norm", false) ? made<nn::LayerNorm>(o.d_model(), o.layer_norm_eps())
                                                  : nullptr;
         auto m = made<nn::TransformerEncoder>(o, integer(k, "num_layers", 1), g, norm);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), opt(a, 1), opt(a, 2)); }};
       }},
      {"TransformerDecoder",
       [](const json& k, const Tensors&) {
         Generator g(0);
         const nn::TransformerLayerOptions o = layer_options(k);
         auto norm = flag(k, "final_norm", false) ? made<nn::LayerNorm>(o.d_model(), o.layer_norm_eps())
                                                  : nullptr;
         auto m = made<nn::TransformerDecoder>(o, integer(k, "num_layers", 1), g, norm);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             return m->forward(a.at(0), a.at(1), opt(a, 2), opt(a, 3), opt(a, 4), opt(a, 5));
                           }};
       }},
      {"Transformer",
       [](const json& k, const Tensors&) {
         Generator g(0);
         const nn::TransformerLayerOptions l = layer_options(k);
         auto m = made<nn::Transformer>(nn::TransformerOptions()
                                                        .d_model(l.d_model())
                                                        .nhead(l.nhead())
                                                        .num_encoder_layers(integer(k, "num_encoder_layers", 6))
                                                        .num_decoder_layers(integer(k, "num_decoder_layers", 6))
                                                        .dim_feedforward(l.dim_feedforward())
                                                        .dropout(l.dropout())
                                                        .activation(l.activation())
                                                        .layer_norm_eps(l.layer_norm_eps())
                                                        .batch_first(l.batch_first())
                                                        .norm_first(l.norm_first()),
                                                    g);
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             return m->forward(a.at(0), a.at(1), opt(a, 2), opt(a, 3), opt(a, 4), opt(a, 5), opt(a, 6),
                                               opt(a, 7));
                           }};
       }},
      // the rest of the layers (a stride of None is 0)
      {"AvgPool1d", [](const json& k, const Tensors&) { return one<nn::AvgPool1d>(avg_pool_options<1>(k)); }},
      {"MaxPool1d", [](const json& k, const Tensors&) { return one<nn::MaxPool1d>(max_pool_options<1>(k)); }},
      {"LPPool1d", [](const json& k, const Tensors&) { return one<nn::LPPool1d>(lp_pool_options<1>(k)); }},
      {"LPPool2d", [](const json& k, const Tensors&) { return one<nn::LPPool2d>(lp_pool_options<2>(k)); }},
      {"AdaptiveAvgPool1d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveAvgPool1d>(integer(k, "output_size", 1)); }},
      {"AdaptiveMaxPool1d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveMaxPool1d>(integer(k, "output_size", 1)); }},
      {"AdaptiveMaxPool2d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveMaxPool2d>(size<2>(k, "output_size", 1)); }},
      {"InstanceNorm1d",
       [](const json& k, const Tensors&) {
         return one<nn::InstanceNorm1d>(integer(k, "num_features", 1), num(k, "eps", 1e-5), 0.1, flag(k, "affine", false));
       }},
      {"InstanceNorm2d",
       [](const json& k, const Tensors&) {
         return one<nn::InstanceNorm2d>(integer(k, "num_features", 1), num(k, "eps", 1e-5), 0.1, flag(k, "affine", false));
       }},
      {"InstanceNorm3d",
       [](const json& k, const Tensors&) {
         return one<nn::InstanceNorm3d>(integer(k, "num_features", 1), num(k, "eps", 1e-5), 0.1, flag(k, "affine", false));
       }},
      {"Bilinear",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::Bilinear>(integer(k, "in1_features", 1), integer(k, "in2_features", 1),
                                                 integer(k, "out_features", 1), g, flag(k, "bias", true));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), a.at(1)); }};
       }},
      {"Unfold",
       [](const json& k, const Tensors&) { return one<nn::Unfold>(window(UnfoldOptions(size<2>(k, "kernel_size", 1)), k)); }},
      {"Fold",
       [](const json& k, const Tensors&) {
         return one<nn::Fold>(window(FoldOptions(size<2>(k, "output_size", 1), size<2>(k, "kernel_size", 1)), k));
       }},
      {"ConvTranspose1d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::ConvTranspose1d>(conv_transpose_options<1>(k), std::ref(g));
       }},
      {"Dropout1d", [](const json& k, const Tensors&) { return one<nn::Dropout1d>(num(k, "p", 0.5)); }},
      {"Dropout2d", [](const json& k, const Tensors&) { return one<nn::Dropout2d>(num(k, "p", 0.5)); }},
      {"Dropout3d", [](const json& k, const Tensors&) { return one<nn::Dropout3d>(num(k, "p", 0.5)); }},
      {"AlphaDropout", [](const json& k, const Tensors&) { return one<nn::AlphaDropout>(num(k, "p", 0.5)); }},
      {"FeatureAlphaDropout",
       [](const json& k, const Tensors&) { return one<nn::FeatureAlphaDropout>(num(k, "p", 0.5)); }},
      // containers, called as the table's twins call them
      {"ModuleDict",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::ModuleDict>();
         for (int64_t i = 0; i < integer(k, "n", 1); ++i)
           m->insert("m" + std::to_string(i), made<nn::Linear>(integer(k, "in_features", 1),
                                                                         integer(k, "out_features", 1), g));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             Tensor y;
                             for (const auto& [key, child] : *m) y = y.defined() ? y + child->forward(a.at(0)) : child->forward(a.at(0));
                             return y;
                           }};
       }},
      {"ParameterList",
       [](const json& k, const Tensors&) {
         auto m = made<nn::ParameterList>();
         for (int64_t i = 0; i < integer(k, "n", 1); ++i) m->append(zeros({integer(k, "width", 1)}));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) {
                             Tensor y = a.at(0) * (*m)[0];
                             for (size_t i = 1; i < m->size(); ++i) y = y + a.at(0) * (*m)[i];
                             return y;
                           }};
       }},
      {"ParameterDict",
       [](const json& k, const Tensors&) {
         const int64_t w = integer(k, "width", 1);
         auto m = made<nn::ParameterDict>();
         m->insert("scale", zeros({w}));
         m->insert("shift", zeros({w}));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return a.at(0) * (*m)["scale"] + (*m)["shift"]; }};
       }},
      {"AvgPool3d", [](const json& k, const Tensors&) { return one<nn::AvgPool3d>(avg_pool_options<3>(k)); }},
      {"MaxPool3d", [](const json& k, const Tensors&) { return one<nn::MaxPool3d>(max_pool_options<3>(k)); }},
      {"AdaptiveAvgPool3d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveAvgPool3d>(size<3>(k, "output_size", 1)); }},
      {"AdaptiveMaxPool3d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveMaxPool3d>(size<3>(k, "output_size", 1)); }},
      {"BatchNorm1d", [](const json& k, const Tensors&) { return batch_norm<nn::BatchNorm1d>(k); }},
      {"BatchNorm2d", [](const json& k, const Tensors&) { return batch_norm<nn::BatchNorm2d>(k); }},
      {"BatchNorm3d", [](const json& k, const Tensors&) { return batch_norm<nn::BatchNorm3d>(k); }},
      {"GroupNorm",
       [](const json& k, const Tensors&) {
         return one<nn::GroupNorm>(integer(k, "num_groups", 1), integer(k, "num_channels", 1), num(k, "eps", 1e-5),
                                   flag(k, "affine", true));
       }},
      {"Flatten",
       [](const json& k, const Tensors&) {
         return one<nn::Flatten>(integer(k, "start_dim", 1), integer(k, "end_dim", -1));
       }},
      {"LocalResponseNorm",
       [](const json& k, const Tensors&) {
         return one<nn::LocalResponseNorm>(integer(k, "size", 1), num(k, "alpha", 1e-4), num(k, "beta", 0.75),
                                           num(k, "k", 1.0));
       }},
      // unpooling, cross-map response norm, bags, Conv3d
      {"MaxUnpool1d", [](const json& k, const Tensors&) { return unpool<nn::MaxUnpool1d>(unpool_options<1>(k)); }},
      {"MaxUnpool2d", [](const json& k, const Tensors&) { return unpool<nn::MaxUnpool2d>(unpool_options<2>(k)); }},
      {"MaxUnpool3d", [](const json& k, const Tensors&) { return unpool<nn::MaxUnpool3d>(unpool_options<3>(k)); }},
      {"CrossMapLRN2d",
       [](const json& k, const Tensors&) {
         return one<nn::CrossMapLRN2d>(integer(k, "size", 1), num(k, "alpha", 1e-4), num(k, "beta", 0.75),
                                       num(k, "k", 1.0));
       }},
      {"EmbeddingBag",
       [](const json& k, const Tensors&) {
         Generator g(0);
         auto m = made<nn::EmbeddingBag>(
             integer(k, "num_embeddings", 1), integer(k, "embedding_dim", 1), g, k.value("mode", std::string("mean")),
             flag(k, "include_last_offset", false),
             maybe_integer(k, "padding_idx"));
         return ModuleCall{m, [m](const std::vector<Tensor>& a) { return m->forward(a.at(0), opt(a, 1), opt(a, 2)); }};
       }},
      {"Conv3d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::Conv3d>(conv_options<3>(k), std::ref(g));
       }},
      {"Conv2d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::Conv2d>(conv_options<2>(k), std::ref(g));
       }},
      {"Conv1d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::Conv1d>(conv_options<1>(k), std::ref(g));
       }},
      {"ConvTranspose2d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::ConvTranspose2d>(conv_transpose_options<2>(k), std::ref(g));
       }},
      {"ConvTranspose3d",
       [](const json& k, const Tensors&) {
         Generator g(0);
         return one<nn::ConvTranspose3d>(conv_transpose_options<3>(k), std::ref(g));
       }},
      {"MaxPool2d", [](const json& k, const Tensors&) { return one<nn::MaxPool2d>(max_pool_options<2>(k)); }},
      {"AvgPool2d", [](const json& k, const Tensors&) { return one<nn::AvgPool2d>(avg_pool_options<2>(k)); }},
      {"AdaptiveAvgPool2d",
       [](const json& k, const Tensors&) { return one<nn::AdaptiveAvgPool2d>(size<2>(k, "output_size", 1)); }},
      // distances
      {"PairwiseDistance",
       [](const json& k, const Tensors&) {
         return binary(made<nn::PairwiseDistance>(
             PairwiseDistanceOptions().p(num(k, "p", 2)).eps(num(k, "eps", 1e-6)).keepdim(flag(k, "keepdim", false))));
       }},
      {"CosineSimilarity",
       [](const json& k, const Tensors&) {
         return binary(made<nn::CosineSimilarity>(
             CosineSimilarityOptions().dim(integer(k, "dim", 1)).eps(num(k, "eps", 1e-8))));
       }},
  };
  return t;
}

}  // namespace

ModuleCall make_module(const std::string& cls, const json& kwargs, const Tensors& tensors) {
  const auto it = table().find(cls);
  if (it == table().end()) throw std::invalid_argument("optable: no module '" + cls + "' in the module table");
  return it->second(kwargs, tensors);
}

std::vector<std::string> module_names() {
  std::vector<std::string> v;
  for (const auto& [k, f] : table()) v.push_back(k);
  return v;
}

}  // namespace xg::optable
