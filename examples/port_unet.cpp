// examples/port_unet.py's small U-Net (as the Pytorch-UNet repository writes
// it: DoubleConv, Down, Up with bilinear upsampling and the skip's padding,
// OutConv), ported line for line to xgrad's nn, so PyTorch's state dict
// ("down1.maxpool_conv.1.double_conv.4.running_mean") loads as it is. Reads
// the file the script writes and checks, in float64, the logits, the
// pixels' cross-entropy and its gradient for the first convolution's
// weight against PyTorch's; exits 1 above 1e-9 relative.
//   port_unet WEIGHTS.safetensors
#include "autograd/xg.h"
#include "examples/port_check.h"
#include "nn/nn.h"

using namespace xg;

// --- the model (the lines the port counts) ---
struct DoubleConv : nn::Module {
  std::shared_ptr<nn::Sequential> double_conv;
  DoubleConv(int64_t in_channels, int64_t out_channels, int64_t mid_channels = 0) {
    mid_channels = mid_channels ? mid_channels : out_channels;
    double_conv = register_module(
        "double_conv",
        nn::Sequential{nn::Conv2d(nn::Conv2dOptions(in_channels, mid_channels, 3).padding(1).bias(false)),
                       nn::BatchNorm2d(mid_channels), nn::ReLU(),
                       nn::Conv2d(nn::Conv2dOptions(mid_channels, out_channels, 3).padding(1).bias(false)),
                       nn::BatchNorm2d(out_channels), nn::ReLU()});
  }
  Tensor forward(const Tensor& x) override { return double_conv->forward(x); }
};

struct Down : nn::Module {
  std::shared_ptr<nn::Sequential> maxpool_conv;
  Down(int64_t in_channels, int64_t out_channels) {
    maxpool_conv =
        register_module("maxpool_conv", nn::Sequential{nn::MaxPool2d(2), DoubleConv(in_channels, out_channels)});
  }
  Tensor forward(const Tensor& x) override { return maxpool_conv->forward(x); }
};

struct Up : nn::Module {
  std::shared_ptr<nn::Upsample> up;
  std::shared_ptr<DoubleConv> conv;
  Up(int64_t in_channels, int64_t out_channels) {
    up = register_module<nn::Upsample>("up",
                                       InterpolateOptions().scale_factor({2.0}).mode("bilinear").align_corners(true));
    conv = register_module<DoubleConv>("conv", in_channels, out_channels, in_channels / 2);
  }
  Tensor forward(Tensor x1, const Tensor& x2) {
    x1 = up->forward(x1);
    const int64_t diffY = x2.size(2) - x1.size(2), diffX = x2.size(3) - x1.size(3);
    x1 = pad(x1, {diffX / 2, diffX - diffX / 2, diffY / 2, diffY - diffY / 2});
    return conv->forward(concat({x2, x1}, 1));
  }
};

struct UNet : nn::Module {
  std::shared_ptr<DoubleConv> inc;
  std::shared_ptr<Down> down1, down2;
  std::shared_ptr<Up> up1, up2;
  std::shared_ptr<nn::Conv2d> outc;
  UNet(int64_t n_channels, int64_t n_classes, int64_t width = 4) {
    inc = register_module<DoubleConv>("inc", n_channels, width);
    down1 = register_module<Down>("down1", width, width * 2);
    down2 = register_module<Down>("down2", width * 2, width * 4 / 2);
    up1 = register_module<Up>("up1", width * 4, width * 2 / 2);
    up2 = register_module<Up>("up2", width * 2, width);
    outc = register_module<nn::Conv2d>("outc", width, n_classes, 1);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor x1 = inc->forward(x);
    const Tensor x2 = down1->forward(x1);
    const Tensor x3 = down2->forward(x2);
    Tensor y = up1->forward(x3, x2);
    y = up2->forward(y, x1);
    return outc->forward(y);
  }
};
// --- end of the model ---

int main(int argc, char** argv) {
  return port::check(argc, argv, "port_unet", 1e-9, [](const port::Tensors& state, const port::Tensors& inputs) {
    UNet model(3, 5);
    model.to(f64);
    model.load_state_dict(state);                              // strict: PyTorch's keys, every one
    const Tensor logits = model.forward(inputs.at("images"));  // training mode: batch statistics
    const Tensor loss = cross_entropy(logits, inputs.at("masks"));
    loss.backward();
    const Tensor first = model.inc->double_conv->named_parameters().front().second;  // double_conv.0.weight
    return port::Tensors{
        {"logits", logits.detach()}, {"loss", reshape(loss.detach(), {1})}, {"grad_inc", first.grad()}};
  });
}
