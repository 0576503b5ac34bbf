// The rest of torch.nn's layers, each running the function of the same
// name (autograd/ops.h): 1-D, adaptive-max and power-average pooling,
// instance norm, the bilinear layer, unfold/fold, the 1-D transposed
// convolution and the channel and alpha dropouts. PyTorch's constructor
// arguments, in its order, with its defaults; a stride of 0 is PyTorch's
// stride=None (the kernel).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// torch.nn.AvgPool1d.
class AvgPool1d : public Module {
 public:
  // kernel_size >= 1; checked by forward as avg_pool1d checks it
  explicit AvgPool1d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;  // (N,C,L) -> (N,C,Lo)
  std::string type_name() const override;   // "AvgPool1d(kernel_size=3)"

 private:
  int64_t k_, s_, p_;
  bool ceil_, include_;
};

// torch.nn.MaxPool1d (return_indices is not offered).
class MaxPool1d : public Module {
 public:
  // kernel_size >= 1; checked by forward as max_pool1d checks it
  explicit MaxPool1d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, int64_t dilation = 1,
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;  // (N,C,L) -> (N,C,Lo)
  std::string type_name() const override;   // "MaxPool1d(kernel_size=3)"

 private:
  int64_t k_, s_, p_, d_;
  bool ceil_;
};

// torch.nn.AdaptiveAvgPool1d.
class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size);  // >= 1
  Tensor forward(const Tensor& x) override;         // (N,C,L) -> (N,C,output_size)
  std::string type_name() const override;          // "AdaptiveAvgPool1d(output_size=4)"

 private:
  int64_t out_;
};

// torch.nn.AdaptiveMaxPool1d (return_indices is not offered).
class AdaptiveMaxPool1d : public Module {
 public:
  explicit AdaptiveMaxPool1d(int64_t output_size);  // >= 1
  Tensor forward(const Tensor& x) override;         // (N,C,L) -> (N,C,output_size)
  std::string type_name() const override;          // "AdaptiveMaxPool1d(output_size=4)"

 private:
  int64_t out_;
};

// torch.nn.AdaptiveMaxPool2d (return_indices is not offered).
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(std::array<int64_t, 2> output_size);  // each >= 1
  Tensor forward(const Tensor& x) override;                        // (N,C,H,W) -> (N,C,Ho,Wo)
  std::string type_name() const override;                         // "AdaptiveMaxPool2d(output_size=2x3)"

 private:
  std::array<int64_t, 2> out_;
};

// torch.nn.LPPool1d.
class LPPool1d : public Module {
 public:
  LPPool1d(double norm_type, int64_t kernel_size, int64_t stride = 0, bool ceil_mode = false);  // norm_type > 0
  Tensor forward(const Tensor& x) override;  // (N,C,L) -> (N,C,Lo)
  std::string type_name() const override;   // "LPPool1d(norm_type=2, kernel_size=3)"

 private:
  double p_;
  int64_t k_, s_;
  bool ceil_;
};

