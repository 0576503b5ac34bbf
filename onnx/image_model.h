// The image classifiers of models/ (models/image_model.h: the CNN, the
// ResNet plain and pre-activation, the ViT) as one ONNX graph each: images (N, C, H, W)
// float32 in, logits (N, classes) out, the batch N left to the runtime.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "autograd/serialize.h"
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
GraphSignature export_image_model(nn::Module& model, int64_t channels, int64_t height, int64_t width, const std::string& outdir);

// The classifier a vision checkpoint describes, exported as export_image_model
// does: `metadata` names it ("model": resnet, vit or cnn) with its cfg.*
// keys, `weights` is its state dict (models::load_image_model). The CNN and
// the ViT fix their image size; a ResNet takes any, exported at `side` x
// `side` (the Fashion-MNIST of apps/vision: 28). Throws FormatError naming
// `path` for a model, key or weight it cannot read, as export_model does
// otherwise.
GraphSignature export_image_checkpoint(const Metadata& metadata, const std::map<std::string, Tensor>& weights,
                                        const std::string& path, const std::string& outdir, int64_t side = 28);

}  // namespace xg::onnx
