// examples/port_dcgan.py's DCGAN (PyTorch's examples, dcgan/main.py),
// ported line for line to xgrad's nn: each network an nn::Sequential named
// `main` of PyTorch's layers with PyTorch's arguments, so the state dicts'
// keys ("main.1.running_var") are PyTorch's and load as they are. The
// classes are NetG and NetD here (Generator is xgrad's random generator).
// Reads the file the script writes and checks, in float64, the generator's
// images, the discriminator's probabilities of them, and the
// discriminator's probabilities of real images after one Adam step on its
// BCE loss, each against PyTorch's; exits 1 above 1e-9 relative.
//   port_dcgan WEIGHTS.safetensors
#include "autograd/xg.h"
#include "examples/port_check.h"
#include "nn/nn.h"
#include "optim/adam.h"

using namespace xg;

const int64_t nz = 16, ngf = 8, ndf = 8, nc = 3;

// --- the model (the lines the port counts) ---
struct NetG : nn::Module {
  std::shared_ptr<nn::Sequential> main = register_module("main", nn::Sequential{
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(nz, ngf * 8, 4).stride(1).padding(0).bias(false)),
      nn::BatchNorm2d(ngf * 8), nn::ReLU(),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ngf * 8, ngf * 4, 4).stride(2).padding(1).bias(false)),
      nn::BatchNorm2d(ngf * 4), nn::ReLU(),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ngf * 4, ngf * 2, 4).stride(2).padding(1).bias(false)),
      nn::BatchNorm2d(ngf * 2), nn::ReLU(),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ngf * 2, ngf, 4).stride(2).padding(1).bias(false)),
      nn::BatchNorm2d(ngf), nn::ReLU(),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ngf, nc, 4).stride(2).padding(1).bias(false)), nn::Tanh()});
  Tensor forward(const Tensor& input) override { return main->forward(input); }
};

struct NetD : nn::Module {
  std::shared_ptr<nn::Sequential> main = register_module("main", nn::Sequential{
      nn::Conv2d(nn::Conv2dOptions(nc, ndf, 4).stride(2).padding(1).bias(false)), nn::LeakyReLU(0.2),
      nn::Conv2d(nn::Conv2dOptions(ndf, ndf * 2, 4).stride(2).padding(1).bias(false)), nn::BatchNorm2d(ndf * 2),
      nn::LeakyReLU(0.2),
      nn::Conv2d(nn::Conv2dOptions(ndf * 2, ndf * 4, 4).stride(2).padding(1).bias(false)), nn::BatchNorm2d(ndf * 4),
      nn::LeakyReLU(0.2),
      nn::Conv2d(nn::Conv2dOptions(ndf * 4, ndf * 8, 4).stride(2).padding(1).bias(false)), nn::BatchNorm2d(ndf * 8),
      nn::LeakyReLU(0.2),
      nn::Conv2d(nn::Conv2dOptions(ndf * 8, 1, 4).stride(1).padding(0).bias(false)), nn::Sigmoid()});
  Tensor forward(const Tensor& input) override { return squeeze(reshape(main->forward(input), {-1, 1}), 1); }
};

void d_step(NetD& netD, NetG& netG, const Tensor& real, const Tensor& noise) {
  nn::BCELoss criterion;
  optim::Adam optimizerD(netD.parameters(), optim::AdamOptions{0.0002, 0.5, 0.999});
  optimizerD.zero_grad();
  const Tensor errD_real = criterion.forward(netD.forward(real), full({real.size(0)}, 1.0, real.dtype()));
  const Tensor errD_fake =
      criterion.forward(netD.forward(netG.forward(noise).detach()), full({real.size(0)}, 0.0, real.dtype()));
  (errD_real + errD_fake).backward();
  optimizerD.step();
}
// --- end of the model ---

// The state dict's tensors under `prefix`, the prefix taken off.
port::Tensors part(const port::Tensors& state, const std::string& prefix) {
  port::Tensors out;
  for (const auto& [key, t] : state)
    if (key.rfind(prefix, 0) == 0) out[key.substr(prefix.size())] = t;
  return out;
}

int main(int argc, char** argv) {
  return port::check(argc, argv, "port_dcgan", 1e-9, [](const port::Tensors& state, const port::Tensors& inputs) {
    NetG netG;
    NetD netD;
    netG.to(f64);
    netD.to(f64);
    netG.load_state_dict(part(state, "G."));  // strict: PyTorch's keys, every one
    netD.load_state_dict(part(state, "D."));
    port::Tensors out;
    out["fake"] = netG.forward(inputs.at("noise"));
    out["p_fake"] = netD.forward(out["fake"]);
    d_step(netD, netG, inputs.at("real"), inputs.at("noise"));  // training mode, as PyTorch's
    netD.eval();
    out["p_real_after_step"] = netD.forward(inputs.at("real"));
    return out;
  });
}
