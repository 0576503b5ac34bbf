// Recurrent layers through the export trace: one recurrent_layer op per
// layer and direction (no per-step internals), their last states read off
// it, the lengths and padding of the encoder-decoder, and what export
// refuses. The exported values are checked by ONNX Runtime
// (onnx_recurrent_runtime_matches_xgrad, onnx_seq2seq_*).
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>

#include "models/rnn_seq2seq.h"
#include "nn/nn.h"
#include "onnx/export.h"
#include "onnx/rnn_seq2seq.h"
#include "tests/helpers.h"

using namespace xg;
using xgt::contains;
namespace xo = xg::onnx;  // ::onnx is ONNX's own

namespace {

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// (B,T,C) inputs, as the exported graphs take them.
nn::RNNOptions rnn_options(int64_t in, int64_t hidden, int64_t layers, bool bidirectional) {
  return nn::RNNOptions(in, hidden).num_layers(layers).batch_first(true).bidirectional(bidirectional);
}

}  // namespace

TEST_CASE("trace: a recurrent layer is one op per direction from its own input and weights") {
  Generator g(1);
  nn::LSTM lstm(rnn_options(3, 4, 1, true), g);
  const Tensor x = randn({2, 5, 3}, g);
  std::vector<TracedOp> ops;
  nn::RNNOutput r;
  {
    TraceGuard on(ops);
    r = lstm.forward(x, Tensor());
  }
  std::vector<const TracedOp*> layers, states;
  for (const TracedOp& t : ops) {
    if (t.op == "recurrent_layer") layers.push_back(&t);
    if (t.op == "recurrent_state") states.push_back(&t);
  }
  REQUIRE(layers.size() == 2);  // forward and reverse
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : lstm.named_parameters()) params[name] = p;
  for (int d = 0; d < 2; ++d) {
    const TracedOp& t = *layers[static_cast<size_t>(d)];
    const std::string suffix = d == 0 ? "_l0" : "_l0_reverse";
    CHECK(static_cast<RecurrentCell>(t.attr<attr::Recurrent>().cell) == RecurrentCell::lstm);
    CHECK(t.attr<attr::Recurrent>().reverse == (d == 1));
    REQUIRE(t.inputs.size() == 7);
    CHECK(t.inputs[0].impl() == x.impl());
    CHECK(t.inputs[1].impl() == params.at("weight_ih" + suffix).impl());
    CHECK(t.inputs[2].impl() == params.at("weight_hh" + suffix).impl());
    CHECK(t.inputs[3].impl() == params.at("bias_ih" + suffix).impl());
    CHECK(t.inputs[4].impl() == params.at("bias_hh" + suffix).impl());
    CHECK_FALSE(t.inputs[5].defined());  // zero initial states: ONNX's default
    CHECK_FALSE(t.inputs[6].defined());
    CHECK(t.extra.empty());  // no lengths
  }
  REQUIRE(states.size() == 4);  // h_n and c_n of each direction, read off the layer's output
  CHECK(states[0]->inputs[0].impl() == layers[0]->output.impl());
  CHECK_FALSE(states[0]->attr<attr::RecurrentState>().cell_state);
  CHECK(states[1]->attr<attr::RecurrentState>().cell_state);
  CHECK(r.output.shape() == Shape{2, 5, 8});
}

TEST_CASE("export_model: a recurrent layer becomes ONNX's own operator, weights under their names") {
  Generator g(2);
  nn::GRU gru(rnn_options(3, 4, 2, false), g);
  const std::string path = std::string(XG_TEST_TMPDIR) + "/gru_layer.onnx";
  xo::export_model(gru, {"x", randn({2, 5, 3}, g), {"B", "T", ""}}, path);
  ::onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  int grus = 0;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "GRU") continue;
    ++grus;
    bool reset_after = false;
    for (const auto& a : n.attribute()) reset_after = reset_after || (a.name() == "linear_before_reset" && a.i() == 1);
    CHECK(reset_after);
    CHECK(n.output_size() == 2);  // Y and Y_h
  }
  CHECK(grus == 2);
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& [name, p] : gru.named_parameters()) CHECK_MESSAGE(inits.count(name), name);
}

