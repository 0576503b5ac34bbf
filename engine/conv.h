// xg::engine convolutions: 2-D convolutions of NCHW images on oneDNN's
// convolution primitives (forward, backward-data, backward-weights), float32,
// or bf16 inputs accumulating into float32. As with products, one call runs
// on the calling thread (xgrad's pool splits the batch) and its primitive is
// kept in the thread's cache. Tensors are NCHW unless a call says they are
// blocked (ConvBlocks), weights (O, C/groups, kh, kw), contiguous, as
// PyTorch stores them; what layout runs inside is conv_layout(). The OpenBLAS build has none of it (conv_available() is
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
// (format "any": nChw16c on AVX-512, nChw8c on AVX2), and an argument that
// comes in another layout (NCHW) is reordered into it, a result out of it
// (none of that for results kept blocked, set_blocked_activations below);
// plain: the primitives read and write NCHW directly; automatic (the
// default): plain for 1x1 kernels whose arguments come in NCHW, where the
// reorders cost more than the blocked kernels save, blocked otherwise.
// docs/performance.md, section Convolutions, has the measurements. Process-wide.
enum class ConvLayout { automatic, blocked, plain };
void set_conv_layout(ConvLayout layout);
ConvLayout conv_layout();

// Activations in oneDNN's blocked layout nChw{b}c: a float32 (N,C,H,W) tensor
// whose C is a multiple of b (8 or 16) stored image by image, in blocks of b
// channels, each position's b channels adjacent. What the blocked primitives
// read and write inside; a caller that keeps a layer's result in it spares
// the reorders out of it and into the next layer. Each field is the block of
// one argument, 0 for NCHW: x the input, y the output (and dy, its
// gradient), dx the input's gradient.
struct ConvBlocks {
  int x = 0;   // x, read by the forward and the weight gradient
  int y = 0;   // y written by the forward; dy read by both gradients
  int dx = 0;  // dx written by the data gradient
};
// The layouts the primitives of g use inside for each argument, given that x
// arrives in block x_block (0: NCHW): each field the block b where that is
// nChw{b}c, 0 where it is anything else. All 0 under ConvLayout::plain. Those
// of the float32 primitives, or with bf16_inputs those of the calls below
// that read bf16 (whose x and dy are bf16, y and dx float32: the blocks are
// the same in either type).
ConvBlocks conv_blocks(const ConvGeometry& g, int x_block, bool bf16_inputs = false);
// Whether convolutions keep their float32 results (those of bf16 inputs
// included) in the primitives' blocked layout for the next op (autograd's
// conv2d: on by default): ops that know
// the layout (elementwise ones, batch norm, the next convolution) read it as
// it is, and any other op's read converts it to NCHW first. Process-wide.
void set_blocked_activations(bool on);
bool blocked_activations();
// n images of c channels of h x w float32 values from nChw{block}c to NCHW, and back.
void unblock_activations(int block, int64_t n, int64_t c, int64_t h, int64_t w, const float* src, float* dst);
void block_activations(int block, int64_t n, int64_t c, int64_t h, int64_t w, const float* src, float* dst);

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

// The float32 calls take the layouts of their activations in `b` (all NCHW
// by default); an argument in another layout than the primitive's is
// reordered.
// y (N,O,Ho,Wo) = x (N,C,H,W) * w, plus bias (O) on every position when not null.
void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
                  ConvBlocks b = {});
// dx (N,C,H,W) from dy (N,O,Ho,Wo) and w: the gradient of the input (overwritten).
void conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx, ConvBlocks b = {});
// dw (O,C/groups,kh,kw) from x and dy, and db (O) the sums of dy over N, Ho,
// Wo when db is not null (both overwritten).
void conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                           ConvBlocks b = {});
// Both: conv_backward_data then conv_backward_weights, with dy reordered into
// the blocked layout once for the two.
void conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy, float* dx, float* dw,
                   float* db, ConvBlocks b = {});

// The same with bf16 inputs, accumulating and writing float32, the
// activations in the layouts `b` gives (a bf16 argument in nChw{b}c as a
// float32 one would be). Throw std::runtime_error with bf16_refusal() when
// that is not empty; on the widened route (bf16_route(), emulation among
// its cases) they widen their inputs to float32, exactly, and run the
// float32 primitives.
void conv_forward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const float* bias, float* y,
                  ConvBlocks b = {});
void conv_backward_data(const ConvGeometry& g, const bf16_t* dy, const bf16_t* w, float* dx, ConvBlocks b = {});
void conv_backward_weights(const ConvGeometry& g, const bf16_t* x, const bf16_t* dy, float* dw, float* db,
                           ConvBlocks b = {});
void conv_backward(const ConvGeometry& g, const bf16_t* x, const bf16_t* w, const bf16_t* dy, float* dx, float* dw,
                   float* db, ConvBlocks b = {});

}  // namespace xg::engine
