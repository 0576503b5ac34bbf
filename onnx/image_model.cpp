// export_image_model: an image classifier's forward as one graph, the batch dynamic.
#include "onnx/image_model.h"

#include <memory>

#include "autograd/ops.h"
#include "models/image_model.h"
#include "nn/module.h"
#include "onnx/export.h"

namespace xg::onnx {

GraphSignature export_image_model(nn::Module& model, int64_t channels, int64_t height, int64_t width, const std::string& outdir) {
  if (channels < 1 || height < 1 || width < 1)
    throw std::invalid_argument("export_image_model: images (N, " + std::to_string(channels) + ", " +
                                std::to_string(height) + ", " + std::to_string(width) +
                                "): expected channels, height and width each at least 1");
  Generator gen(1);
  // Two images: a dynamic axis needs an example size above 1.
  const Tensor images = randn({2, channels, height, width}, gen);
  GraphSignature info{"model.onnx", {}, {}};
  ExportOptions options{{"logits"}, "image_classifier"};
  export_model(model, {"images", images, {"N", "", "", ""}}, outdir + "/" + info.file, options);
  Tensor logits;
  {
    nn::EvalGuard eval(model);
    NoGradGuard no_grad;
    logits = model.forward(images);
  }
  auto n = [](int64_t v) { return std::to_string(v); };
  info.inputs.push_back({"images", "float32", {"N", n(channels), n(height), n(width)}});
  info.outputs.push_back({"logits", "float32", {"N", n(logits.size(1))}});
  return info;
}

GraphSignature export_image_checkpoint(const Metadata& metadata, const std::map<std::string, Tensor>& weights,
                                        const std::string& path, const std::string& outdir, int64_t side) {
  const models::ImageModel m = models::load_image_model(metadata, weights, path);
  const int64_t image = m.config.image_side() > 0 ? m.config.image_side() : side;
  return export_image_model(*m.module, m.config.in_channels(), image, image, outdir);
}

}  // namespace xg::onnx