TEST_CASE("export_model: lengths that are a constant of the traced batch are refused when the batch may change") {
  Generator g(3);
  nn::LSTM lstm(rnn_options(3, 4, 1, false), g);
  auto with_lengths = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{lstm.forward(in[0], Tensor(), {5, 2}).output};
  };
  const std::string path = std::string(XG_TEST_TMPDIR) + "/lstm_lengths.onnx";
  std::remove(path.c_str());
  const std::string msg =
      error_text([&] { xo::export_model(lstm, with_lengths, {{"x", randn({2, 5, 3}, g), {"B", "T", ""}}}, path); });
  CHECK_MESSAGE(contains(msg, "export_model: recurrent_layer (in LSTM(input_size=3, hidden_size=4, num_layers=1, batch_first)) on "
                              "(B, T, 3): its lengths are a constant of the traced batch of 2 rows, and the batch 'B' "
                              "may change"),
                msg);
  CHECK_THROWS_AS(xo::export_model(lstm, with_lengths, {{"x", randn({2, 5, 3}, g), {"B", "T", ""}}}, path),
                  xo::ExportError);
  std::ifstream none(path);
  CHECK_FALSE(none.good());
  xo::export_model(lstm, with_lengths, {{"x", randn({2, 5, 3}, g), {"", "T", ""}}}, path);  // a fixed batch exports
  std::ifstream written(path);
  CHECK(written.good());
}

TEST_CASE("id_mask: 1 where the ids equal the id, int64 ids only") {
  const Tensor m = id_mask(from_ints({0, 3, 0, 5}, {2, 2}), 0);
  CHECK(m.dtype() == f32);
  CHECK(m.to_vector() == std::vector<double>{1, 0, 1, 0});
  CHECK(error_text([] { id_mask(zeros({2}), 0); }) == "id_mask: expected int64 ids, got float32 (2,)");
  CHECK(error_text([] { id_mask(from_ints({1}, {1}), 0, i64); }) ==
        "id_mask: the mask's dtype must be float32 or float64, not int64");
}

TEST_CASE("export_rnn_seq2seq: padding inside a source row is refused, since the graph counts ids") {
  models::RNNSeq2SeqConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = 8, cfg.embed = cfg.hidden = 4;
  models::RNNSeq2Seq model(cfg);
  std::vector<TracedOp> ops;
  TraceGuard on(ops);
  const std::string msg = error_text([&] { model.encode(from_ints({3, 0, 4, 5, 6, 7}, {2, 3})); });
  CHECK_MESSAGE(contains(msg, "a source row holds the padding id 0 before its end; an exported encoder counts a "
                              "row's ids that are not padding"),
                msg);
}

TEST_CASE("export_rnn_seq2seq: an encoder and a decoder step, and what a manifest says of them") {
  models::RNNSeq2SeqConfig cfg;
  cfg.src_vocab = cfg.tgt_vocab = 9, cfg.embed = 4, cfg.hidden = 3, cfg.attention = "dot";
  models::RNNSeq2Seq model(cfg);
  const std::vector<xo::GraphSignature> g = xo::export_rnn_seq2seq(model, XG_TEST_TMPDIR);
  REQUIRE(g.size() == 2);
  CHECK(g[0].file == "encoder.onnx");
  CHECK(g[0].inputs[0].name == "src");
  CHECK(g[0].inputs[0].dtype == "int64");
  CHECK(g[0].inputs[0].axes == std::vector<std::string>{"B", "S"});
  std::vector<std::string> names;
  for (const auto& o : g[0].outputs) names.push_back(o.name);
  CHECK(names == std::vector<std::string>{"memory", "pad", "h"});
  CHECK(g[0].outputs[0].axes == std::vector<std::string>{"B", "S", "6"});
  CHECK(g[1].file == "decoder_step.onnx");
  names.clear();
  for (const auto& i : g[1].inputs) names.push_back(i.name);
  CHECK(names == std::vector<std::string>{"tokens", "h", "c", "feed", "memory", "pad"});  // LSTM, Luong
  names.clear();
  for (const auto& o : g[1].outputs) names.push_back(o.name);
  CHECK(names == std::vector<std::string>{"logits", "h_next", "c_next", "feed_next"});
  CHECK(g[1].outputs[0].axes == std::vector<std::string>{"B", "9"});
}
