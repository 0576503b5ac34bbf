// Differentiable ops. Every op checks its inputs (in Release too) and throws
// xg::ShapeError naming the op, the shapes and what was expected. Binary
// elementwise ops broadcast like NumPy; mixed dtypes are an error.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/losses.h"  // the losses, cross_entropy among them
#include "autograd/options.h"
#include "autograd/tensor.h"
#include "autograd/window.h"  // the options of convolution and pooling

namespace xg {

// ---- elementwise, broadcasting ------------------------------------------

// a + b, a - b, a * b, a / b, a to the power b, the larger of a and b.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // d/db needs a > 0
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient to the larger (ties: a)

// Elementwise arithmetic, broadcasting like add(): a + b is add(a, b), -a is
// neg(a), and so on. With a double s the op runs on a alone (s is a
// constant: backward does no work for it).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(const Tensor& a, double s);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(const Tensor& a, double s);
Tensor operator/(double s, const Tensor& a);

// ---- elementwise, unary ---------------------------------------------------

// Elementwise functions of one tensor: -a, e^a, ln a, sqrt a, |a|, ...
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);  // gradient 0 at 0
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);  // exact (erf) form
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor clamp(const Tensor& a, double lo, double hi);  // gradient passes where lo <= a <= hi

// ---- activations (torch.nn.functional's names, arguments and defaults) ----
//
// Each is differentiable to any order. At a kink the gradient is PyTorch's
// choice, named on each line ("slope 0 at 0": the one-sided value used there).

Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);  // a > 0 ? a : slope a; slope at 0
Tensor hardtanh(const Tensor& a, double min_val = -1.0, double max_val = 1.0);  // clamp; slope 0 at both ends
Tensor relu6(const Tensor& a);  // hardtanh(a, 0, 6); slope 0 at 0 and 6
// a > 0 ? a : alpha (e^a - 1); slope alpha at 0.
Tensor elu(const Tensor& a, double alpha = 1.0);
// scale elu(a, alpha) with PyTorch's constants (scale 1.0507..., alpha 1.6732...).
Tensor selu(const Tensor& a);
// max(0, a) + min(0, alpha (e^(a/alpha) - 1)); alpha != 0; slope 1 at 0.
Tensor celu(const Tensor& a, double alpha = 1.0);
Tensor silu(const Tensor& a);   // a sigmoid(a) (swish)
Tensor mish(const Tensor& a);   // a tanh(ln(1 + e^a))
Tensor hardswish(const Tensor& a);    // a relu6(a + 3) / 6; slopes -1/2 at -3 and 3/2 at 3
Tensor hardsigmoid(const Tensor& a);  // relu6(a + 3) / 6; slope 0 at -3 and 3
// approximate "none": the exact (erf) form, as gelu(a); "tanh":
// a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) / 2. Anything else throws.
Tensor gelu(const Tensor& a, const std::string& approximate);
// ln(1 + e^(beta a)) / beta, and a itself where beta a > threshold; beta != 0.
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
Tensor softsign(const Tensor& a);    // a / (1 + |a|)
Tensor tanhshrink(const Tensor& a);  // a - tanh(a)
Tensor logsigmoid(const Tensor& a);  // ln sigmoid(a), stable for large |a|
// a - lambd above lambd, a + lambd below -lambd, else 0; lambd >= 0; slope 0 at +-lambd.
Tensor softshrink(const Tensor& a, double lambd = 0.5);
// a outside [-lambd, lambd], else 0; lambd >= 0; slope 0 at +-lambd.
Tensor hardshrink(const Tensor& a, double lambd = 0.5);
// a > threshold ? a : value; slope 0 at the threshold (torch.nn.functional.threshold).
Tensor threshold(const Tensor& a, double threshold, double value);
Tensor log1p(const Tensor& a);  // ln(1 + a), accurate for small a
Tensor expm1(const Tensor& a);  // e^a - 1, accurate for small a
// softmax(-a, dim): torch.nn.functional.softmin.
Tensor softmin(const Tensor& a, int64_t dim);
// The first half of `dim` times the sigmoid of the second (dim's size must be even).
Tensor glu(const Tensor& a, int64_t dim = -1);
// a > 0 ? a : w a, with w (1) for every channel or (C) one per channel,
// channels at dimension 1 (a of rank 0 or 1 takes a single w).
Tensor prelu(const Tensor& a, const Tensor& weight);
// Randomised leaky ReLU: in training each negative element gets its own
// slope drawn from U[lower, upper) with `gen` (null: default_generator()); otherwise the
// slope (lower + upper) / 2. lower <= upper.
Tensor rrelu(const Tensor& a, double lower = 1.0 / 8, double upper = 1.0 / 3, bool training = false,
             Generator* gen = nullptr);

