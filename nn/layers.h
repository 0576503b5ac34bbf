// The rest of torch.nn's layers, each running the function of the same
// name (autograd/ops.h): local response norms, instance norm, the bilinear
// layer, unfold/fold, embedding bags and the channel and alpha dropouts.
// PyTorch's constructor arguments, in its order, with its defaults.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

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
  // mode "sum", "mean" or "max"; padding_idx as Embedding's: none, or in
  // [-num_embeddings, num_embeddings), a negative one counting from the end
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, const std::string& mode = "mean",
               bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt);
  // The same drawing from default_generator().
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode = "mean",
               bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt)
      : EmbeddingBag(num_embeddings, embedding_dim, default_generator(), mode, include_last_offset, padding_idx) {}
  // ids (B, L), or (N) with offsets (B); per_sample_weights with mode sum -> (B, C)
  Tensor forward(const Tensor& ids, const Tensor& offsets, const Tensor& per_sample_weights = Tensor());
  Tensor forward(const Tensor& ids) override { return forward(ids, Tensor()); }  // (B, L) ids
  std::string type_name() const override;  // "EmbeddingBag(10, 3, mode='mean')"
  Tensor& weight() { return weight_; }     // (V, C)

 private:
  int64_t num_, dim_;
  std::optional<int64_t> padding_idx_;  // in [0, num_), or none
  std::string mode_;
  bool include_last_offset_;
  Tensor weight_;
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
  // The same drawing from default_generator().
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true)
      : Bilinear(in1_features, in2_features, out_features, default_generator(), bias) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);  // (..., in1), (..., in2) -> (..., out)
  std::string type_name() const override;             // "Bilinear(in1=4, in2=3, out=2)"
  Tensor& weight() { return weight_; }                 // (out, in1, in2)
  Tensor& bias() { return bias_; }                     // (out), undefined without bias

 private:
  int64_t in1_, in2_, out_;
  Tensor weight_, bias_;
};

// torch.nn.Unfold: unfold2d(x, options).
class Unfold : public Module {
 public:
  explicit Unfold(const UnfoldOptions& options);  // the window, checked by forward
  Tensor forward(const Tensor& x) override;      // (N,C,H,W) -> (N, C kh kw, L)
  std::string type_name() const override;       // "Unfold(kernel_size=(2, 2), dilation=1, padding=0, stride=1)"

 private:
  UnfoldOptions o_;
};

// torch.nn.Fold: fold2d(x, options).
class Fold : public Module {
 public:
  explicit Fold(const FoldOptions& options);  // the image's size and the window, checked by forward
  Tensor forward(const Tensor& x) override;  // (N, C kh kw, L) -> (N, C, H, W)
  std::string type_name() const override;   // "Fold(output_size=(4, 5), kernel_size=(2, 2), ...)"

 private:
  FoldOptions o_;
};

// The channel and alpha dropouts: the function of the class's name in
// training, the identity in eval mode. `gen` draws the masks (null:
// default_generator()).
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
