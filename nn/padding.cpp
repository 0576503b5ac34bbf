#include "nn/padding.h"

#include <fmt/format.h>

#include "autograd/require.h"

namespace xg::nn {

namespace {
// One size for every side, or 2 * dims of them; else std::invalid_argument.
std::vector<int64_t> sides(const std::string& name, int64_t dims, const std::vector<int64_t>& p) {
  if (p.size() == 1) return std::vector<int64_t>(static_cast<size_t>(2 * dims), p[0]);
  require(static_cast<int64_t>(p.size()) == 2 * dims,
          fmt::format("{}: padding has {} sizes: expected 1 or {}", name, p.size(), 2 * dims));
  return p;
}
}  // namespace

PadModule::PadModule(std::string name, int64_t dims, std::vector<int64_t> padding, std::string mode, double value)
    : name_(std::move(name)), mode_(std::move(mode)), padding_(sides(name_, dims, padding)), value_(value) {}

Tensor PadModule::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return pad(x, padding_, mode_, value_);
}

std::string PadModule::type_name() const { return name_ + "(" + fmt::format("{}", fmt::join(padding_, ", ")) + ")"; }

ConstantPad1d::ConstantPad1d(std::vector<int64_t> p, double v) : PadModule("ConstantPad1d", 1, p, "constant", v) {}
ConstantPad2d::ConstantPad2d(std::vector<int64_t> p, double v) : PadModule("ConstantPad2d", 2, p, "constant", v) {}
ConstantPad3d::ConstantPad3d(std::vector<int64_t> p, double v) : PadModule("ConstantPad3d", 3, p, "constant", v) {}
ZeroPad2d::ZeroPad2d(std::vector<int64_t> p) : PadModule("ZeroPad2d", 2, p, "constant", 0.0) {}
ReflectionPad1d::ReflectionPad1d(std::vector<int64_t> p) : PadModule("ReflectionPad1d", 1, p, "reflect") {}
ReflectionPad2d::ReflectionPad2d(std::vector<int64_t> p) : PadModule("ReflectionPad2d", 2, p, "reflect") {}
ReflectionPad3d::ReflectionPad3d(std::vector<int64_t> p) : PadModule("ReflectionPad3d", 3, p, "reflect") {}
ReplicationPad1d::ReplicationPad1d(std::vector<int64_t> p) : PadModule("ReplicationPad1d", 1, p, "replicate") {}
ReplicationPad2d::ReplicationPad2d(std::vector<int64_t> p) : PadModule("ReplicationPad2d", 2, p, "replicate") {}
ReplicationPad3d::ReplicationPad3d(std::vector<int64_t> p) : PadModule("ReplicationPad3d", 3, p, "replicate") {}

Upsample::Upsample(InterpolateOptions o) : Upsample("Upsample", std::move(o)) {}
Upsample::Upsample(std::string name, InterpolateOptions o) : options(std::move(o)), name_(std::move(name)) {
  require(options.size().empty() != options.scale_factor().empty(),
          name_ + ": give either size or scale_factor, not both");
}

Tensor Upsample::forward(const Tensor& x) {
  const auto named = scope();
  if (!x.defined()) throw ShapeError(describe() + ": input is undefined");
  return interpolate(x, options);
}

std::string Upsample::type_name() const { return name_ + "(mode='" + options.mode() + "')"; }

UpsamplingNearest2d::UpsamplingNearest2d(std::vector<int64_t> size, std::vector<double> scale_factor)
    : Upsample("UpsamplingNearest2d",
               InterpolateOptions().size(std::move(size)).scale_factor(std::move(scale_factor)).mode("nearest")) {}

UpsamplingBilinear2d::UpsamplingBilinear2d(std::vector<int64_t> size, std::vector<double> scale_factor)
    : Upsample("UpsamplingBilinear2d", InterpolateOptions()
                                           .size(std::move(size))
                                           .scale_factor(std::move(scale_factor))
                                           .mode("bilinear")
                                           .align_corners(true)) {}

PixelShuffle::PixelShuffle(int64_t r) : r_(r) {
  require(r >= 1, fmt::format("PixelShuffle: upscale_factor {}: expected >= 1", r));
}
Tensor PixelShuffle::forward(const Tensor& x) {
  const auto named = scope();
  return pixel_shuffle(x, r_);
}
std::string PixelShuffle::type_name() const { return "PixelShuffle(upscale_factor=" + std::to_string(r_) + ")"; }

PixelUnshuffle::PixelUnshuffle(int64_t r) : r_(r) {
  require(r >= 1, fmt::format("PixelUnshuffle: downscale_factor {}: expected >= 1", r));
}
Tensor PixelUnshuffle::forward(const Tensor& x) {
  const auto named = scope();
  return pixel_unshuffle(x, r_);
}
std::string PixelUnshuffle::type_name() const {
  return "PixelUnshuffle(downscale_factor=" + std::to_string(r_) + ")";
}

ChannelShuffle::ChannelShuffle(int64_t groups) : groups_(groups) {
  require(groups >= 1, fmt::format("ChannelShuffle: groups {}: expected >= 1", groups));
}
Tensor ChannelShuffle::forward(const Tensor& x) {
  const auto named = scope();
  return channel_shuffle(x, groups_);
}
std::string ChannelShuffle::type_name() const { return "ChannelShuffle(groups=" + std::to_string(groups_) + ")"; }

}  // namespace xg::nn