// ---- comparisons: masks (not differentiable) ------------------------------
//
// 1 where the relation holds, else 0, in a's dtype, broadcasting like add()
// (xgrad has no bool dtype: a mask is a tensor of zeros and ones, which
// where() and masked_fill() take). Any dtype, int64 included; a and b must
// share it. With a double the other side is that scalar.
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);

// ---- reductions (axes may be negative; empty axes = all) ------------------

// Sum, mean and maximum over `axes` (negative ones count from the end;
// none: every axis); keepdims keeps them as dimensions of size 1.
Tensor sum(const Tensor& a, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor max(const Tensor& a, const std::vector<int64_t>& axes = {}, bool keepdims = false);  // grad to the first arg-max
// torch.var and torch.std in PyTorch's order: the sum of squared deviations
// divided by n - correction (1, the default, is unbiased: torch's
// unbiased=True; 0 divides by n). correction >= 0 and below n. Call std
// as xg::std (as LibTorch's torch::std): alone, the name is the standard
// library's namespace.
Tensor var(const Tensor& a, const std::vector<int64_t>& axes = {}, int64_t correction = 1, bool keepdims = false);
Tensor std(const Tensor& a, const std::vector<int64_t>& axes = {}, int64_t correction = 1, bool keepdims = false);
// torch.linalg.vector_norm: (sum |a|^ord)^(1/ord) over `axes` (none: every
// axis); ord > 0, or infinity for the largest |a|. The gradient at a zero
// vector is 0, as PyTorch's.
Tensor vector_norm(const Tensor& a, double ord = 2.0, const std::vector<int64_t>& axes = {}, bool keepdims = false);
// Index of the largest element along `axis` (not differentiable); shape = a's without that axis.
std::vector<int64_t> argmax(const Tensor& a, int64_t axis = -1);

// ---- shape ---------------------------------------------------------------

// Values moved or repeated, not computed: gradients go back to where the
// values came from (summed where a value was repeated).
Tensor reshape(const Tensor& a, const Shape& shape);  // one dimension may be -1
Tensor permute(const Tensor& a, const std::vector<int64_t>& perm);
Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1);
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step = 1);  // python-style bounds
// slice(a, axis, 0, like.size(like_axis)): as many leading positions of `a`
// as `like` has on like_axis (a positional table cut to a sequence's
// length). An export trace records the length as read from `like`, so that
// the graph follows it at run time where slice would hold a constant.
Tensor slice_like(const Tensor& a, int64_t axis, const Tensor& like, int64_t like_axis);
Tensor concat(const std::vector<Tensor>& ts, int64_t axis);
Tensor stack(const std::vector<Tensor>& ts, int64_t axis);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t axis);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis);  // equal parts
Tensor unsqueeze(const Tensor& a, int64_t axis);
Tensor squeeze(const Tensor& a, int64_t axis);  // the axis must have size 1
Tensor broadcast_to(const Tensor& a, const Shape& shape);
// a repeated along `axis` (where it has size 1) as many times as `like` has
// on like_axis: a class token (1,1,C) for each image of a batch. An export
// trace records that size as read from `like` (as slice_like), so that the
// graph follows the batch at run time.
Tensor broadcast_like(const Tensor& a, int64_t axis, const Tensor& like, int64_t like_axis);
// Dimensions start_dim..end_dim (negative ones count from the end) merged
// into one (torch.flatten; the default start_dim 1 keeps the batch, as
// nn.Flatten); unflatten splits dimension `dim` into `sizes`
// (one of them may be -1), their product its size (torch.unflatten).
Tensor flatten(const Tensor& a, int64_t start_dim = 1, int64_t end_dim = -1);
Tensor unflatten(const Tensor& a, int64_t dim, const Shape& sizes);

// ---- padding, resampling, rearranging (torch.nn.functional's) -------------

// torch.nn.functional.pad: `pads` holds (before, after) pairs, the last
// dimension's first; mode "constant" (filled with `value`; a negative pad
// crops), "reflect", "replicate" or "circular" (the last 1 to 3 dimensions of
// an input with one more).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
           double value = 0.0);