// torch.nn.LPPool2d.
class LPPool2d : public Module {
 public:
  // norm_type > 0
  LPPool2d(double norm_type, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
           bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> (N,C,Ho,Wo)
  std::string type_name() const override;   // "LPPool2d(norm_type=2, kernel_size=2x2)"

 private:
  double p_;
  std::array<int64_t, 2> k_, s_;
  bool ceil_;
};

// torch.nn.AvgPool3d (divisor_override is not offered).
class AvgPool3d : public Module {
 public:
  // (depth, height, width) triples; checked by forward as avg_pool3d checks them
  explicit AvgPool3d(std::array<int64_t, 3> kernel_size, std::array<int64_t, 3> stride = {0, 0, 0},
                     std::array<int64_t, 3> padding = {0, 0, 0}, bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;  // (N,C,D,H,W) -> (N,C,Do,Ho,Wo)
  std::string type_name() const override;   // "AvgPool3d"

 private:
  std::array<int64_t, 3> k_, s_, p_;
  bool ceil_, include_;
};

// torch.nn.MaxPool3d (return_indices is not offered).
class MaxPool3d : public Module {
 public:
  // (depth, height, width) triples; checked by forward as max_pool3d checks them
  explicit MaxPool3d(std::array<int64_t, 3> kernel_size, std::array<int64_t, 3> stride = {0, 0, 0},
                     std::array<int64_t, 3> padding = {0, 0, 0}, std::array<int64_t, 3> dilation = {1, 1, 1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;  // (N,C,D,H,W) -> (N,C,Do,Ho,Wo)
  std::string type_name() const override;   // "MaxPool3d"

 private:
  std::array<int64_t, 3> k_, s_, p_, d_;
  bool ceil_;
};

// torch.nn.AdaptiveAvgPool3d and AdaptiveMaxPool3d (no return_indices).
class AdaptivePool3d : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // (N,C,D,H,W) -> (N,C,Do,Ho,Wo)
  std::string type_name() const override;   // "AdaptiveAvgPool3d"

 protected:
  // `max`: AdaptiveMaxPool3d, else the average; sizes each >= 1.
  AdaptivePool3d(bool max, std::array<int64_t, 3> output_size);

 private:
  bool max_;
  std::array<int64_t, 3> out_;
};
// torch.nn.AdaptiveAvgPool3d.
class AdaptiveAvgPool3d : public AdaptivePool3d {
 public:
  explicit AdaptiveAvgPool3d(std::array<int64_t, 3> output_size) : AdaptivePool3d(false, output_size) {}  // each >= 1
};
// torch.nn.AdaptiveMaxPool3d.
class AdaptiveMaxPool3d : public AdaptivePool3d {
 public:
  explicit AdaptiveMaxPool3d(std::array<int64_t, 3> output_size) : AdaptivePool3d(true, output_size) {}  // each >= 1
};

// torch.nn.LocalResponseNorm: local_response_norm(x, size, alpha, beta, k).
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);  // size >= 1
  Tensor forward(const Tensor& x) override;  // (N,C,...) -> the same shape
  std::string type_name() const override;   // "LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1)"

 private:
  int64_t size_;
  double alpha_, beta_, k_;
};

// torch.nn.MaxUnpool1d/2d/3d: max_unpool of a MaxPool's values and indices
// (max_pool2d_with_indices gives them) into zeros of the pooled input's size.
class MaxUnpool : public Module {
 public:
  // (N,C,*in) values and indices -> (N,C,*out); output_size empty: (in - 1) stride - 2 padding + kernel per axis
  Tensor forward(const Tensor& x, const Tensor& indices, const Shape& output_size = {});
  std::string type_name() const override;  // "MaxUnpool2d(kernel_size=(2, 2))"

 protected:
  // `name` the class's; kernel, stride (0: the kernel) and padding per spatial axis.
  MaxUnpool(std::string name, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> padding);

 private:
  std::string name_;
  std::vector<int64_t> k_, s_, p_;
};
// torch.nn.MaxUnpool1d.
class MaxUnpool1d : public MaxUnpool {
 public:
  // stride 0: the kernel
  explicit MaxUnpool1d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : MaxUnpool("MaxUnpool1d", {kernel_size}, {stride}, {padding}) {}
};
// torch.nn.MaxUnpool2d.
class MaxUnpool2d : public MaxUnpool {
 public:
  // stride 0: the kernel
  explicit MaxUnpool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                       std::array<int64_t, 2> padding = {0, 0})
      : MaxUnpool("MaxUnpool2d", {kernel_size[0], kernel_size[1]}, {stride[0], stride[1]}, {padding[0], padding[1]}) {}
};
// torch.nn.MaxUnpool3d.
class MaxUnpool3d : public MaxUnpool {
 public:
  // stride 0: the kernel
  explicit MaxUnpool3d(std::array<int64_t, 3> kernel_size, std::array<int64_t, 3> stride = {0, 0, 0},
                       std::array<int64_t, 3> padding = {0, 0, 0})
      : MaxUnpool("MaxUnpool3d", {kernel_size[0], kernel_size[1], kernel_size[2]}, {stride[0], stride[1], stride[2]},
                  {padding[0], padding[1], padding[2]}) {}
};

