// Pooling layers as torch.nn's, on (N,C,L), (N,C,H,W) or (N,C,D,H,W): max,
// average and power-average pooling with a window (its options in
// autograd/window.h, shared with the functions), adaptive pooling to an
// output size, and max unpooling. None has parameters.
//   nn.MaxPool2d(3, stride=2, padding=1)
//   nn::MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1))
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// max_poolNd with a fixed window (return_indices is not offered: the
// function max_pool2d_with_indices gives them).
template <size_t D>
class MaxPoolNd : public Module {
 public:
  explicit MaxPoolNd(const MaxPoolOptions<D>& options);  // checked by forward, as the function checks it
  explicit MaxPoolNd(ExpandingArray<D> kernel_size) : MaxPoolNd(MaxPoolOptions<D>(kernel_size)) {}  // stride = kernel
  Tensor forward(const Tensor& x) override;  // (N, C, *spatial) -> (N, C, *spatial')
  // As PyTorch prints it: "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
  std::string type_name() const override;
  const MaxPoolOptions<D>& options() const { return options_; }  // the window

 private:
  MaxPoolOptions<D> options_;
};
// torch.nn.MaxPool1d on (N,C,L).
class MaxPool1d : public MaxPoolNd<1> {
 public:
  using MaxPoolNd<1>::MaxPoolNd;
};
// torch.nn.MaxPool2d on (N,C,H,W).
class MaxPool2d : public MaxPoolNd<2> {
 public:
  using MaxPoolNd<2>::MaxPoolNd;
};
// torch.nn.MaxPool3d on (N,C,D,H,W).
class MaxPool3d : public MaxPoolNd<3> {
 public:
  using MaxPoolNd<3>::MaxPoolNd;
};

// avg_poolNd with a fixed window.
template <size_t D>
class AvgPoolNd : public Module {
 public:
  explicit AvgPoolNd(const AvgPoolOptions<D>& options);  // checked by forward, as the function checks it
  explicit AvgPoolNd(ExpandingArray<D> kernel_size) : AvgPoolNd(AvgPoolOptions<D>(kernel_size)) {}  // stride = kernel
  Tensor forward(const Tensor& x) override;  // (N, C, *spatial) -> (N, C, *spatial')
  std::string type_name() const override;   // as PyTorch prints it: "AvgPool2d(kernel_size=3, stride=2, padding=1)"
  const AvgPoolOptions<D>& options() const { return options_; }  // the window

 private:
  AvgPoolOptions<D> options_;
};
// torch.nn.AvgPool1d on (N,C,L).
class AvgPool1d : public AvgPoolNd<1> {
 public:
  using AvgPoolNd<1>::AvgPoolNd;
};
// torch.nn.AvgPool2d on (N,C,H,W).
class AvgPool2d : public AvgPoolNd<2> {
 public:
  using AvgPoolNd<2>::AvgPoolNd;
};
// torch.nn.AvgPool3d on (N,C,D,H,W).
class AvgPool3d : public AvgPoolNd<3> {
 public:
  using AvgPoolNd<3>::AvgPoolNd;
};

// lp_poolNd with a fixed window.
template <size_t D>
class LPPoolNd : public Module {
 public:
  explicit LPPoolNd(const LPPoolOptions<D>& options);  // norm_type > 0; the window checked by forward
  LPPoolNd(double norm_type, ExpandingArray<D> kernel_size) : LPPoolNd(LPPoolOptions<D>(norm_type, kernel_size)) {}  // stride = kernel
  Tensor forward(const Tensor& x) override;  // (N, C, *spatial) -> (N, C, *spatial')
  std::string type_name() const override;   // "LPPool2d(norm_type=2, kernel_size=2, stride=2, ceil_mode=False)"
  const LPPoolOptions<D>& options() const { return options_; }  // the window

 private:
  LPPoolOptions<D> options_;
};
// torch.nn.LPPool1d on (N,C,L).
class LPPool1d : public LPPoolNd<1> {
 public:
  using LPPoolNd<1>::LPPoolNd;
};
// torch.nn.LPPool2d on (N,C,H,W).
class LPPool2d : public LPPoolNd<2> {
 public:
  using LPPoolNd<2>::LPPoolNd;
};

// adaptive_{avg,max}_poolNd to a fixed output size ((1, 1) is global
// pooling); `Max` chooses the maximum. return_indices is not offered.
template <size_t D, bool Max>
class AdaptivePoolNd : public Module {
 public:
  explicit AdaptivePoolNd(ExpandingArray<D> output_size);  // throws std::invalid_argument below 1
  Tensor forward(const Tensor& x) override;  // (N, C, *spatial) -> (N, C, *output_size)
  std::string type_name() const override;   // "AdaptiveAvgPool2d(output_size=(1, 1))"

