#include "nn/activation.h"

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/require.h"

namespace xg::nn {

Tensor ActivationModule::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return fn_(x);
}

namespace {
// "0.01", "-1", "0.333333": an option as PyTorch prints it.
std::string num(double v) { return fmt::format("{:g}", v); }
}  // namespace

ReLU::ReLU() : ActivationModule("ReLU()", [](const Tensor& x) { return relu(x); }) {}
ReLU6::ReLU6() : ActivationModule("ReLU6()", [](const Tensor& x) { return relu6(x); }) {}
SELU::SELU() : ActivationModule("SELU()", [](const Tensor& x) { return selu(x); }) {}
SiLU::SiLU() : ActivationModule("SiLU()", [](const Tensor& x) { return silu(x); }) {}
Mish::Mish() : ActivationModule("Mish()", [](const Tensor& x) { return mish(x); }) {}
Hardswish::Hardswish() : ActivationModule("Hardswish()", [](const Tensor& x) { return hardswish(x); }) {}
Hardsigmoid::Hardsigmoid() : ActivationModule("Hardsigmoid()", [](const Tensor& x) { return hardsigmoid(x); }) {}
Sigmoid::Sigmoid() : ActivationModule("Sigmoid()", [](const Tensor& x) { return sigmoid(x); }) {}
Tanh::Tanh() : ActivationModule("Tanh()", [](const Tensor& x) { return tanh(x); }) {}
Softsign::Softsign() : ActivationModule("Softsign()", [](const Tensor& x) { return softsign(x); }) {}
Tanhshrink::Tanhshrink() : ActivationModule("Tanhshrink()", [](const Tensor& x) { return tanhshrink(x); }) {}
LogSigmoid::LogSigmoid() : ActivationModule("LogSigmoid()", [](const Tensor& x) { return logsigmoid(x); }) {}
Identity::Identity() : ActivationModule("Identity()", [](const Tensor& x) { return x; }) {}
Softmax2d::Softmax2d()
    : ActivationModule("Softmax2d()", [](const Tensor& x) {
        if (x.dim() != 3 && x.dim() != 4)
          throw ShapeError("Softmax2d: expected an input (N,C,H,W) or (C,H,W), got " + shape_str(x.shape()));
        return softmax(x, -3);
      }) {}

LeakyReLU::LeakyReLU(double s)
    : ActivationModule("LeakyReLU(negative_slope=" + num(s) + ")", [s](const Tensor& x) { return leaky_relu(x, s); }) {}
Hardtanh::Hardtanh(double lo, double hi)
    : ActivationModule("Hardtanh(min_val=" + num(lo) + ", max_val=" + num(hi) + ")",
                 [lo, hi](const Tensor& x) { return hardtanh(x, lo, hi); }) {
  require(lo <= hi, fmt::format("Hardtanh: min_val {} is above max_val {}", lo, hi));
}
ELU::ELU(double a) : ActivationModule("ELU(alpha=" + num(a) + ")", [a](const Tensor& x) { return elu(x, a); }) {}
CELU::CELU(double a) : ActivationModule("CELU(alpha=" + num(a) + ")", [a](const Tensor& x) { return celu(x, a); }) {
  require(a != 0, "CELU: alpha must not be 0 (it divides the input)");
}
GELU::GELU(const std::string& ap)
    : ActivationModule("GELU(approximate='" + ap + "')", [ap](const Tensor& x) { return gelu(x, ap); }) {
  require(ap == "none" || ap == "tanh", "GELU: approximate '" + ap + "': expected 'none' or 'tanh'");
}
Softplus::Softplus(double b, double t)
    : ActivationModule("Softplus(beta=" + num(b) + ", threshold=" + num(t) + ")",
                 [b, t](const Tensor& x) { return softplus(x, b, t); }) {
  require(b != 0, "Softplus: beta must not be 0 (it divides the result)");
}
Softshrink::Softshrink(double l)
    : ActivationModule("Softshrink(" + num(l) + ")", [l](const Tensor& x) { return softshrink(x, l); }) {
  require(l >= 0, fmt::format("Softshrink: lambd {}: expected >= 0", l));
}
Hardshrink::Hardshrink(double l)
    : ActivationModule("Hardshrink(" + num(l) + ")", [l](const Tensor& x) { return hardshrink(x, l); }) {
  require(l >= 0, fmt::format("Hardshrink: lambd {}: expected >= 0", l));
}
Threshold::Threshold(double t, double v)
    : ActivationModule("Threshold(threshold=" + num(t) + ", value=" + num(v) + ")",
                 [t, v](const Tensor& x) { return threshold(x, t, v); }) {}
Softmax::Softmax(int64_t d)
    : ActivationModule("Softmax(dim=" + std::to_string(d) + ")", [d](const Tensor& x) { return softmax(x, d); }) {}
Softmin::Softmin(int64_t d)
    : ActivationModule("Softmin(dim=" + std::to_string(d) + ")", [d](const Tensor& x) { return softmin(x, d); }) {}
LogSoftmax::LogSoftmax(int64_t d)
    : ActivationModule("LogSoftmax(dim=" + std::to_string(d) + ")", [d](const Tensor& x) { return log_softmax(x, d); }) {}
GLU::GLU(int64_t d) : ActivationModule("GLU(dim=" + std::to_string(d) + ")", [d](const Tensor& x) { return glu(x, d); }) {}

PReLU::PReLU(int64_t num_parameters, double init) : n_(num_parameters) {
  require(num_parameters >= 1, fmt::format("PReLU: num_parameters {}: expected >= 1", num_parameters));
  weight_ = register_parameter("weight", full({num_parameters}, init));
}

std::string PReLU::type_name() const { return "PReLU(num_parameters=" + std::to_string(n_) + ")"; }

Tensor PReLU::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return prelu(x, weight_);
}

RReLU::RReLU(double lower, double upper, std::shared_ptr<Generator> gen)
    : lower_(lower), upper_(upper), gen_(std::move(gen)) {
  require(lower <= upper, fmt::format("RReLU: lower {} is above upper {}", lower, upper));
}

std::string RReLU::type_name() const { return "RReLU(lower=" + num(lower_) + ", upper=" + num(upper_) + ")"; }

Tensor RReLU::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return rrelu(x, lower_, upper_, is_training(), gen_.get());
}

}  // namespace xg::nn