// The options of interpolate (and nn::Upsample): the output size, or a
// scale factor, per spatial dimension (one value: every dimension).
struct InterpolateOptions {
  InterpolateOptions() = default;
  XG_ARG(std::vector<int64_t>, size);         // the output's spatial size, or empty
  XG_ARG(std::vector<double>, scale_factor);  // or the factor: size floor(in * factor)
  // nearest, nearest-exact, linear (N,C,L), bilinear or bicubic (N,C,H,W), trilinear (N,C,D,H,W), area
  XG_ARG(std::string, mode) = "nearest";
  XG_ARG(bool, align_corners) = false;  // the corner pixels' centres aligned (linear modes only)
  // the coordinates follow in/out instead of the scale factor given
  XG_ARG(bool, recompute_scale_factor) = false;
};
// torch.nn.functional.interpolate on (N,C,L), (N,C,H,W) or (N,C,D,H,W), with
// PyTorch 1.13's source coordinates, clamping and bicubic kernel (A = -0.75).
Tensor interpolate(const Tensor& x, const InterpolateOptions& o);
// (*, C r^2, H, W) <-> (*, C, H r, W r) (torch.nn.functional.pixel_shuffle, pixel_unshuffle).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// (N,C,*): the C channels in `groups` groups, interleaved (torch.nn.functional.channel_shuffle).
Tensor channel_shuffle(const Tensor& x, int64_t groups);

// ---- linear algebra (engine/gemm.h: oneDNN or OpenBLAS) ---------------------

// (..., M, K) x (..., K, N) -> (..., M, N); batch dimensions broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (..., I) times w (O, I) transposed, plus b (O) if defined: (..., O).
// The fused form of a dense layer: no transpose is materialised.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---- convolution (sequences N, C, L; images N, C, H, W; volumes N, C, D, H, W)

// The windows' options (Conv2dFuncOptions, MaxPool2dOptions, ...) are in
// autograd/window.h, in LibTorch's form.

// (N,C,H,W) -> (N, C kh kw, Ho Wo): each output position's window as a
// column (torch.nn.functional.unfold), zeros where it covers padding.
Tensor unfold2d(const Tensor& x, const UnfoldOptions& o);
// The adjoint of unfold2d: columns (N, C kh kw, L) summed back into an
// (N, C, *output_size) image (torch.nn.functional.fold).
Tensor fold2d(const Tensor& cols, const FoldOptions& o);
// (N,C,H,W) * weight (O, C/groups, kh, kw) [+ bias (O,)] -> (N,O,Ho,Wo), as
// torch.nn.functional.conv2d (groups == C == O is a depthwise convolution);
// gradients of any order.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dFuncOptions& o = {});
// (N,C,L) * weight (O, C/groups, k) [+ bias (O,)] -> (N,O,Lo): conv2d on an
// image of height 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv1dFuncOptions& o = {});
// torch.nn.functional.conv3d: (N,C,D,H,W) * weight (O, C/groups, kd, kh, kw)
// [+ bias (O)]; each output depth a sum of conv2d's over the kernel's depth.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv3dFuncOptions& o = {});
// (N,C,H,W) with weight (C, O/groups, kh, kw) [+ bias (O,)] -> (N,O,Ho,Wo),
// Ho = (H-1) stride - 2 padding + dilation (kh-1) + output_padding + 1: the
// gradient of conv2d with respect to its input (fold2d of the weight's
// columns), as torch.nn.functional.conv_transpose2d.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose2dFuncOptions& o = {});
// (N,C,L) with weight (C, O/groups, k) [+ bias (O,)] -> (N,O,Lo):
// conv_transpose2d on a height of 1 (torch.nn.functional.conv_transpose1d).
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose1dFuncOptions& o = {});
// (N,C,D,H,W) with weight (C, O/groups, kd, kh, kw) [+ bias (O,)] ->
// (N,O,Do,Ho,Wo): conv_transpose2d's of each input depth through each
// kernel depth, summed where they land (torch.nn.functional.conv_transpose3d).
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose3dFuncOptions& o = {});

// ---- pooling (N, C, then 1 to 3 spatial axes, as PyTorch writes them) -------

