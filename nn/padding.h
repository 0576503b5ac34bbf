// Padding, resampling and rearranging layers, as torch.nn's padding.py,
// upsampling.py, pixelshuffle.py and channelshuffle.py: each runs the op of
// autograd/ops.h (pad, interpolate, pixel_shuffle, ...) with its options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// pad(x, padding, mode, value) over the last `dims` dimensions. `padding`
// is one size for every side, or (left, right[, top, bottom[, front, back]])
// as PyTorch's tuple; any other count throws std::invalid_argument.
class PadModule : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // pad(x, padding, mode, value)
  std::string type_name() const override;   // "ReflectionPad2d((1, 1, 2, 0))"

 protected:
  // `name` the class's, `dims` the dimensions padded (1 to 3).
  PadModule(std::string name, int64_t dims, std::vector<int64_t> padding, std::string mode, double value = 0.0);

 private:
  std::string name_, mode_;
  std::vector<int64_t> padding_;
  double value_;
};

// torch.nn.ConstantPad1d.
class ConstantPad1d : public PadModule {
 public:
  ConstantPad1d(std::vector<int64_t> padding, double value);  // (left, right), or one size
};
// torch.nn.ConstantPad2d.
class ConstantPad2d : public PadModule {
 public:
  ConstantPad2d(std::vector<int64_t> padding, double value);  // (left, right, top, bottom), or one size
};
// torch.nn.ConstantPad3d.
class ConstantPad3d : public PadModule {
 public:
  ConstantPad3d(std::vector<int64_t> padding, double value);  // (left, right, top, bottom, front, back), or one
};
// torch.nn.ZeroPad2d.
class ZeroPad2d : public PadModule {
 public:
  explicit ZeroPad2d(std::vector<int64_t> padding);  // ConstantPad2d(padding, 0)
};
// torch.nn.ReflectionPad1d.
class ReflectionPad1d : public PadModule {
 public:
  explicit ReflectionPad1d(std::vector<int64_t> padding);  // each below the padded size
};
// torch.nn.ReflectionPad2d.
class ReflectionPad2d : public PadModule {
 public:
  explicit ReflectionPad2d(std::vector<int64_t> padding);  // each below the padded size
};
// torch.nn.ReflectionPad3d.
class ReflectionPad3d : public PadModule {
 public:
  explicit ReflectionPad3d(std::vector<int64_t> padding);  // each below the padded size
};
// torch.nn.ReplicationPad1d.
class ReplicationPad1d : public PadModule {
 public:
  explicit ReplicationPad1d(std::vector<int64_t> padding);  // the edge value repeated
};
// torch.nn.ReplicationPad2d.
class ReplicationPad2d : public PadModule {
 public:
  explicit ReplicationPad2d(std::vector<int64_t> padding);  // the edge value repeated
};
// torch.nn.ReplicationPad3d.
class ReplicationPad3d : public PadModule {
 public:
  explicit ReplicationPad3d(std::vector<int64_t> padding);  // the edge value repeated
};

// torch.nn.Upsample: interpolate(x, options).
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options);  // size or scale_factor, mode, align_corners
  Tensor forward(const Tensor& x) override;      // interpolate(x, options)
  std::string type_name() const override;        // "Upsample(mode='bilinear')"
  InterpolateOptions options;                    // as given

 protected:
  // `name` the class's (the Upsampling* subclasses).
  Upsample(std::string name, InterpolateOptions options);

 private:
  std::string name_;
};
// torch.nn.UpsamplingNearest2d: Upsample with mode nearest.
class UpsamplingNearest2d : public Upsample {
 public:
  UpsamplingNearest2d(std::vector<int64_t> size, std::vector<double> scale_factor);  // one of them empty
};
// torch.nn.UpsamplingBilinear2d: Upsample with mode bilinear and align_corners.
class UpsamplingBilinear2d : public Upsample {
 public:
  UpsamplingBilinear2d(std::vector<int64_t> size, std::vector<double> scale_factor);  // one of them empty
};

// torch.nn.PixelShuffle.
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor);  // >= 1
  Tensor forward(const Tensor& x) override;      // (*, C r^2, H, W) -> (*, C, H r, W r)
  std::string type_name() const override;        // "PixelShuffle(upscale_factor=2)"

 private:
  int64_t r_;
};
// torch.nn.PixelUnshuffle.
class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor);  // >= 1
  Tensor forward(const Tensor& x) override;          // (*, C, H r, W r) -> (*, C r^2, H, W)
  std::string type_name() const override;           // "PixelUnshuffle(downscale_factor=2)"

 private:
  int64_t r_;
};
// torch.nn.ChannelShuffle.
class ChannelShuffle : public Module {
 public:
  explicit ChannelShuffle(int64_t groups);   // >= 1, dividing the channels
  Tensor forward(const Tensor& x) override;  // channel_shuffle(x, groups)
  std::string type_name() const override;    // "ChannelShuffle(groups=2)"

 private:
  int64_t groups_;
};

}  // namespace xg::nn
