// The OpenBLAS build (-DXG_GEMM=openblas): float32 on cblas_sgemm; bf16 only
// emulated (set_bf16_emulation).
#include <stdexcept>
#include <string>

#include "engine/blas.h"
#include "engine/conv.h"
#include "engine/gemm.h"

namespace xg::engine {

std::string f32_engine() { return blas::version(); }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  blas::gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

void gemm_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  blas::gemm_batched<float>(batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string bf16_unsupported_reason() {
  return "bf16 products need the oneDNN matrix engine, and this xgrad was configured with -DXG_GEMM=openblas "
         "(reconfigure with -DXG_GEMM=onednn)";
}

// Emulated only (set_bf16_emulation).
void gemm_bf16_batched(const Batch& batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       const float* bias) {
  if (const std::string why = bf16_refusal(); !why.empty()) throw std::runtime_error(why);
  blas::gemm_bf16_widened(batch, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

CacheStats cache_stats() { return {}; }

// No convolution primitives here: autograd runs its im2col path (conv_available()).
bool conv_available() { return false; }
void set_conv_layout(ConvLayout) {}
ConvLayout conv_layout() { return ConvLayout::automatic; }

namespace {
[[noreturn]] void no_conv(const char* fn) {
  throw std::logic_error(std::string("engine::") + fn +
                         ": this xgrad was configured with -DXG_GEMM=openblas, which has no convolution primitives "
                         "(check engine::conv_available())");
}
}  // namespace

ConvKernels conv_kernels(const ConvGeometry&) { no_conv("conv_kernels"); }
ConvBlocks conv_blocks(const ConvGeometry&, int, bool) { no_conv("conv_blocks"); }
void set_blocked_activations(bool) {}
bool blocked_activations() { return false; }
void unblock_activations(int, int64_t, int64_t, int64_t, int64_t, const float*, float*) {
  no_conv("unblock_activations");
}
void block_activations(int, int64_t, int64_t, int64_t, int64_t, const float*, float*) { no_conv("block_activations"); }
void conv_forward(const ConvGeometry&, const float*, const float*, const float*, float*, ConvBlocks) {
  no_conv("conv_forward");
}
void conv_backward_data(const ConvGeometry&, const float*, const float*, float*, ConvBlocks) {
  no_conv("conv_backward_data");
}
void conv_backward_weights(const ConvGeometry&, const float*, const float*, float*, float*, ConvBlocks) {
  no_conv("conv_backward_weights");
}
void conv_forward(const ConvGeometry&, const bf16_t*, const bf16_t*, const float*, float*, ConvBlocks) {
  no_conv("conv_forward");
}
void conv_backward_data(const ConvGeometry&, const bf16_t*, const bf16_t*, float*, ConvBlocks) {
  no_conv("conv_backward_data");
}
void conv_backward_weights(const ConvGeometry&, const bf16_t*, const bf16_t*, float*, float*, ConvBlocks) {
  no_conv("conv_backward_weights");
}
void conv_backward(const ConvGeometry&, const float*, const float*, const float*, float*, float*, float*, ConvBlocks) {
  no_conv("conv_backward");
}
void conv_backward(const ConvGeometry&, const bf16_t*, const bf16_t*, const bf16_t*, float*, float*, float*,
                   ConvBlocks) {
  no_conv("conv_backward");
}

}  // namespace xg::engine
