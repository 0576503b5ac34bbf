// Private to engine/: the CPU's features that choose a kernel, read once.
#pragma once

namespace xg::engine {

struct CpuFeatures {
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512bf16 = false;
};

// All false where the compiler cannot ask (not GCC or Clang on x86-64).
const CpuFeatures& cpu_features();

// The functions that run where all three of CpuFeatures are true.
#if defined(__GNUC__) && defined(__x86_64__)
#define XG_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#endif

}  // namespace xg::engine
