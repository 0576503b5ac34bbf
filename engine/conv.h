// xg::engine convolutions: 2-D convolutions of NCHW images on oneDNN's
// convolution primitives (forward, backward-data, backward-weights), float32,
// or bf16 inputs accumulating into float32. As with products, one call runs
// on the calling thread (xgrad's pool splits the batch) and its primitive is
// kept in the thread's cache. Tensors are NCHW, weights (O, C/groups, kh, kw),
// contiguous, as PyTorch stores them; what layout runs inside is
// conv_layout(). The OpenBLAS build has none of it (conv_available() is
// false; autograd then runs im2col). Light header: no oneDNN types here.
#pragma once

#include <cstdint>
#include <string>

#include "engine/gemm.h"

namespace xg::engine {

// One convolution's geometry. Dilation as PyTorch counts it (1: adjacent
// taps); padding on each side (top, left, bottom, right).
struct ConvGeometry {
  int64_t n = 0;       // images (N)
  int64_t c = 0;       // input channels (C)
  int64_t h = 0;       // input height (H)
  int64_t w = 0;       // input width (W)
  int64_t o = 0;       // output channels (O)
  int64_t kh = 0;      // kernel height
  int64_t kw = 0;      // kernel width
  int64_t groups = 1;  // channel groups (C and O divisible by it)
  int64_t sh = 1;      // stride along the height
  int64_t sw = 1;      // stride along the width
  int64_t dh = 1;      // dilation along the height
  int64_t dw = 1;      // dilation along the width
  int64_t pt = 0;      // zero rows above
  int64_t pl = 0;      // zero columns on the left
  int64_t pb = 0;      // zero rows below
  int64_t pr = 0;      // zero columns on the right
  int64_t ho = 0;      // output height (Ho)
  int64_t wo = 0;      // output width (Wo)
};

// Whether this build runs convolutions on oneDNN (the default build: true).
bool conv_available();

// How tensors are laid out inside the primitives. blocked: oneDNN chooses
// (format "any": channels in blocks of 16, nChw16c), and the NCHW tensors are
// reordered into and out of it on every call; plain: the primitives read and
// write NCHW directly; automatic (the default): plain for 1x1 kernels, where
// the reorders cost more than the blocked kernels save, blocked otherwise.
// docs/performance.md, section Convolutions, has the measurements. Process-wide.
enum class ConvLayout { automatic, blocked, plain };
void set_conv_layout(ConvLayout layout);
ConvLayout conv_layout();

// The oneDNN kernels of one convolution, as oneDNN names them
// ("jit_wino_4x3:avx512_core" for Winograd, "jit:avx512_core" for the direct
// kernels, "gemm:jit", ...).
struct ConvKernels {
  std::string forward;           // y from x and w
  std::string backward_data;     // dx from dy and w
  std::string backward_weights;  // dw and db from x and dy
};
// The kernels that run a float32 convolution of g with a bias in the current
// conv_layout(): the primitives the calls below run (created and cached here
// if they were not). The OpenBLAS build throws std::logic_error, as for every
// call below.
ConvKernels conv_kernels(const ConvGeometry& g);

// y (N,O,Ho,Wo) = x (N,C,H,W) * w, plus bias (O) on every position when not null.
void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y);
// dx (N,C,H,W) from dy (N,O,Ho,Wo) and w: the gradient of the input (overwritten).
void conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx);
// dw (O,C/groups,kh,kw) from x and dy, and db (O) the sums of dy over N, Ho,
// Wo when db is not null (both overwritten).
void conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db);
// Both: conv_backward_data then conv_backward_weights, with dy reordered into
// the blocked layout once for the two.
void conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy, float* dx, float* dw,
                   float* db);

// The same with bf16 inputs, accumulating and writing float32. Throw
// std::runtime_error with bf16_refusal() when that is not empty; emulated
// (bf16_emulated()) they widen their inputs to float32, exactly, and run the
// float32 primitives.
void conv_forward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const float* bias, float* y);
void conv_backward_data(const ConvGeometry& g, const bf16_t* dy, const bf16_t* w, float* dx);
void conv_backward_weights(const ConvGeometry& g, const bf16_t* x, const bf16_t* dy, float* dw, float* db);
void conv_backward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const bf16_t* dy, float* dx, float* dw,
                   float* db);

}  // namespace xg::engine