// The largest value of each window and where it is: `indices` (int64, the
// values' shape) holds its flat position h * W + w in its (n, c) plane, the
// first one on ties (torch's max_pool2d(..., return_indices=True)).
struct MaxPool2dResult {
  Tensor values;   // (N,C,Ho,Wo), each window's maximum
  Tensor indices;  // (N,C,Ho,Wo) int64, where each maximum is in its (n, c) plane
};
// (N,C,H,W) -> (N,C,Ho,Wo), each window's maximum; the gradient goes to the
// arg-max (the first on ties), gradients of any order.
Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& o);
MaxPool2dResult max_pool2d_with_indices(const Tensor& x, const MaxPool2dOptions& o);
// (N,C,H,W) -> (N,C,Ho,Wo), each window's mean (torch.nn.functional.avg_pool2d).
Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& o);
// (N,C,H,W) -> (N,C,Ho,Wo): output row i averages input rows
// [floor(i H / Ho), ceil((i+1) H / Ho)), columns alike
// (torch.nn.functional.adaptive_avg_pool2d).
Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size);

// 1-D pooling on (N,C,L), the 2-D ops on a height of 1; adaptive max
// pooling (each output the largest of its adaptive window: rows
// [floor(i H / Ho), ceil((i+1) H / Ho))); power-average pooling, (sum of x^p
// over the window)^(1/p) as PyTorch computes it (a negative sum, odd p,
// clamped to 0).
Tensor avg_pool1d(const Tensor& x, const AvgPool1dOptions& o);
Tensor max_pool1d(const Tensor& x, const MaxPool1dOptions& o);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_max_pool2d(const Tensor& x, ExpandingArray<2> output_size);
Tensor lp_pool1d(const Tensor& x, const LPPool1dOptions& o);
Tensor lp_pool2d(const Tensor& x, const LPPool2dOptions& o);
// 3-D pooling on (N,C,D,H,W): each a 2-D pooling of (H, W) followed by a
// 1-D one of D (a box's mean or maximum is that of its slices').
Tensor avg_pool3d(const Tensor& x, const AvgPool3dOptions& o);
Tensor max_pool3d(const Tensor& x, const MaxPool3dOptions& o);
Tensor adaptive_avg_pool3d(const Tensor& x, ExpandingArray<3> output_size);
Tensor adaptive_max_pool3d(const Tensor& x, ExpandingArray<3> output_size);
// Fractional max pooling (Graham, 2014), torch.nn.functional's
// fractional_max_pool2d/3d: a kernel_size window at pseudo-random starts
// that cover the input in output_size steps (or int(size * output_ratio),
// each ratio in (0, 1)). _random_samples, (N, C, D) in [0, 1) as PyTorch's
// (unbatched: (1, C, D)), place the windows; undefined, they are drawn from
// the generator (null: default_generator()). The gradient goes to each
// window's arg-max (the first on ties), to any order. No ONNX mapping: the
// windows depend on the samples, which ONNX has no operator for.
template <size_t D>
struct FractionalMaxPoolOptions {
  FractionalMaxPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: 3 is (3, 3)
  XG_ARG(ExpandingArray<D>, kernel_size);                                                 // at least 1
  XG_ARG(Tensor, _random_samples);  // (N, C, D) in [0, 1), or undefined: drawn

 public:
  // The output's size (output_size + kernel_size - 1 <= the input's), or
  // its ratio to the input's; exactly one of the two.
  FractionalMaxPoolOptions& output_size(ExpandingArray<D> s) { return output_size_ = s, has_size_ = true, *this; }
  FractionalMaxPoolOptions& output_ratio(std::array<double, D> r) { return ratio_ = r, has_ratio_ = true, *this; }
  FractionalMaxPoolOptions& output_ratio(double r) { return ratio_.fill(r), has_ratio_ = true, *this; }
  bool has_output_size() const { return has_size_; }                     // output_size was set
  bool has_output_ratio() const { return has_ratio_; }                   // output_ratio was set
  const ExpandingArray<D>& output_size() const { return output_size_; }  // as set (1 if not)
  const std::array<double, D>& output_ratio() const { return ratio_; }   // as set (0 if not)

 private:
  ExpandingArray<D> output_size_ = 1;
  std::array<double, D> ratio_{};
  bool has_size_ = false, has_ratio_ = false;
};
using FractionalMaxPool2dOptions = FractionalMaxPoolOptions<2>;  // fractional_max_pool2d's and the module's
using FractionalMaxPool3dOptions = FractionalMaxPoolOptions<3>;  // fractional_max_pool3d's and the module's
// (N,C,H,W) or (C,H,W) -> (N,C,Ho,Wo); indices as max_pool2d_with_indices'.
Tensor fractional_max_pool2d(const Tensor& x, const FractionalMaxPool2dOptions& o, Generator* gen = nullptr);
MaxPool2dResult fractional_max_pool2d_with_indices(const Tensor& x, const FractionalMaxPool2dOptions& o,
                                                   Generator* gen = nullptr);
