// examples/port_resnet18.py's torchvision ResNet-18, ported line for line to
// xgrad's nn: the same classes, arguments and state-dict keys ("layer2.0.
// downsample.1.running_var"), so PyTorch's state dict loads as it is. Reads
// the file the script writes (the state dict, a batch of images and
// PyTorch's eval-mode logits, float64) and prints the largest difference of
// xgrad's logits from PyTorch's; exits 1 above 1e-9 relative.
//   port_resnet18 WEIGHTS.safetensors
#include "autograd/xg.h"
#include "examples/port_check.h"
#include "nn/nn.h"

using namespace xg;

// --- the model (the lines the port counts) ---
struct BasicBlock : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride = 1) {
    conv1 = register_module<nn::Conv2d>("conv1",
                                        nn::Conv2dOptions(inplanes, planes, 3).stride(stride).padding(1).bias(false));
    bn1 = register_module<nn::BatchNorm2d>("bn1", planes);
    relu = register_module<nn::ReLU>("relu");
    conv2 = register_module<nn::Conv2d>("conv2", nn::Conv2dOptions(planes, planes, 3).padding(1).bias(false));
    bn2 = register_module<nn::BatchNorm2d>("bn2", planes);
    if (stride != 1 || inplanes != planes)
      downsample = register_module(
          "downsample", nn::Sequential{nn::Conv2d(nn::Conv2dOptions(inplanes, planes, 1).stride(stride).bias(false)),
                                       nn::BatchNorm2d(planes)});
  }
  Tensor forward(const Tensor& x) override {
    const Tensor identity = downsample ? downsample->forward(x) : x;
    const Tensor out = relu->forward(bn1->forward(conv1->forward(x)));
    return relu->forward(bn2->forward(conv2->forward(out)) + identity);
  }
};

struct ResNet18 : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;
  explicit ResNet18(int64_t num_classes = 1000) {
    conv1 = register_module<nn::Conv2d>("conv1", nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false));
    bn1 = register_module<nn::BatchNorm2d>("bn1", 64);
    relu = register_module<nn::ReLU>("relu");
    maxpool = register_module<nn::MaxPool2d>("maxpool", MaxPool2dOptions(3).stride(2).padding(1));
    layer1 = register_module("layer1", nn::Sequential{BasicBlock(64, 64), BasicBlock(64, 64)});
    layer2 = register_module("layer2", nn::Sequential{BasicBlock(64, 128, 2), BasicBlock(128, 128)});
    layer3 = register_module("layer3", nn::Sequential{BasicBlock(128, 256, 2), BasicBlock(256, 256)});
    layer4 = register_module("layer4", nn::Sequential{BasicBlock(256, 512, 2), BasicBlock(512, 512)});
    avgpool = register_module<nn::AdaptiveAvgPool2d>("avgpool", 1);
    fc = register_module<nn::Linear>("fc", 512, num_classes);
  }
  Tensor forward(const Tensor& input) override {
    Tensor x = maxpool->forward(relu->forward(bn1->forward(conv1->forward(input))));
    x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
    return fc->forward(flatten(avgpool->forward(x), 1));
  }
};
// --- end of the model ---

int main(int argc, char** argv) {
  return port::check(argc, argv, "port_resnet18", 1e-9, [](const port::Tensors& state, const port::Tensors& inputs) {
    ResNet18 model(10);
    model.to(f64);
    model.load_state_dict(state);  // strict: PyTorch's keys, every one
    model.eval();
    return port::Tensors{{"logits", model.forward(inputs.at("images"))}};
  });
}
