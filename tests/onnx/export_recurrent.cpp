// Exports recurrent layers and cells into OUTDIR as ONNX's own RNN, LSTM and
// GRU operators, and writes OUTDIR/cases.json: for each graph its inputs at
// several batch sizes and lengths with xgrad's outputs on them, and the
// operators it must hold, for tests/onnx/check_models.py (ONNX's checker)
// and run_ort.js (ONNX Runtime) to compare against.
//   onnx_export_recurrent OUTDIR
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/nn.h"
#include "onnx/export.h"

using namespace xg;
using nlohmann::json;

namespace {

json tensor_json(const Tensor& t) {
  return json{{"shape", t.shape()},
              {"dtype", "float32"},
              {"data", std::vector<float>(t.data<float>(), t.data<float>() + t.numel())}};
}

// A graph: its inputs (name, example, dynamic axes), its forward, and the
// operators it must hold; the cases run the forward on other inputs.
struct Graph {
  std::string file;
  std::vector<onnx::Input> inputs;
  std::vector<std::string> outputs;
  onnx::Forward forward;
  std::vector<std::string> expect_ops;
};

json export_graph(nn::Module& m, const std::string& dir, const Graph& g, const std::vector<std::vector<Tensor>>& others) {
  onnx::export_model(m, g.forward, g.inputs, dir + "/" + g.file, {g.outputs, "recurrent"});
  std::vector<std::vector<Tensor>> all{{}};
  for (const onnx::Input& in : g.inputs) all[0].push_back(in.example);
  all.insert(all.end(), others.begin(), others.end());
  json cases = json::array();
  nn::EvalGuard eval(m);
  NoGradGuard no_grad;
  for (const auto& xs : all) {
    json in, out;
    for (size_t i = 0; i < xs.size(); ++i) in[g.inputs[i].name] = tensor_json(xs[i]);
    const std::vector<Tensor> ys = g.forward(xs);
    for (size_t i = 0; i < ys.size(); ++i) out[g.outputs[i]] = tensor_json(ys[i]);
    cases.push_back(json{{"inputs", in}, {"outputs", out}});
  }
  return json{{"file", g.file}, {"expect_ops", g.expect_ops}, {"cases", cases}};
}

// (B,T,C) inputs, as the exported graphs take them.
nn::RNNOptions options(int64_t in, int64_t hidden, int64_t layers, bool bidirectional) {
  return nn::RNNOptions(in, hidden).num_layers(layers).batch_first(true).bidirectional(bidirectional);
}

// Two layers, both directions, initial states given: (x, h0, c0) -> (output, h_n, c_n).
json lstm_graph(const std::string& dir, Generator& g) {
  nn::LSTM lstm(options(5, 6, 2, true), g);
  Graph gr{"lstm.onnx",
           {{"x", randn({3, 4, 5}, g), {"B", "T", ""}},
            {"h0", randn({4, 3, 6}, g), {"", "B", ""}},
            {"c0", randn({4, 3, 6}, g), {"", "B", ""}}},
           {"output", "h_n", "c_n"},
           [&](const std::vector<Tensor>& in) {
             const nn::RNNOutput r = lstm.forward(in[0], in[1], {}, in[2]);
             return std::vector<Tensor>{r.output, r.h_n, r.c_n};
           },
           {"LSTM", "Slice", "Concat"}};
  return export_graph(lstm, dir, gr,
                      {{randn({1, 1, 5}, g), randn({4, 1, 6}, g), randn({4, 1, 6}, g)},
                       {randn({2, 9, 5}, g), randn({4, 2, 6}, g), randn({4, 2, 6}, g)},
                       {randn({6, 2, 5}, g), randn({4, 6, 6}, g), randn({4, 6, 6}, g)}});
}

// One layer, both directions, zero initial state: x -> (output, h_n).
json gru_graph(const std::string& dir, Generator& g) {
  nn::GRU gru(options(4, 5, 1, true), g);
  Graph gr{"gru.onnx",
           {{"x", randn({2, 7, 4}, g), {"B", "T", ""}}},
           {"output", "h_n"},
           [&](const std::vector<Tensor>& in) {
             const nn::RNNOutput r = gru.forward(in[0], Tensor());
             return std::vector<Tensor>{r.output, r.h_n};
           },
           {"GRU"}};
  return export_graph(gru, dir, gr, {{randn({1, 3, 4}, g)}, {randn({5, 1, 4}, g)}, {randn({3, 12, 4}, g)}});
}

// Two ReLU layers, one direction, h0 given: (x, h0) -> (output, h_n).
json rnn_graph(const std::string& dir, Generator& g) {
  nn::RNN rnn(options(3, 4, 2, false).nonlinearity("relu"), g);
  Graph gr{"rnn_relu.onnx",
           {{"x", randn({2, 5, 3}, g), {"B", "T", ""}}, {"h0", randn({2, 2, 4}, g), {"", "B", ""}}},
           {"output", "h_n"},
           [&](const std::vector<Tensor>& in) {
             const nn::RNNOutput r = rnn.forward(in[0], in[1]);
             return std::vector<Tensor>{r.output, r.h_n};
           },
           {"RNN"}};
  return export_graph(rnn, dir, gr,
                      {{randn({1, 1, 3}, g), randn({2, 1, 4}, g)}, {randn({4, 8, 3}, g), randn({2, 4, 4}, g)}});
}

// The cells, one step each: LSTMCell (x, h, c) -> (h', c'), GRUCell (x, h) -> h'.
json cell_graphs(const std::string& dir, Generator& g, json& models) {
  nn::LSTMCell lstm(4, 3, g);
  Graph a{"lstm_cell.onnx",
          {{"x", randn({2, 4}, g), {"B", ""}}, {"h", randn({2, 3}, g), {"B", ""}}, {"c", randn({2, 3}, g), {"B", ""}}},
          {"h_next", "c_next"},
          [&](const std::vector<Tensor>& in) {
            const auto [h, c] = lstm.forward(in[0], in[1], in[2]);
            return std::vector<Tensor>{h, c};
          },
          {"LSTM"}};
  models.push_back(export_graph(lstm, dir, a, {{randn({1, 4}, g), randn({1, 3}, g), randn({1, 3}, g)},
                                               {randn({7, 4}, g), randn({7, 3}, g), randn({7, 3}, g)}}));
  nn::GRUCell gru(3, 5, g, /*bias=*/false);
  Graph b{"gru_cell.onnx",
          {{"x", randn({3, 3}, g), {"B", ""}}, {"h", randn({3, 5}, g), {"B", ""}}},
          {"h_next"},
          [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gru.forward(in[0], in[1])}; },
          {"GRU"}};
  return export_graph(gru, dir, b, {{randn({1, 3}, g), randn({1, 5}, g)}, {randn({4, 3}, g), randn({4, 5}, g)}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_export_recurrent OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  Generator g(7);
  json models = json::array();
  models.push_back(lstm_graph(dir, g));
  models.push_back(gru_graph(dir, g));
  models.push_back(rnn_graph(dir, g));
  models.push_back(cell_graphs(dir, g, models));
  std::ofstream(dir + "/cases.json") << json{{"models", models}}.dump() << "\n";
  std::printf("onnx_export_recurrent: %zu graphs in %s\n", models.size(), dir.c_str());
  return 0;
}
