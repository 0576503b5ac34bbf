// export_transformer: the encoder and the decoder step, each traced from the
// model's own decoding functions (one code path for xgrad's decoder and the
// exported one), with the per-layer caches as named inputs and outputs.
#include "onnx/transformer.h"

#include "models/transformer.h"
#include "onnx/detail/decoding.h"

namespace xg::onnx {

using namespace detail;

namespace {

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

std::vector<GraphSignature> export_transformer(models::Transformer& model, const std::string& dir) {
  Generator g(41);
  return {export_transformer_encoder(model, dir, g), export_transformer_step(model, dir, g)};
}

}  // namespace xg::onnx
