// Activations as modules, as torch.nn's activation.py: each applies the op
// of the same name (autograd/ops.h) with the options it was built with, so
// that a Sequential holds activations and keeps PyTorch's indices. Defaults
// are PyTorch's. PyTorch's `inplace` is not offered: xgrad's ops never write
// their input, and the results are the same.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nn/module.h"

namespace xg::nn {

// An activation: forward is one function of the input. type_name() is the
// class name and its options, as PyTorch prints them: "LeakyReLU(negative_slope=0.01)".
class ActivationModule : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // fn(x); an undefined x throws naming the module
  std::string type_name() const override { return name_; }  // "LeakyReLU(negative_slope=0.01)"

 protected:
  // `name` as type_name() returns it; `fn` the activation.
  ActivationModule(std::string name, std::function<Tensor(const Tensor&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> fn_;
};

// Without options.
class ReLU : public ActivationModule {
 public:
  ReLU();  // relu(x)
};
// torch.nn.ReLU6.
class ReLU6 : public ActivationModule {
 public:
  ReLU6();  // relu6(x): min(max(x, 0), 6)
};
// torch.nn.SELU.
class SELU : public ActivationModule {
 public:
  SELU();  // selu(x)
};
// torch.nn.SiLU.
class SiLU : public ActivationModule {
 public:
  SiLU();  // silu(x): x sigmoid(x)
};
// torch.nn.Mish.
class Mish : public ActivationModule {
 public:
  Mish();  // mish(x)
};
// torch.nn.Hardswish.
class Hardswish : public ActivationModule {
 public:
  Hardswish();  // hardswish(x)
};
// torch.nn.Hardsigmoid.
class Hardsigmoid : public ActivationModule {
 public:
  Hardsigmoid();  // hardsigmoid(x)
};
// torch.nn.Sigmoid.
class Sigmoid : public ActivationModule {
 public:
  Sigmoid();  // sigmoid(x)
};
// torch.nn.Tanh.
class Tanh : public ActivationModule {
 public:
  Tanh();  // tanh(x)
};
// torch.nn.Softsign.
class Softsign : public ActivationModule {
 public:
  Softsign();  // softsign(x)
};
// torch.nn.Tanhshrink.
class Tanhshrink : public ActivationModule {
 public:
  Tanhshrink();  // tanhshrink(x)
};
// torch.nn.LogSigmoid.
class LogSigmoid : public ActivationModule {
 public:
  LogSigmoid();  // logsigmoid(x)
};
// torch.nn.Identity.
class Identity : public ActivationModule {
 public:
  Identity();  // x itself
};  // the input itself
// softmax over the channels (dimension -3) of (N,C,H,W) or (C,H,W).
class Softmax2d : public ActivationModule {
 public:
  Softmax2d();  // softmax(x, -3)
};

// With options, in PyTorch's order.
class LeakyReLU : public ActivationModule {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);  // leaky_relu(x, negative_slope)
};
// torch.nn.Hardtanh.
class Hardtanh : public ActivationModule {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);  // hardtanh(x, min_val, max_val); min_val <= max_val
};
// torch.nn.ELU.
class ELU : public ActivationModule {
 public:
  explicit ELU(double alpha = 1.0);  // elu(x, alpha)
};
// torch.nn.CELU.
class CELU : public ActivationModule {
 public:
  explicit CELU(double alpha = 1.0);  // celu(x, alpha); alpha != 0
};
// torch.nn.GELU.
class GELU : public ActivationModule {
 public:
  explicit GELU(const std::string& approximate = "none");  // gelu(x, approximate): "none" or "tanh"
};
// torch.nn.Softplus.
class Softplus : public ActivationModule {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);  // softplus(x, beta, threshold); beta != 0
};
// torch.nn.Softshrink.
class Softshrink : public ActivationModule {
 public:
  explicit Softshrink(double lambd = 0.5);  // softshrink(x, lambd); lambd >= 0
};
// torch.nn.Hardshrink.
class Hardshrink : public ActivationModule {
 public:
  explicit Hardshrink(double lambd = 0.5);  // hardshrink(x, lambd); lambd >= 0
};
// torch.nn.Threshold.
class Threshold : public ActivationModule {
 public:
  Threshold(double threshold, double value);  // threshold(x, threshold, value)
};
// Along `dim` (PyTorch's dim=None, a legacy guess, is not offered).
class Softmax : public ActivationModule {
 public:
  explicit Softmax(int64_t dim);  // softmax(x, dim)
};
// torch.nn.Softmin.
class Softmin : public ActivationModule {
 public:
  explicit Softmin(int64_t dim);  // softmin(x, dim)
};
// torch.nn.LogSoftmax.
class LogSoftmax : public ActivationModule {
 public:
  explicit LogSoftmax(int64_t dim);  // log_softmax(x, dim)
};
// torch.nn.GLU.
class GLU : public ActivationModule {
 public:
  explicit GLU(int64_t dim = -1);  // glu(x, dim)
};

// PReLU: a learned negative slope, parameter "weight" (num_parameters),
// every slope starting at `init`; num_parameters is 1 or the input's channels.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);  // num_parameters >= 1
  Tensor forward(const Tensor& x) override;  // prelu(x, weight)
  std::string type_name() const override;   // "PReLU(num_parameters=1)"
  Tensor& weight() { return weight_; }  // (num_parameters)

 private:
  Tensor weight_;
  int64_t n_;
};

// RReLU: in training each negative element's slope is drawn from
// U[lower, upper) with `gen` (null: default_generator(), as PyTorch's
// global generator); in eval mode the slope (lower + upper) / 2.
class RReLU : public Module {
 public:
  RReLU(double lower = 1.0 / 8, double upper = 1.0 / 3, std::shared_ptr<Generator> gen = nullptr);  // lower <= upper
  Tensor forward(const Tensor& x) override;  // rrelu(x, lower, upper, is_training(), gen)
  std::string type_name() const override;  // "RReLU(lower=0.125, upper=0.333333)"

 private:
  double lower_, upper_;
  std::shared_ptr<Generator> gen_;
};

}  // namespace xg::nn
