// The shipped models' graphs: each traced from the model's own decoding
// functions (one code path for xgrad's decoder and the exported one), with
// the per-layer caches as named inputs and outputs.
#include "onnx/models.h"

#include <fstream>

#include "autograd/ops.h"
#include "models/gpt.h"
#include "models/transformer.h"
#include "onnx/detail/graph.h"
#include "onnx/export.h"

namespace xg::onnx {

namespace {

// Example sizes of the dynamic axes: distinct and above 1, as export_model
// asks (a reshape tells axes apart by their sizes).
constexpr int64_t kB = 3, kS = 5, kL = 4;

Tensor example_ids(int64_t rows, int64_t cols, int64_t vocab, Generator& g) {
  std::vector<int64_t> v(static_cast<size_t>(rows * cols));
  for (auto& id : v) id = std::min(vocab - 1, static_cast<int64_t>(g.uniform() * static_cast<double>(vocab)));
  return from_ints(v, {rows, cols});
}

std::string indexed(const std::string& name, size_t i) { return name + "_" + std::to_string(i); }

// Per layer: past_k_i, past_v_i (B,L,C) as inputs, present_k_i, present_v_i as outputs.
void add_cache_io(size_t layers, int64_t width, Generator& g, std::vector<Input>& in, std::vector<std::string>& out) {
  for (size_t i = 0; i < layers; ++i)
    for (const char* kv : {"k", "v"}) {
      in.push_back({indexed(std::string("past_") + kv, i), randn({kB, kL, width}, g), {"B", "L", ""}});
      out.push_back(indexed(std::string("present_") + kv, i));
    }
}

// The caches of the inputs from `first` on: (k, v) pairs, each a whole cache.
std::vector<nn::MultiHeadAttention::KVCache> caches(const std::vector<Tensor>& in, size_t first, size_t layers) {
  std::vector<nn::MultiHeadAttention::KVCache> c;
  for (size_t i = 0; i < layers; ++i) {
    const Tensor &k = in[first + 2 * i], &v = in[first + 2 * i + 1];
    c.push_back({k, v, k.size(1), 0});
  }
  return c;
}

void append_caches(std::vector<Tensor>& out, const std::vector<nn::MultiHeadAttention::KVCache>& c) {
  for (const auto& kv : c) {
    out.push_back(kv.k);
    out.push_back(kv.v);
  }
}

std::string dtype_of(int32_t t) {
  if (t == detail::pb::TensorProto_DataType_FLOAT) return "float32";
  if (t == detail::pb::TensorProto_DataType_DOUBLE) return "float64";
  if (t == detail::pb::TensorProto_DataType_INT64) return "int64";
  return "type " + std::to_string(t);
}

std::vector<ValueSignature> values_of(const google::protobuf::RepeatedPtrField<detail::pb::ValueInfoProto>& list) {
  std::vector<ValueSignature> out;
  for (const auto& v : list) {
    ValueSignature s{v.name(), dtype_of(v.type().tensor_type().elem_type()), {}};
    for (const auto& d : v.type().tensor_type().shape().dim())
      s.axes.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
    out.push_back(s);
  }
  return out;
}

GraphSignature export_transformer_encoder(models::Transformer& model, const std::string& dir, Generator& g) {
  const size_t layers = static_cast<size_t>(model.config().layers);
  Tensor src = example_ids(kB, kS, model.config().src_vocab, g);
  for (int64_t r = 1; r < kB; ++r) src.set({r, kS - r}, static_cast<double>(model.config().pad_id));  // padded ends
  std::vector<std::string> names{"memory", "src_pad"};
  for (size_t i = 0; i < layers; ++i) names.insert(names.end(), {indexed("memory_k", i), indexed("memory_v", i)});
  const Forward encode = [&model](const std::vector<Tensor>& in) {
    Tensor memory;
    models::DecodeState st = model.start_decode(in[0], &memory);
    std::vector<Tensor> out{memory, st.src_pad};
    append_caches(out, st.cross_kv);
    return out;
  };
  export_model(model, encode, {{"src", src, {"B", "S"}}}, dir + "/encoder.onnx", {names, "transformer_encoder"});
  return read_signature(dir + "/encoder.onnx");
}

GraphSignature export_transformer_step(models::Transformer& model, const std::string& dir, Generator& g) {
  const models::TransformerConfig& cfg = model.config();
  const size_t layers = static_cast<size_t>(cfg.layers);
  std::vector<Input> in{{"tokens", example_ids(kB, 1, cfg.tgt_vocab, g), {"B", ""}},
                        {"position", from_ints({kL}, {1}), {}},
                        {"src_pad", zeros({kB, kS}), {"B", "S"}}};
  in[2].example.set({kB - 1, kS - 1}, 1.0);
  for (size_t i = 0; i < layers; ++i)
    for (const char* kv : {"k", "v"})
      in.push_back({indexed(std::string("memory_") + kv, i), randn({kB, kS, cfg.d_model}, g), {"B", "S", ""}});
  std::vector<std::string> names{"logits"};
  add_cache_io(layers, cfg.d_model, g, in, names);
  const Forward step = [&model, layers](const std::vector<Tensor>& x) {
    models::DecodeState st;
    st.src_pad = x[2];
    st.cross_kv = caches(x, 3, layers);
    st.self_kv = caches(x, 3 + 2 * layers, layers);
    std::vector<Tensor> out{model.step(st, x[0], x[1])};
    append_caches(out, st.self_kv);
    return out;
  };
  export_model(model, step, in, dir + "/decoder_step.onnx", {names, "transformer_decoder_step"});
  return read_signature(dir + "/decoder_step.onnx");
}

}  // namespace

GraphSignature read_signature(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  detail::pb::ModelProto m;
  if (!f || !m.ParseFromIstream(&f))
    throw ExportError("read_signature: " + path + " cannot be read as an ONNX model");
  const size_t slash = path.find_last_of('/');
  return {slash == std::string::npos ? path : path.substr(slash + 1), values_of(m.graph().input()),
          values_of(m.graph().output())};
}

std::vector<GraphSignature> export_transformer(models::Transformer& model, const std::string& dir) {
  Generator g(41);
  return {export_transformer_encoder(model, dir, g), export_transformer_step(model, dir, g)};
}

std::vector<GraphSignature> export_gpt(models::GPT& model, const std::string& dir) {
  const models::GPTConfig& cfg = model.config();
  const size_t layers = static_cast<size_t>(cfg.layers);
  Generator g(42);
  std::vector<Input> in{{"tokens", example_ids(kB, 1, cfg.vocab, g), {"B", ""}}, {"position", from_ints({kL}, {1}), {}}};
  std::vector<std::string> names{"logits"};
  add_cache_io(layers, cfg.d_model, g, in, names);
  const Forward step = [&model, layers](const std::vector<Tensor>& x) {
    models::GPT::Cache cache;
    cache.kv = caches(x, 2, layers);
    std::vector<Tensor> out{model.step(cache, x[0], x[1])};
    append_caches(out, cache.kv);
    return out;
  };
  export_model(model, step, in, dir + "/step.onnx", {names, "gpt_step"});
  names.erase(names.begin() + 1, names.end());  // logits, then the caches the prompt fills
  for (size_t i = 0; i < layers; ++i) names.insert(names.end(), {indexed("present_k", i), indexed("present_v", i)});
  const Forward prefill = [&model, layers](const std::vector<Tensor>& x) {
    models::GPT::Cache cache;
    cache.kv.resize(layers);
    std::vector<Tensor> out{model.prefill(cache, x[0])};
    append_caches(out, cache.kv);
    return out;
  };
  export_model(model, prefill, {{"tokens", example_ids(kB, kS, cfg.vocab, g), {"B", "T"}}}, dir + "/prefill.onnx",
               {names, "gpt_prefill"});
  return {read_signature(dir + "/prefill.onnx"), read_signature(dir + "/step.onnx")};
}

}  // namespace xg::onnx