// (N,C,T,H,W) or (C,T,H,W) -> (N,C,To,Ho,Wo); indices t * H * W + h * W + w.
Tensor fractional_max_pool3d(const Tensor& x, const FractionalMaxPool3dOptions& o, Generator* gen = nullptr);
MaxPool2dResult fractional_max_pool3d_with_indices(const Tensor& x, const FractionalMaxPool3dOptions& o,
                                                   Generator* gen = nullptr);
// torch.nn.functional.local_response_norm: x / (k + alpha/size * the sum of
// x^2 over `size` neighbouring channels)^beta, on (N,C,...).
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

// ---- normalisation over batches and groups (N, C, ...) ------------------------

// torch.nn.functional.batch_norm. x is (N,C), (N,C,L) or (N,C,H,W);
// running_mean, running_var, weight and bias are (C) or undefined.
// training: normalises with the batch's mean and biased variance per channel
// and, when the running statistics are defined, updates them in place
// without the tape: r = (1 - momentum) r + momentum b, with b the batch's
// mean and UNBIASED variance. Otherwise normalises with the running
// statistics (which must then be defined). eps > 0, momentum in [0, 1].
// `across`, when given, sums a tensor over every process, differentiably
// (dist::all_sum): the batch is then the union of the processes' batches
// (PyTorch's SyncBatchNorm), its sums and count taken through `across`.
// float32 without `across` runs one fused op (two passes forward, two
// backward, in parallel over images and channels, on NCHW or on a convolution's
// blocked result as it is); the rest is composed from ops.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  const std::function<Tensor(const Tensor&)>& across = {});
// relu(batch_norm(...)) with the same arguments, the relu folded into
// batch_norm's fused float32 passes (its backward recomputes the relu's mask
// from x and keeps no tensor more than batch_norm); elsewhere the two ops.
// An xgrad extension (PyTorch has no such function): a convolution network's
// `relu(bn(x))` in one op, as nn::BatchNorm2d::forward_relu calls it.
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                       const std::function<Tensor(const Tensor&)>& across = {});
// torch.nn.functional.group_norm: x (N,C,...) with its C channels in
// `groups` groups (groups divides C), each (n, group) normalised with its
// mean and biased variance; then weight and bias (C), either undefined.
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

// torch.nn.functional.max_unpool1d/2d/3d: x (N,C,*) placed at `indices`
// (int64, x's shape: each value's flat position in its (n, c) plane of the
// output, as max_pool2d_with_indices gives them) in zeros (N, C,
// *output_size); a repeated index adds up.
Tensor max_unpool(const Tensor& x, const Tensor& indices, const Shape& output_size);
// torch.nn.CrossMapLRN2d's normalisation of (N,C,H,W): x / (k + alpha/size *
// the sum of x^2 over a window of channels)^beta, its windows built as
// PyTorch's legacy code builds them (channel 0 stays in every window from
// channel (size-1)/2 + 1 on).
Tensor cross_map_lrn2d(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
// torch.nn.functional.embedding_bag: rows of weight (V, C) picked by int64
// ids, (B, L) bags or (N) split at `offsets` (B) (plus the end when
// include_last_offset), reduced per bag by mode "sum" (times
// per_sample_weights, the ids' shape), "mean" or "max"; ids equal to
// padding_idx (none by default; in [-V, V), a negative one counting from the
// end, as PyTorch's) count for nothing; an empty bag is zeros -> (B, C).
Tensor embedding_bag(const Tensor& ids, const Tensor& weight, const Tensor& offsets = Tensor(),
                     const std::string& mode = "mean", const Tensor& per_sample_weights = Tensor(),
                     bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt);

// torch.nn.functional.instance_norm with the input's statistics: each (n, c)
// of x (N,C,...) normalised over its spatial axes (biased variance), then
// weight and bias (C), either undefined.
Tensor instance_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                     double eps = 1e-5);
// torch.nn.functional.bilinear: y[..., o] = x1[..., :] W[o] x2[..., :] + b[o],
// x1 (..., I1), x2 (..., I2), weight (O, I1, I2), bias (O) or undefined.
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = Tensor());
// torch.nn.functional's channel dropouts: whole channels of (N,C,L),
// (N,C,H,W) or (N,C,D,H,W) (or unbatched (C,...)) zeroed with probability p,
// the rest scaled by 1/(1-p); and the alpha dropouts of SELU networks (a
// dropped value set to SELU's negative saturation, then the affine map that
// keeps mean and variance), per element or per channel. The input itself
// when not training or p == 0; training draws from `gen` (null:
// default_generator()). p in [0, 1].
Tensor dropout1d(const Tensor& x, double p, bool training, Generator* gen);
Tensor dropout2d(const Tensor& x, double p, bool training, Generator* gen);
Tensor dropout3d(const Tensor& x, double p, bool training, Generator* gen);
Tensor alpha_dropout(const Tensor& x, double p, bool training, Generator* gen);
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, Generator* gen);

