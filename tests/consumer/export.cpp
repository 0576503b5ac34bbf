// A user's program exporting a model through an installed xgrad: a small
// network written as ONNX with xgrad::onnx. Prints the file's size.
//   consumer_export OUT.onnx
#include <cstdio>
#include <fstream>
#include <memory>

#include "autograd/xg.h"
#include "nn/nn.h"
#include "onnx/export.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  xg::Generator gen(7);
  xg::nn::Sequential model(std::make_shared<xg::nn::Linear>(4, 8, gen), std::make_shared<xg::nn::ReLU>(),
                           std::make_shared<xg::nn::Linear>(8, 2, gen));
  xg::onnx::export_model(model, {"x", xg::randn({3, 4}, gen), {"B", ""}}, argv[1]);
  std::ifstream f(argv[1], std::ios::binary | std::ios::ate);
  std::printf("consumer_export: %lld bytes of ONNX\n", static_cast<long long>(f.tellg()));
  return f.tellg() > 0 ? 0 : 1;
}
