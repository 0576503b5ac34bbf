// Exports the test models (tests/onnx/models.h) into OUTDIR, and writes
// OUTDIR/cases.json: for each model, its inputs at the example's sizes and at
// other batch sizes and lengths, with xgrad's outputs on them (eval mode),
// for tests/onnx/check_models.py (ONNX's checker) and run_ort.js (ONNX
// Runtime) to compare against.
//   onnx_export_models OUTDIR
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "onnx/export.h"
#include "tests/onnx/models.h"

using namespace xg;
using nlohmann::json;

namespace {

json tensor_json(const Tensor& t) {
  json j{{"shape", t.shape()}};
  if (t.dtype() == Dtype::i64) {
    j["dtype"] = "int64";
    j["data"] = std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  } else {
    j["dtype"] = "float32";
    j["data"] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  }
  return j;
}

// One case: the input under `name`, and the model's output under "output".
json run_case(nn::Module& m, const std::string& name, const Tensor& x) {
  nn::EvalGuard eval(m);
  NoGradGuard no_grad;
  return json{{"inputs", {{name, tensor_json(x)}}}, {"outputs", {{"output", tensor_json(m.forward(x))}}}};
}

json export_one(nn::Module& m, const std::string& dir, const std::string& file, const onnx::Input& in,
                const std::vector<Tensor>& others) {
  onnx::export_model(m, in, dir + "/" + file);
  json cases = json::array({run_case(m, in.name, in.example)});
  for (const Tensor& x : others) cases.push_back(run_case(m, in.name, x));
  return json{{"file", file}, {"cases", cases}};
}

Tensor ids(int64_t b, int64_t t, Generator& g) {
  std::vector<int64_t> v(static_cast<size_t>(b * t));
  for (auto& id : v) id = static_cast<int64_t>(g.uniform() * onnx_test::Block::V) % onnx_test::Block::V;
  return from_ints(v, {b, t});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_export_models OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  Generator g(3);
  onnx_test::Mlp mlp(g);
  onnx_test::randomise(mlp, 11);
  onnx_test::Block block(g);
  onnx_test::randomise(block, 12);
  onnx_test::OpsZoo zoo(g);
  json models = json::array();
  models.push_back(export_one(mlp, dir, "mlp.onnx", {"x", randn({3, 8}, g), {"B", ""}},
                              {randn({1, 8}, g), randn({5, 8}, g), randn({17, 8}, g)}));
  models.push_back(export_one(block, dir, "block.onnx", {"ids", ids(2, 5, g), {"B", "T"}},
                              {ids(1, 3, g), ids(3, 7, g), ids(4, 1, g), ids(2, 12, g)}));
  models.push_back(export_one(zoo, dir, "ops.onnx", {"x", randn({2, 3, 6}, g), {"B", "T", ""}},
                              {randn({1, 1, 6}, g), randn({4, 5, 6}, g), randn({3, 9, 6}, g)}));
  onnx_test::ActivationZoo activations(g);
  models.push_back(export_one(activations, dir, "activations.onnx", {"x", randn({2, 3, 6}, g), {"B", "T", ""}},
                              {randn({1, 1, 6}, g), randn({4, 5, 6}, g)}));
  std::ofstream(dir + "/cases.json") << json{{"models", models}}.dump() << "\n";
  std::printf("onnx_export_models: %zu models in %s; ops that export: %zu\n", models.size(), dir.c_str(),
              onnx::exported_ops().size());
  return 0;
}