// torch.nn.CrossMapLRN2d: cross_map_lrn2d(x, size, alpha, beta, k).
class CrossMapLRN2d : public Module {
 public:
  explicit CrossMapLRN2d(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);  // size >= 1
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> the same shape
  std::string type_name() const override;   // "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"

 private:
  int64_t size_;
  double alpha_, beta_, k_;
};

// torch.nn.EmbeddingBag: embedding_bag with its weight (V, C) ~ N(0, 1) as
// PyTorch's. max_norm, scale_grad_by_freq and sparse are not offered.
class EmbeddingBag : public Module {
 public:
  // mode "sum", "mean" or "max"; padding_idx -1: none
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, const std::string& mode = "mean",
               bool include_last_offset = false, int64_t padding_idx = -1);
  // ids (B, L), or (N) with offsets (B); per_sample_weights with mode sum -> (B, C)
  Tensor forward(const Tensor& ids, const Tensor& offsets, const Tensor& per_sample_weights = Tensor());
  Tensor forward(const Tensor& ids) override { return forward(ids, Tensor()); }  // (B, L) ids
  std::string type_name() const override;  // "EmbeddingBag(10, 3, mode='mean')"
  Tensor& weight() { return weight_; }     // (V, C)

 private:
  int64_t num_, dim_, padding_idx_;
  std::string mode_;
  bool include_last_offset_;
  Tensor weight_;
};

// torch.nn.Conv3d: conv3d with weight (out, in/groups, kd, kh, kw) and bias
// (out), both U(-b, b) with b = 1/sqrt(in/groups kd kh kw) as PyTorch.
class Conv3d : public Module {
 public:
  // PyTorch's arguments in its order (the generator after the kernel)
  Conv3d(int64_t in, int64_t out, std::array<int64_t, 3> kernel_size, Generator& gen,
         std::array<int64_t, 3> stride = {1, 1, 1}, std::array<int64_t, 3> padding = {0, 0, 0},
         std::array<int64_t, 3> dilation = {1, 1, 1}, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (N, in, D, H, W) -> (N, out, Do, Ho, Wo)
  std::string type_name() const override;   // "Conv3d(in=2, out=4)"
  Tensor& weight() { return weight_; }      // (out, in/groups, kd, kh, kw)
  Tensor& bias() { return bias_; }          // (out), undefined without bias

 private:
  int64_t in_, out_, groups_;
  std::array<int64_t, 3> s_, p_, d_;
  Tensor weight_, bias_;
};

// torch.nn.InstanceNorm1d/2d/3d: instance_norm with the input's
// statistics; with affine, parameters weight (ones) and bias (zeros).
// track_running_stats (running statistics, used in eval mode) is not built:
// true throws std::invalid_argument saying so.
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // (N,C,...) of the class's rank, or unbatched (C,...)
  std::string type_name() const override;   // "InstanceNorm2d(4, eps=1e-05, affine=False)"

 protected:
  // `name` the class's, `rank` its batched input's rank (3, 4 or 5).
  InstanceNorm(std::string name, int64_t rank, int64_t num_features, double eps, double momentum, bool affine,
               bool track_running_stats);

 private:
  std::string name_;
  int64_t rank_, c_;
  double eps_;
  bool affine_;
  Tensor weight_, bias_;
};
// torch.nn.InstanceNorm1d on (N,C,L).
class InstanceNorm1d : public InstanceNorm {
 public:
  // PyTorch's arguments and defaults (momentum is read by running statistics alone)
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};
// torch.nn.InstanceNorm2d on (N,C,H,W).
class InstanceNorm2d : public InstanceNorm {
 public:
  // PyTorch's arguments and defaults
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};
// torch.nn.InstanceNorm3d on (N,C,D,H,W).
class InstanceNorm3d : public InstanceNorm {
 public:
  // PyTorch's arguments and defaults
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false);
};

