// Exports the recurrent encoder-decoder (models::RNNSeq2Seq) through
// onnx::export_rnn_seq2seq, for three configurations (a two-layer LSTM with
// Bahdanau's attention, a GRU with Luong's general attention, an LSTM with
// Luong's concat attention), each into its
// own folder, and writes OUTDIR/cases.json (each graph on inputs of other
// batch sizes and lengths with xgrad's outputs, for check_models.py and
// run_ort.js) and OUTDIR/decode.json (1,000 sources with xgrad's greedy
// decodes, for decode_ort.js to decode again through ONNX Runtime alone).
//   onnx_export_seq2seq OUTDIR
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "models/rnn_seq2seq.h"
#include "onnx/rnn_seq2seq.h"

using namespace xg;
using nlohmann::json;

namespace {

constexpr int64_t kVocab = 12, kPad = 0, kBos = 1, kEos = 2, kMaxLen = 12;

json tensor_json(const Tensor& t) {
  json j{{"shape", t.shape()}};
  if (t.dtype() == i64) {
    j["dtype"] = "int64";
    j["data"] = std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  } else {
    j["dtype"] = "float32";
    j["data"] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  }
  return j;
}

// Sources of 1..max_len ids in 3..V-1, padded at the end to the batch's longest.
models::Batch sources(int64_t rows, int64_t max_len, Generator& g) {
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(rows));
  int64_t cols = 1;
  for (auto& s : seqs) {
    const int64_t n = 1 + static_cast<int64_t>(g.uniform() * static_cast<double>(max_len)) % max_len;
    for (int64_t i = 0; i < n; ++i) s.push_back(3 + static_cast<int64_t>(g.uniform() * (kVocab - 3)) % (kVocab - 3));
    cols = std::max(cols, n);
  }
  models::Batch b{{}, rows, cols};
  for (const auto& s : seqs)
    for (int64_t i = 0; i < cols; ++i) b.ids.push_back(i < static_cast<int64_t>(s.size()) ? s[i] : kPad);
  return b;
}

// The encoder on a batch, then two decoder steps from its state: the
// graphs' inputs with xgrad's outputs.
void add_cases(models::RNNSeq2Seq& m, const models::Batch& src, json& encoder, json& step) {
  NoGradGuard no_grad;
  nn::EvalGuard eval(m);
  const Tensor ids = from_ints(src.ids, {src.rows, src.cols});
  models::RNNSeq2Seq::State s = m.start(ids);
  encoder.push_back(json{{"inputs", {{"src", tensor_json(ids)}}},
                         {"outputs", {{"memory", tensor_json(s.memory)}, {"pad", tensor_json(s.pad)},
                                      {"h", tensor_json(s.h)}}}});
  std::vector<int64_t> tokens(static_cast<size_t>(src.rows), kBos);
  for (int k = 0; k < 2; ++k) {
    json in{{"tokens", tensor_json(from_ints(tokens, {src.rows}))}, {"h", tensor_json(s.h)}};
    if (s.c.defined()) in["c"] = tensor_json(s.c);
    if (s.feed.defined()) in["feed"] = tensor_json(s.feed);
    in["memory"] = tensor_json(s.memory);
    in["pad"] = tensor_json(s.pad);
    const Tensor logits = m.step(s, tokens);
    json out{{"logits", tensor_json(logits)}, {"h_next", tensor_json(s.h)}};
    if (s.c.defined()) out["c_next"] = tensor_json(s.c);
    if (s.feed.defined()) out["feed_next"] = tensor_json(s.feed);
    step.push_back(json{{"inputs", in}, {"outputs", out}});
    tokens = argmax(logits, -1);
  }
}

// How clear each of xgrad's greedy choices was: per source, per step of its
// decode (the emitted ids, then the EOS if it stopped on one), the gap
// between the largest logit and the next, relative to the row's largest
// magnitude. The logits come from the model fed its own decode (teacher
// forcing through the same step), so they are the logits greedy decoding saw
// up to rounding. Where two logits are this close, the argmax is decided by
// rounding, and another runtime's float32 may pick the other id.
json margins(models::RNNSeq2Seq& m, const models::Batch& src, const std::vector<std::vector<int64_t>>& out) {
  NoGradGuard no_grad;
  nn::EvalGuard eval(m);
  int64_t cols = 1;
  for (const auto& o : out) cols = std::max(cols, static_cast<int64_t>(o.size()) + 1);
  models::Batch tgt_in{{}, src.rows, cols};
  for (const auto& o : out)
    for (int64_t t = 0; t < cols; ++t) tgt_in.ids.push_back(t == 0 ? kBos : t <= static_cast<int64_t>(o.size()) ? o[t - 1] : kPad);
  const Tensor logits = m.forward(src, tgt_in);  // (B,T,V) float32, a fresh stack
  const float* l = logits.data<float>();
  json all = json::array();
  for (size_t b = 0; b < out.size(); ++b) {
    const int64_t steps = std::min<int64_t>(static_cast<int64_t>(out[b].size()) + 1, kMaxLen);
    std::vector<double> row;
    for (int64_t t = 0; t < steps; ++t) {
      const float* v = l + (static_cast<int64_t>(b) * cols + t) * kVocab;
      double first = -INFINITY, second = -INFINITY, scale = 0;
      for (int64_t j = 0; j < kVocab; ++j) {
        scale = std::max(scale, std::abs(static_cast<double>(v[j])));
        if (v[j] > first) second = first, first = v[j];
        else if (v[j] > second) second = v[j];
      }
      row.push_back((first - second) / std::max(scale, 1e-30));
    }
    all.push_back(row);
  }
  return all;
}

