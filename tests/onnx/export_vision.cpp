// Exports the image models into OUTDIR: the shipped CNN and ResNets (plain
// and pre-activation) through onnx::export_image_model, and the test models of
// tests/onnx/vision_models.h through export_model; writes OUTDIR/cases.json
// with, for each model, inputs at several batch sizes (and lengths) and
// xgrad's outputs on them (eval mode), and the ONNX operators its graph must
// hold, for tests/onnx/check_models.py (ONNX's checker) and run_ort.js (ONNX
// Runtime) to compare against.
//   onnx_export_vision OUTDIR
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/cnn.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "onnx/export.h"
#include "onnx/image_model.h"
#include "tests/onnx/vision_models.h"

using namespace xg;
using nlohmann::json;

namespace {

json tensor_json(const Tensor& t) {
  return json{{"shape", t.shape()},
              {"dtype", "float32"},
              {"data", std::vector<float>(t.data<float>(), t.data<float>() + t.numel())}};
}

// The model's output on each input, under the graph's names.
json cases_of(nn::Module& m, const std::string& in, const std::string& out, const std::vector<Tensor>& xs) {
  nn::EvalGuard eval(m);
  NoGradGuard no_grad;
  json cases = json::array();
  for (const Tensor& x : xs)
    cases.push_back(json{{"inputs", {{in, tensor_json(x)}}}, {"outputs", {{out, tensor_json(m.forward(x))}}}});
  return cases;
}

// A shipped classifier through export_image_model, into its own folder (the
// function names its file model.onnx), on images (N, C, side, side).
json shipped(nn::Module& m, const std::string& dir, const std::string& name, int64_t channels, int64_t side,
             const std::vector<std::string>& ops, Generator& g) {
  const std::string sub = dir + "/" + name;
  if (std::system(("mkdir -p '" + sub + "'").c_str()) != 0) throw std::runtime_error("cannot create " + sub);
  const onnx::GraphSignature info = onnx::export_image_model(m, channels, side, side, sub);
  std::vector<Tensor> xs;
  for (int64_t n : {1, 2, 5}) xs.push_back(randn({n, channels, side, side}, g));
  return json{{"file", name + "/" + info.file},
              {"expect_ops", ops},
              {"cases", cases_of(m, info.inputs[0].name, info.outputs[0].name, xs)}};
}

json test_model(nn::Module& m, const std::string& dir, const std::string& file, const onnx::Input& in,
                const std::vector<Tensor>& others, const std::vector<std::string>& ops) {
  onnx::export_model(m, in, dir + "/" + file);
  std::vector<Tensor> xs{in.example};
  xs.insert(xs.end(), others.begin(), others.end());
  return json{{"file", file}, {"expect_ops", ops}, {"cases", cases_of(m, in.name, "output", xs)}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_export_vision OUTDIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  Generator g(5);
  json models = json::array();
  onnx_test::VisionZoo zoo(g);
  onnx_test::randomise_vision(zoo, 21);
  models.push_back(test_model(zoo, dir, "vision_zoo.onnx", {"x", randn({2, 3, 13, 11}, g), {"N", "", "", ""}},
                              {randn({1, 3, 13, 11}, g), randn({6, 3, 13, 11}, g)},
                              {"Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization", "MaxPool",
                               "AveragePool", "GlobalAveragePool", "Gemm"}));
  onnx_test::Conv1dNet conv1d(g);
  onnx_test::randomise_vision(conv1d, 22);
  models.push_back(test_model(conv1d, dir, "conv1d.onnx", {"x", randn({3, 4, 9}, g), {"N", "", "L"}},
                              {randn({1, 4, 2}, g), randn({2, 4, 16}, g), randn({5, 4, 1}, g)},
                              {"Conv", "BatchNormalization", "ReduceMean"}));
  models::CNNConfig cc;
  cc.channels1 = 6, cc.channels2 = 8, cc.hidden = 16;
  models::CNN cnn(cc);
  onnx_test::randomise_vision(cnn, 23);
  models.push_back(shipped(cnn, dir, "cnn", 1, 28, {"Conv", "BatchNormalization", "MaxPool", "Gemm"}, g));
  for (bool preact : {false, true}) {
    models::ResNetConfig rc;
    rc.depth = 8, rc.width = 4, rc.in_channels = 3, rc.preact = preact;
    models::ResNet resnet(rc);
    onnx_test::randomise_vision(resnet, preact ? 25 : 24);
    models.push_back(shipped(resnet, dir, preact ? "resnet_preact" : "resnet", 3, 12,
                             {"Conv", "BatchNormalization", "Relu", "Add", "GlobalAveragePool", "Gemm"}, g));
  }
  models::ViTConfig vc;
  vc.image = 12, vc.patch = 4, vc.in_channels = 2, vc.d_model = 16, vc.heads = 2, vc.d_ff = 32, vc.layers = 2;
  models::ViT vit(vc);
  onnx_test::randomise_vision(vit, 26);
  models.push_back(shipped(vit, dir, "vit", 2, 12, {"Conv", "Expand", "Concat", "Softmax", "LayerNormalization", "Erf"}, g));
    std::ofstream(dir + "/cases.json") << json{{"models", models}}.dump() << "\n";
  std::printf("onnx_export_vision: %zu models in %s\n", models.size(), dir.c_str());
  return 0;
}
