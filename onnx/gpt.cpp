// export_gpt: the prompt's prefill and one generation step, each traced
// from the model's own functions, with the per-block caches as named inputs
// and outputs.
#include "onnx/gpt.h"

#include "models/gpt.h"
#include "onnx/detail/decoding.h"

namespace xg::onnx {

using namespace detail;

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
