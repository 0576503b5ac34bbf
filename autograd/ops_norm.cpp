// Normalisation over the batch (batch_norm) and over groups of channels
// (group_norm), as torch.nn.functional writes them, for (N,C,...) inputs.
// Both are composed from differentiable ops (group_norm from the fused
// layer_norm over each group), so gradients of every order are exact.
#include <string>

#include <fmt/format.h>

#include "autograd/detail/impl.h"
#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg {

namespace {

// A per-channel tensor (C) or undefined, checked against x's C channels.
void check_channels(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  const int64_t c = x.size(1);
  if (t.shape() != Shape{c})
    throw ShapeError(std::string(op) + ": " + name + " " + shape_str(t.shape()) + " does not match the " +
                     std::to_string(c) + " channels of input " + shape_str(x.shape()) + ": expected (" +
                     std::to_string(c) + ",)");
  if (t.dtype() != x.dtype())
    throw ShapeError(std::string(op) + ": dtype mismatch, input " + dtype_name(x.dtype()) + " vs " + name + " " +
                     dtype_name(t.dtype()));
}

// (1, C, 1, ...): a per-channel (C) tensor as it broadcasts against x.
Shape per_channel(const Tensor& x) {
  Shape s(x.dim(), 1);
  s[1] = x.size(1);
  return s;
}

// y * weight + bias per channel, either undefined.
Tensor channel_affine(Tensor y, const Tensor& weight, const Tensor& bias, const Tensor& x) {
  if (weight.defined()) y = y * reshape(weight, per_channel(x));
  if (bias.defined()) y = y + reshape(bias, per_channel(x));
  return y;
}

void check_eps(const char* op, double eps) {
  require(eps > 0, "eps " + fmt::format("{}", eps) + ": expected > 0", (std::string(op) + ": ").c_str());
}

// Every argument of batch_norm checked, with the names PyTorch gives them.
void check_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                      const Tensor& bias, bool training, double momentum, double eps) {
  check_defined(x, "batch_norm");
  if (x.dim() < 2 || x.dim() > 4)
    throw ShapeError("batch_norm: expected an input (N,C), (N,C,L) or (N,C,H,W), got " + shape_str(x.shape()));
  check_eps("batch_norm", eps);
  require(momentum >= 0 && momentum <= 1, "momentum " + fmt::format("{}", momentum) + ": expected in [0, 1]",
          "batch_norm: ");
  check_channels("batch_norm", "running_mean", running_mean, x);
  check_channels("batch_norm", "running_var", running_var, x);
  check_channels("batch_norm", "weight", weight, x);
  check_channels("batch_norm", "bias", bias, x);
  require(training || (running_mean.defined() && running_var.defined()),
          "evaluation (training false) normalises with running_mean and running_var: both must be defined",
          "batch_norm: ");
  if (training && x.numel() / x.size(1) <= 1)
    throw ShapeError("batch_norm: training needs more than 1 value per channel, got input " + shape_str(x.shape()));
}

// r = (1 - momentum) r + momentum b, in place and off the tape.
void update_running(Tensor& running, const Tensor& batch, double momentum) {
  if (!running.defined()) return;
  NoGradGuard off;
  running.copy_(running.detach() * (1 - momentum) + reshape(batch.detach(), running.shape()) * momentum);
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps,
                  const std::function<Tensor(const Tensor&)>& across) {
  check_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
  std::vector<int64_t> axes{0};  // every axis but C's
  for (int64_t i = 2; i < x.dim(); ++i) axes.push_back(i);
  if (!training) {
    Tensor shift, scale;  // the running statistics are constants here
    {
      NoGradGuard off;
      shift = reshape(running_mean.detach(), per_channel(x));
      scale = reshape(pow(running_var.detach() + eps, -0.5), per_channel(x));
    }
    const Tensor y = channel_affine((x - shift) * scale, weight, bias, x);
    // Exported as one ONNX BatchNormalization reading the running statistics
    // themselves (initializers under their buffers' names), not the constants above.
    return detail::traced(y, [&](TracedOp& t) {
      t = TracedOp{"batch_norm", t.scope, {x, running_mean, running_var, weight, bias}, y, {}, {eps}, {}};
    });
  }
  // The batch's mean and biased variance per channel (1,C,1,...), over this
  // process's values or, through `across`, every process's.
  double n = static_cast<double>(x.numel() / x.size(1));
  if (across) n = across(full({1}, n, x.dtype())).item();
  auto batch_mean = [&](const Tensor& t) { return across ? across(sum(t, axes, true)) / n : mean(t, axes, true); };
  const Tensor mu = batch_mean(x), d = x - mu, v = batch_mean(d * d);
  const Tensor y = d * pow(v + eps, -0.5);
  Tensor rm = running_mean, rv = running_var;
  update_running(rm, mu, momentum);
  update_running(rv, v.detach() * (n / (n - 1)), momentum);  // the unbiased variance, as PyTorch keeps it
  return channel_affine(y, weight, bias, x);
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(x, "group_norm");
  if (x.dim() < 2) throw ShapeError("group_norm: expected an input (N,C,...), got " + shape_str(x.shape()));
  require(groups >= 1, "groups " + std::to_string(groups) + ": expected at least 1", "group_norm: ");
  if (x.size(1) % groups != 0)
    throw ShapeError("group_norm: groups " + std::to_string(groups) + " does not divide the " +
                     std::to_string(x.size(1)) + " channels of input " + shape_str(x.shape()));
  check_eps("group_norm", eps);
  check_channels("group_norm", "weight", weight, x);
  check_channels("group_norm", "bias", bias, x);
  const int64_t N = x.size(0), per_group = N ? x.numel() / (N * groups) : 0;
  // (N, G, C/G * ...): each group's values are one row of layer_norm.
  const Tensor y = layer_norm(reshape(x, {N, groups, per_group}), Tensor(), Tensor(), eps);
  return channel_affine(reshape(y, x.shape()), weight, bias, x);
}

}  // namespace xg