// ---- indexing --------------------------------------------------------------

// Rows of `table` (V, C) picked by ids of shape ids_shape: (ids_shape..., C).
// Throws std::out_of_range-like ShapeError on an id outside [0, V).
Tensor gather_rows(const Tensor& table, const std::vector<int64_t>& ids, const Shape& ids_shape);
// The same with the ids in an int64 tensor of any shape (a float tensor is an error).
Tensor gather_rows(const Tensor& table, const Tensor& ids);
// Slices of `a` along `axis` picked by a 1-D int64 `index` (entries in
// [0, a.size(axis)), repeats allowed): the axis gets index's length
// (torch.index_select). Gradients of repeated slices add up.
Tensor index_select(const Tensor& a, int64_t axis, const Tensor& index);
// cond != 0 ? a : b, all three broadcast together (cond gets no gradient).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// a where mask == 0, `value` where mask != 0; mask broadcasts to a's shape.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

// ---- fused, numerically stable ---------------------------------------------

// Softmax and log-softmax along `axis` (the maximum subtracted first).
Tensor softmax(const Tensor& a, int64_t axis = -1);
Tensor log_softmax(const Tensor& a, int64_t axis = -1);
// Normalises over the last dimension; weight and bias (C) may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// layer_norm(x + residual) in one pass: the sum is never stored (a
// post-norm block's norm(x + f(x))); x and residual must have one shape.
Tensor add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                      double eps = 1e-5);
// The mean cross-entropy of linear(x, weight, bias) (..., V), classes last,
// against one target per row, with ignore_index and label_smoothing as
// CrossEntropyLossOptions has them, in one op: x (..., C), weight (V, C), bias (V) or
// undefined. The logits are computed in chunks of rows (at most 4 MiB each)
// and never held whole; backward computes each chunk again from x and the
// row's saved log-sum-exp. Under Autocast(bf16) its products run in bf16.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const std::vector<int64_t>& targets, int64_t ignore_index = -100,
                            double label_smoothing = 0.0);
// Inverted dropout: zeros with probability p, scales the rest by 1/(1-p).
// Identity (the same tensor) when p == 0 or !training.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// The same drawing from default_generator(), as F.dropout(x, p, training).
inline Tensor dropout(const Tensor& x, double p = 0.5, bool training = true) {
  return dropout(x, p, training, default_generator());
}
// dropout(relu(x), p, training, gen) in one pass, with the same mask. Backward
// needs only where the output is nonzero (x > 0 and kept): it saves one bit
// per element, so the feed-forward block keeps no (.., F) float32 tensor of
// its own (the next product keeps the output, or under Autocast(bf16) only
// its bf16 copy).
Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& gen);

