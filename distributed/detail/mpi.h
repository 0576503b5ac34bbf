// Private to distributed/*.cpp: MPI itself and the helpers its calls share.
#pragma once

#ifdef XG_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <climits>

#include "autograd/tensor.h"

namespace xg::dist {

// Throws MpiError naming `call` and MPI's description of `rc` unless MPI_SUCCESS.
void check_mpi(int rc, const char* call);
MPI_Datatype mpi_type(Dtype d);
// MPI was initialised with MPI_THREAD_MULTIPLE: a library thread (such as
// DataParallel's progress thread) may call it beside the user's.
bool thread_multiple();
// MPI counts are int: longer buffers go in pieces of at most this many elements.
inline constexpr int64_t kMaxCount = INT_MAX / 2;

// call(pointer, count) over `total` elements of `elem` bytes from `base`, in
// pieces of at most kMaxCount elements.
template <class F>
void for_each_piece(void* base, int64_t total, int64_t elem, F call) {
  char* p = static_cast<char*>(base);
  for (int64_t at = 0; at < total; at += kMaxCount)
    call(static_cast<void*>(p + at * elem), static_cast<int>(std::min<int64_t>(kMaxCount, total - at)));
}

// The same over t's values.
template <class F>
void for_each_piece(Tensor& t, F call) {
  void* p = t.dtype() == Dtype::f32   ? static_cast<void*>(t.data<float>())
            : t.dtype() == Dtype::i64 ? static_cast<void*>(t.data<int64_t>())
                                      : static_cast<void*>(t.data<double>());
  for_each_piece(p, t.numel(), t.dtype() == Dtype::f32 ? 4 : 8, call);
}

}  // namespace xg::dist
#endif