 private:
  ExpandingArray<D> output_size_;
};
// torch.nn.AdaptiveAvgPool1d on (N,C,L).
class AdaptiveAvgPool1d : public AdaptivePoolNd<1, false> {
 public:
  using AdaptivePoolNd<1, false>::AdaptivePoolNd;
};
// torch.nn.AdaptiveAvgPool2d on (N,C,H,W).
class AdaptiveAvgPool2d : public AdaptivePoolNd<2, false> {
 public:
  using AdaptivePoolNd<2, false>::AdaptivePoolNd;
};
// torch.nn.AdaptiveAvgPool3d on (N,C,D,H,W).
class AdaptiveAvgPool3d : public AdaptivePoolNd<3, false> {
 public:
  using AdaptivePoolNd<3, false>::AdaptivePoolNd;
};
// torch.nn.AdaptiveMaxPool1d on (N,C,L).
class AdaptiveMaxPool1d : public AdaptivePoolNd<1, true> {
 public:
  using AdaptivePoolNd<1, true>::AdaptivePoolNd;
};
// torch.nn.AdaptiveMaxPool2d on (N,C,H,W).
class AdaptiveMaxPool2d : public AdaptivePoolNd<2, true> {
 public:
  using AdaptivePoolNd<2, true>::AdaptivePoolNd;
};
// torch.nn.AdaptiveMaxPool3d on (N,C,D,H,W).
class AdaptiveMaxPool3d : public AdaptivePoolNd<3, true> {
 public:
  using AdaptivePoolNd<3, true>::AdaptivePoolNd;
};

// fractional_max_poolNd (autograd/ops.h) as a module: the windows placed by
// the options' _random_samples, or by samples drawn from `gen` at each
// forward (null: default_generator()), as PyTorch draws them per call.
template <size_t D>
class FractionalMaxPoolNd : public Module {
 public:
  // kernel_size and exactly one of output_size and output_ratio (checked by
  // forward); given samples become the buffer "_random_samples", as PyTorch's.
  explicit FractionalMaxPoolNd(const FractionalMaxPoolOptions<D>& options, std::shared_ptr<Generator> gen = nullptr)
      : options_(options), gen_(std::move(gen)) {
    if (options_._random_samples().defined())
      options_._random_samples(register_buffer("_random_samples", options_._random_samples()));
  }
  Tensor forward(const Tensor& x) override { return forward_with_indices(x).values; }  // (N, C, *out)
  MaxPool2dResult forward_with_indices(const Tensor& x);  // the values and each one's position in its plane
  std::string type_name() const override;                 // "FractionalMaxPool2d()", as PyTorch prints it

 private:
  FractionalMaxPoolOptions<D> options_;
  std::shared_ptr<Generator> gen_;
};
// torch.nn.FractionalMaxPool2d on (N,C,H,W) or (C,H,W).
class FractionalMaxPool2d : public FractionalMaxPoolNd<2> {
 public:
  using FractionalMaxPoolNd<2>::FractionalMaxPoolNd;
};
// torch.nn.FractionalMaxPool3d on (N,C,T,H,W) or (C,T,H,W).
class FractionalMaxPool3d : public FractionalMaxPoolNd<3> {
 public:
  using FractionalMaxPoolNd<3>::FractionalMaxPoolNd;
};

// max_unpool of a MaxPool's values and indices (max_pool2d_with_indices
// gives them) into zeros of the pooled input's size.
template <size_t D>
class MaxUnpoolNd : public Module {
 public:
  explicit MaxUnpoolNd(const MaxUnpoolOptions<D>& options);  // throws std::invalid_argument out of range
  explicit MaxUnpoolNd(ExpandingArray<D> kernel_size) : MaxUnpoolNd(MaxUnpoolOptions<D>(kernel_size)) {}  // stride = kernel
  // (N,C,*in) values and indices -> (N,C,*out); output_size empty: (in - 1) stride - 2 padding + kernel per axis
  Tensor forward(const Tensor& x, const Tensor& indices, const Shape& output_size = {});
  std::string type_name() const override;  // "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"

 private:
  MaxUnpoolOptions<D> options_;
};
// torch.nn.MaxUnpool1d.
class MaxUnpool1d : public MaxUnpoolNd<1> {
 public:
  using MaxUnpoolNd<1>::MaxUnpoolNd;
};
// torch.nn.MaxUnpool2d.
class MaxUnpool2d : public MaxUnpoolNd<2> {
 public:
  using MaxUnpoolNd<2>::MaxUnpoolNd;
};
// torch.nn.MaxUnpool3d.
class MaxUnpool3d : public MaxUnpoolNd<3> {
 public:
  using MaxUnpoolNd<3>::MaxUnpoolNd;
};

}  // namespace xg::nn