// torch.nn.Bilinear: weight (out, in1, in2) and bias (out), both
// U(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch.
class Bilinear : public Module {
 public:
  // sizes each >= 1
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x1, const Tensor& x2);  // (..., in1), (..., in2) -> (..., out)
  std::string type_name() const override;             // "Bilinear(in1=4, in2=3, out=2)"
  Tensor& weight() { return weight_; }                 // (out, in1, in2)
  Tensor& bias() { return bias_; }                     // (out), undefined without bias

 private:
  int64_t in1_, in2_, out_;
  Tensor weight_, bias_;
};

// torch.nn.Unfold: unfold2d(x, kernel_size, window).
class Unfold : public Module {
 public:
  explicit Unfold(std::array<int64_t, 2> kernel_size, const Conv2dOptions& window = {});  // dilation, padding, stride
  Tensor forward(const Tensor& x) override;  // (N,C,H,W) -> (N, C kh kw, L)
  std::string type_name() const override;   // "Unfold(kernel_size=2x2)"

 private:
  std::array<int64_t, 2> k_;
  Conv2dOptions o_;
};

// torch.nn.Fold: fold2d(x, (N, C, output_size), kernel_size, window).
class Fold : public Module {
 public:
  // dilation, padding and stride in `window`
  Fold(std::array<int64_t, 2> output_size, std::array<int64_t, 2> kernel_size, const Conv2dOptions& window = {});
  Tensor forward(const Tensor& x) override;  // (N, C kh kw, L) -> (N, C, H, W)
  std::string type_name() const override;   // "Fold(output_size=4x5, kernel_size=2x2)"

 private:
  std::array<int64_t, 2> out_, k_;
  Conv2dOptions o_;
};

// torch.nn.ConvTranspose1d: conv_transpose2d on a height-1 image, weight
// (in, out/groups, k) and bias (out) initialised as PyTorch's.
class ConvTranspose1d : public Module {
 public:
  // PyTorch's arguments in its order (the generator after the kernel)
  ConvTranspose1d(int64_t in, int64_t out, int64_t kernel_size, Generator& gen, int64_t stride = 1, int64_t padding = 0,
                  int64_t output_padding = 0, int64_t groups = 1, bool bias = true, int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;  // (N, in, L) -> (N, out, Lo)
  std::string type_name() const override;   // "ConvTranspose1d(in=4, out=2, kernel_size=3)"
  Tensor& weight() { return weight_; }      // (in, out/groups, k)
  Tensor& bias() { return bias_; }          // (out), undefined without bias

 private:
  int64_t in_, out_, k_;
  ConvTranspose2dOptions o_;
  Tensor weight_, bias_;
};

// The channel and alpha dropouts: the function of the class's name in
// training, the identity in eval mode. `gen` draws the masks (needed only
// when p > 0 and the module trains).
class DropoutModule : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // the dropout, or x in eval mode
  std::string type_name() const override;   // "Dropout2d(p=0.5)"

 protected:
  using Fn = Tensor (*)(const Tensor&, double, bool, Generator*);  // dropout1d's signature
  // `name` the class's, `fn` its function; p in [0, 1].
  DropoutModule(std::string name, Fn fn, double p, std::shared_ptr<Generator> gen);

 private:
  std::string name_;
  Fn fn_;
  double p_;
  std::shared_ptr<Generator> gen_;
};
// torch.nn.Dropout1d.
class Dropout1d : public DropoutModule {
 public:
  explicit Dropout1d(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);  // dropout1d
};
// torch.nn.Dropout2d.
class Dropout2d : public DropoutModule {
 public:
  explicit Dropout2d(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);  // dropout2d
};
// torch.nn.Dropout3d.
class Dropout3d : public DropoutModule {
 public:
  explicit Dropout3d(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);  // dropout3d
};
// torch.nn.AlphaDropout.
class AlphaDropout : public DropoutModule {
 public:
  explicit AlphaDropout(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);  // alpha_dropout
};
// torch.nn.FeatureAlphaDropout.
class FeatureAlphaDropout : public DropoutModule {
 public:
  explicit FeatureAlphaDropout(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);  // feature_alpha_dropout
};

}  // namespace xg::nn
