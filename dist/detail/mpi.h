// Private to dist/*.cpp: MPI itself and the helpers its calls share.
#pragma once

#ifdef XG_HAVE_MPI
#include <mpi.h>

#include <climits>

#include "autograd/tensor.h"

namespace xg::dist {

// Throws MpiError naming `call` and MPI's description of `rc` unless MPI_SUCCESS.
void check_mpi(int rc, const char* call);
MPI_Datatype mpi_type(Dtype d);
// MPI counts are int: longer buffers go in pieces of at most this many elements.
inline constexpr int64_t kMaxCount = INT_MAX / 2;

}  // namespace xg::dist
#endif
