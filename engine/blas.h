// Private to engine/: the OpenBLAS calls both builds use (float64 always,
// float32 for small products or in the OpenBLAS build).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "engine/gemm.h"

namespace xg::engine::blas {

// cblas_sgemm or cblas_dgemm (T float or double) with gemm.h's contract:
// row-major, beta 0 or 1 (check_beta), a bias copied into every row of C
// first (check_beta's rule), on one OpenBLAS thread.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, const T* bias = nullptr);

// A loop of gemm calls (OpenBLAS 0.3.21 has no batched API).
template <class T>
void gemm_batched(const Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < bt.n0; ++i)
    for (int64_t j = 0; j < bt.n1; ++j)
      gemm<T>(ta, tb, m, n, k, alpha, a + i * bt.sa0 + j * bt.sa1, lda, b + i * bt.sb0 + j * bt.sb1, ldb, beta,
              c + i * bt.sc0 + j * bt.sc1, ldc);
}

// The n bf16 values at x widened to float32 (exact) into the calling
// thread's buffer `slot` (0, 1 or 2), which the next call on that slot
// overwrites: the operands of the widened route (bf16_route()).
float* widened_into(int slot, const bf16_t* x, int64_t n);

// gemm_bf16_batched's widened route (bf16_route()): each operand's span
// widened to float32 once, into a buffer of the calling thread, then the
// float32 products of this build on the same layout.
void gemm_bf16_widened(const Batch& bt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const bf16_t* a, int64_t lda, const bf16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
                       const float* bias = nullptr);

std::string version();  // "OpenBLAS 0.3.21"

// Throws std::invalid_argument unless beta is 0 or 1, and, when there is a
// bias, alpha 1 and beta 0 (gemm.h's contract; the two leaves, OpenBLAS and
// oneDNN, both check it, so every build and size does).
void check_beta(double beta, bool bias = false, double alpha = 1);

// C's m rows of n (row stride ldc) set to the bias: what a product with a
// bias starts from where the bias is not added inside it.
template <class T>
void fill_rows(const T* bias, int64_t m, int64_t n, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, bias, static_cast<size_t>(n) * sizeof(T));
}

// Below this many multiply-adds a oneDNN call costs more than the product.
constexpr int64_t kSmallProduct = 48 * 48 * 48;

// True when OpenBLAS runs kernels without FMA on a CPU that has AVX2 and
// FMA: its fallback for a CPU model it does not know (OpenBLAS 0.3.21 picks
// Prescott's SSE3 kernels on Intel family 6 model 207). Their sums round
// each product, unlike oneDNN's and every FMA kernel's, so the oneDNN build
// then sends small float32 products to oneDNN too.
bool generic_core();

}  // namespace xg::engine::blas