// The cell of recurrence(): torch.nn.RNN's tanh or ReLU, LSTM (gates i, f,
// g, o), GRU (gates r, z, n).
enum class RecurrentCell { tanh, relu, lstm, gru };
// One direction of one recurrent layer over all T steps, as one op (what
// nn::RNN, nn::LSTM and nn::GRU run): per step one product h W_hh^T and the
// cell's gates in one pass; in backward one product per step and the
// weight's gradient as one product over all steps. G gates (4 LSTM, 3 GRU, 1).
//   proj (B,T,G*H): every step's input products x W_ih^T + b_ih
//   w_hh (G*H,H), b_hh (G*H) or undefined; h0 (B,H); c0 (B,H) for the LSTM only
//   lengths: empty, or each row's steps (1..T); past its length a row's state
//   is carried unchanged. reverse: the steps run from T-1 down to 0.
// Returns the state after each step (B,T,H), or (B,T,2H) [h | c] for the
// LSTM; the last state is at T-1 (at 0 when reverse), with or without lengths.
// Under Autocast(bf16) the products run in bf16; the gates in float32.
// Errors name the argument, its shape and the expected one.
Tensor recurrence(RecurrentCell cell, const Tensor& proj, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                  const Tensor& c0, const std::vector<int64_t>& lengths, bool reverse);
// One direction of one recurrent layer on its input, as nn's layers and
// cells run it: proj = linear(x, w_ih, b_ih), recurrence() on it, and the
// results a layer returns. An export trace lists it as one op,
// "recurrent_layer", and h_n, c_n as
// "recurrent_state" of it, so that no per-step internals reach the graph.
//   x (B,T,C), w_ih (G*H,C), b_ih (G*H) or undefined; w_hh, b_hh as recurrence();
//   h0 (B,H), c0 (B,H) (LSTM): undefined means zeros
struct RecurrentLayerResult {
  Tensor output;  // (B,T,H): the state after each step, zero past a row's length
  Tensor h_n;     // (B,H): each row's last state (at its own length)
  Tensor c_n;     // (B,H): the LSTM's last cell state; undefined for the others
};
// traced_lengths: undefined, or the same lengths as a (B) tensor computed by
// ops from the graph's inputs (id_mask, sum), which an export trace reads
// them from instead of a constant of the traced batch.
RecurrentLayerResult recurrent_layer(RecurrentCell cell, const Tensor& x, const Tensor& w_ih, const Tensor& b_ih,
                                     const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0, const Tensor& c0,
                                     const std::vector<int64_t>& lengths, bool reverse,
                                     const Tensor& traced_lengths = Tensor());

// 1 where ids (int64, any shape) equal `id`, else 0, in `dtype`: a padding
// mask. No gradient (ids have none); traced as one op.
Tensor id_mask(const Tensor& ids, int64_t id, Dtype dtype = Dtype::f32);

// What attention() keeps for backward. automatic: the (B,H,T,S) weights
// when they take at most 64 MiB, else as recompute. keep_weights: always the
// weights. recompute: each row's max and 1/sum only (B,H,T,2), the scores
// computed again in backward, head by head in runs of at most 16 MiB of
// scratch: memory linear in T and S, for one more product per head.
enum class AttentionMemory { automatic, keep_weights, recompute };

// The heads, masks, dropout and key/value cache of attention(). Masked
// scores are set to -1e9, so a query whose keys are all masked gets uniform
// weights (no NaN).
struct AttentionOptions {
  int64_t heads = 1;        // H, which must divide C = H*D
  double scale = 0;         // 0: 1/sqrt(D)
  Tensor key_padding_mask;  // (B,S), nonzero: a key no query sees
  bool causal = false;      // query i sees keys j <= i only
  double dropout = 0;          // on the weights, in [0, 1); needs gen when > 0.
  Generator* gen = nullptr;    // one draw per call keys the dropout hash (as dropout())
  Tensor* weights = nullptr;   // if set, receives the (B,H,T,S) weights before dropout (no history)
  // > 0: k and v are (B,Smax,C) buffers of which only the first kv_length
  // positions are keys (a preallocated key/value cache); S = kv_length. The
  // gradients of k and v are zero past it.
  int64_t kv_length = 0;
  AttentionMemory memory = AttentionMemory::automatic;  // what backward keeps (weights requested: always kept)
};
// Multi-head scaled dot-product attention, fused. For every batch row b and
// head h: softmax(scale * q_bh k_bh^T + masks) v_bh, where q_bh is the (T,D)
// block of columns [h*D, (h+1)*D) of q (B,T,H*D), and k_bh, v_bh the same of
// k, v (B,S,H*D). Returns (B,T,H*D): heads are read and written in place
// (BLAS leading dimensions), never permuted into copies. Saves q, k, v and
// the (B,H,T,S) weights for backward, or instead of the weights their rows'
// statistics (AttentionOptions::memory). Under Autocast(bf16), when recorded
// for backward, the products read bf16 copies of q, k, v and of the weights,
// softmax stays float32 (as torch.autocast runs bmm and softmax), and
// backward keeps the bf16 copies; without a tape the core runs in float32.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts);

}  // namespace xg