// 1,000 sources in batches of 50, with xgrad's greedy decodes and how clear
// each choice was.
json decodes(models::RNNSeq2Seq& m, Generator& g, size_t& distinct) {
  json batches = json::array();
  std::set<std::vector<int64_t>> seen;
  for (int b = 0; b < 20; ++b) {
    const models::Batch src = sources(50, 9, g);
    const auto out = models::greedy_decode(m, src, kBos, kEos, kMaxLen);
    for (const auto& o : out) seen.insert(o);
    batches.push_back(json{{"src", tensor_json(from_ints(src.ids, {src.rows, src.cols}))},
                           {"expected", out},
                           {"margins", margins(m, src, out)}});
  }
  distinct = seen.size();
  return batches;
}

// One configuration: its graphs, cases and decodes. Random weights larger
// than the initialisation's, so that the decodes differ from source to source.
void one_model(const models::RNNSeq2SeqConfig& cfg, const std::string& dir, const std::string& name, json& models,
               json& decode_models) {
  models::RNNSeq2Seq m(cfg);
  Generator g(cfg.seed + 100);
  for (auto& [n, p] : m.named_parameters()) p.copy_(randn(p.shape(), g, p.dtype(), 0.0, 0.8));
  const std::string sub = dir + "/" + name;
  if (std::system(("mkdir -p '" + sub + "'").c_str()) != 0) throw std::runtime_error("cannot create " + sub);
  const std::vector<onnx::GraphSignature> graphs = onnx::export_rnn_seq2seq(m, sub);
  json encoder = json::array(), step = json::array();
  for (int64_t rows : {1, 3, 6}) add_cases(m, sources(rows, 7, g), encoder, step);
  const std::vector<std::string> ops{"Gather", "Equal", "Cast", "ReduceSum", cfg.cell == "lstm" ? "LSTM" : "GRU"};
  models.push_back(json{{"file", name + "/" + graphs[0].file}, {"expect_ops", ops}, {"cases", encoder}});
  models.push_back(json{{"file", name + "/" + graphs[1].file},
                        {"expect_ops", {"Gather", "Where", "Softmax", "MatMul", cfg.cell == "lstm" ? "LSTM" : "GRU"}},
                        {"cases", step}});
  json state = json::array();
  for (const auto& in : graphs[1].inputs)
    if (in.name == "c" || in.name == "feed") state.push_back(in.name);
  size_t distinct = 0;
  decode_models.push_back(json{{"encoder", name + "/" + graphs[0].file},
                               {"step", name + "/" + graphs[1].file},
                               {"zero_state", state},
                               {"width", 2 * cfg.hidden},
                               {"batches", decodes(m, g, distinct)}});
  std::printf("onnx_export_seq2seq: %s: 1000 greedy decodes by xgrad, %zu distinct\n", name.c_str(), distinct);
  // Equal decodes prove little if the model says the same thing to every source.
  if (distinct < 20) throw std::runtime_error(name + ": only " + std::to_string(distinct) + " distinct decodes");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_export_seq2seq OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  models::RNNSeq2SeqConfig a;
  a.src_vocab = a.tgt_vocab = kVocab, a.embed = 8, a.hidden = 8, a.layers = 2, a.pad_id = kPad, a.seed = 3;
  models::RNNSeq2SeqConfig b = a;
  b.cell = "gru", b.attention = "general", b.layers = 1, b.seed = 4;
  models::RNNSeq2SeqConfig c = a;
  c.attention = "concat", c.layers = 1, c.seed = 5;
  json models = json::array(), decode_models = json::array();
  one_model(a, dir, "lstm_bahdanau", models, decode_models);
  one_model(b, dir, "gru_general", models, decode_models);
  one_model(c, dir, "lstm_concat", models, decode_models);
  std::ofstream(dir + "/cases.json") << json{{"models", models}}.dump() << "\n";
  std::ofstream(dir + "/decode.json") << json{{"bos", kBos}, {"eos", kEos}, {"max_len", kMaxLen}, {"models", decode_models}}.dump()
                                      << "\n";
  return 0;
}
