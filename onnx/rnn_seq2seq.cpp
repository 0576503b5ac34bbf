// export_rnn_seq2seq: RNNSeq2Seq::start and RNNSeq2Seq::step, each traced
// once on example inputs, as the encoder and decoder-step graphs.
#include "onnx/rnn_seq2seq.h"

#include "autograd/ops.h"
#include "models/rnn_seq2seq.h"
#include "onnx/export.h"

namespace xg::onnx {

namespace {

// Two example rows of three source ids that are not padding, the second
// padded at its end (B = 2 and S = 3: dynamic axes need sizes apart, above 1).
Tensor example_source(const models::RNNSeq2SeqConfig& cfg) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 6; ++i) {
    int64_t id = (3 * i + 1) % cfg.src_vocab;
    if (id == cfg.pad_id) id = (id + 1) % cfg.src_vocab;
    ids.push_back(id);
  }
  if (cfg.src_vocab > 1) ids[5] = cfg.pad_id;
  return from_ints(ids, {2, 3});
}

ValueSignature info(const std::string& name, const std::string& dtype, const std::vector<std::string>& axes) {
  return ValueSignature{name, dtype, axes};
}

GraphSignature export_encoder(models::RNNSeq2Seq& m, const Tensor& src, const std::string& outdir) {
  const std::string C = std::to_string(2 * m.config().hidden);
  auto forward = [&m](const std::vector<Tensor>& in) {
    const models::RNNSeq2Seq::State s = m.start(in[0]);
    return std::vector<Tensor>{s.memory, s.pad, s.h};
  };
  export_model(m, forward, {{"src", src, {"B", "S"}}}, outdir + "/encoder.onnx", {{"memory", "pad", "h"}, "encoder"});
  return GraphSignature{"encoder.onnx",
                   {info("src", "int64", {"B", "S"})},
                   {info("memory", "float32", {"B", "S", C}), info("pad", "float32", {"B", "S"}),
                    info("h", "float32", {"B", C})}};
}

GraphSignature export_step(models::RNNSeq2Seq& m, const Tensor& src, const std::string& outdir) {
  const models::RNNSeq2SeqConfig& cfg = m.config();
  const std::string C = std::to_string(2 * cfg.hidden);
  const bool lstm = cfg.cell == "lstm", luong = cfg.attention != "bahdanau";
  models::RNNSeq2Seq::State s0;
  {
    NoGradGuard no_grad;
    nn::EvalGuard eval(m);
    s0 = m.start(src);
  }
  std::vector<Input> inputs{{"tokens", from_ints({1, 2}, {2}), {"B"}}, {"h", s0.h, {"B", ""}}};
  if (lstm) inputs.push_back({"c", s0.c, {"B", ""}});
  if (luong) inputs.push_back({"feed", s0.feed, {"B", ""}});
  inputs.push_back({"memory", s0.memory, {"B", "S", ""}});
  inputs.push_back({"pad", s0.pad, {"B", "S"}});
  auto forward = [&m, lstm, luong](const std::vector<Tensor>& in) {
    models::RNNSeq2Seq::State s;
    size_t k = 1;
    s.h = in[k++];
    if (lstm) s.c = in[k++];
    if (luong) s.feed = in[k++];
    s.memory = in[k++];
    s.pad = in[k++];
    std::vector<Tensor> out{m.step(s, in[0]), s.h};
    if (lstm) out.push_back(s.c);
    if (luong) out.push_back(s.feed);
    return out;
  };
  GraphSignature g{"decoder_step.onnx", {}, {info("logits", "float32", {"B", std::to_string(cfg.tgt_vocab)})}};
  ExportOptions options{{"logits", "h_next"}, "decoder_step"};
  for (const Input& in : inputs) {
    std::vector<std::string> axes = in.dynamic_axes;
    for (size_t a = 0; a < axes.size(); ++a)
      if (axes[a].empty()) axes[a] = C;
    g.inputs.push_back(info(in.name, in.name == "tokens" ? "int64" : "float32", axes));
    if (in.name == "h" || in.name == "c" || in.name == "feed") {
      if (in.name != "h") options.output_names.push_back(in.name + "_next");
      g.outputs.push_back(info(in.name + "_next", "float32", {"B", C}));
    }
  }
  export_model(m, forward, inputs, outdir + "/" + g.file, options);
  return g;
}

}  // namespace

std::vector<GraphSignature> export_rnn_seq2seq(models::RNNSeq2Seq& model, const std::string& outdir) {
  const Tensor src = example_source(model.config());
  return {export_encoder(model, src, outdir), export_step(model, src, outdir)};
}

}  // namespace xg::onnx
