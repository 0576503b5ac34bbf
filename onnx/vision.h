// The image classifiers of models/ (CNN, ResNet plain and pre-activation;
// docs/onnx.md says which others) as one ONNX graph each: images (N, C, H, W)
// float32 in, logits (N, classes) out, the batch N left to the runtime.
#pragma once

#include <cstdint>
#include <string>

#include "onnx/graph_info.h"

namespace xg::nn {
class Module;
}

namespace xg::onnx {

// Writes OUTDIR/model.onnx from model.forward on images (N, channels,
// height, width) (an example of two random images is traced; the model's
// weights as they are) and returns what a manifest says of it: input
// "images" (N, C, H, W) float32, output "logits" (N, classes) float32.
// Throws as export_model does (ExportError naming an op with no mapping).
GraphInfo export_vision(nn::Module& model, int64_t channels, int64_t height, int64_t width, const std::string& outdir);

}  // namespace xg::onnx
