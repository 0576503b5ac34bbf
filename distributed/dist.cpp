// xg::dist over MPI, or for a single process when built without it.
#include "distributed/dist.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "autograd/parallel.h"
#include "distributed/detail/mpi.h"

namespace xg::dist {

namespace {
bool g_alive = false;
int g_rank = 0, g_size = 1, g_local_rank = 0, g_local_size = 1;
bool g_cores_shared = false;  // another process on this host may run on one of our cores
}  // namespace

#ifdef XG_HAVE_MPI

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw MpiError(std::string(call) + " failed on rank " + std::to_string(g_rank) + ": " + std::string(text, len));
}

// int64 for buffers such as a batch norm's num_batches_tracked (broadcast with the rest).
MPI_Datatype mpi_type(Dtype d) { return d == Dtype::f32 ? MPI_FLOAT : d == Dtype::i64 ? MPI_INT64_T : MPI_DOUBLE; }

bool compiled_with_mpi() { return true; }

namespace {
bool g_mpi = false;  // this Environment initialised MPI (not a single process started directly)
bool g_thread_multiple = false;  // MPI provided MPI_THREAD_MULTIPLE
// Started by mpirun (or another MPI launcher)? A program started directly is
// one process: it does not start MPI at all (no singleton runtime, nothing
// for a leak checker to report in MPI's own allocations).
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}
}  // namespace

bool thread_multiple() { return g_mpi && g_thread_multiple; }

Environment::Environment(int* argc, char*** argv) : uncaught_(std::uncaught_exceptions()) {
  if (g_alive) throw std::logic_error("dist::Environment: MPI is already initialised by another Environment");
  if (!launched_by_mpi()) {
    g_alive = true;
    g_mpi = false;
    return;
  }
  int done = 0;
  MPI_Finalized(&done);
  if (done) throw std::logic_error("dist::Environment: MPI was finalised already and cannot start again");
  int provided = 0;
  // OpenMPI's non-blocking allreduce (coll/libnbc) picks, by default, a
  // binomial reduce then broadcast for fewer than 4 processes or an
  // in-place buffer: one direction of a link at a time, half its bandwidth
  // (docs/distributed.md). The ring uses both directions at once and is
  // bandwidth-optimal at any size of world. A value in the environment
  // stays. Only from OpenMPI 4.0.7 and 4.1.2 on: the ring gave wrong sums on
  // in-place buffers from 4 processes before them (open-mpi/ompi#9385).
#if defined(OMPI_MAJOR_VERSION) && \
    (OMPI_MAJOR_VERSION > 4 ||                                                    \
     (OMPI_MAJOR_VERSION == 4 && (OMPI_MINOR_VERSION > 1 || (OMPI_MINOR_VERSION == 1 && OMPI_RELEASE_VERSION >= 2) || \
                                  (OMPI_MINOR_VERSION == 0 && OMPI_RELEASE_VERSION >= 7))))
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
#endif
  // MPI_THREAD_MULTIPLE for DataParallel's progress thread; the user's calls
  // stay on this thread (see dist.h).
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &g_size), "MPI_Comm_size");
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type");
  MPI_Comm_rank(local, &g_local_rank);
  MPI_Comm_size(local, &g_local_size);
  // mpirun binds each process to its own cores by default (np <= 2); unbound,
  // the processes of a host share their cores. Compare the affinity masks.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  sched_getaffinity(0, sizeof mine, &mine);
  std::vector<cpu_set_t> all(g_local_size);
  check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, local), "MPI_Allgather");
  g_cores_shared = false;
  for (int r = 0; r < g_local_size; ++r) {
    if (r == g_local_rank) continue;
    cpu_set_t both;
    CPU_AND(&both, &mine, &all[r]);
    if (CPU_COUNT(&both) > 0) g_cores_shared = true;
  }
  MPI_Comm_free(&local);
  g_alive = true;
  g_mpi = true;
}

Environment::~Environment() {
  if (!g_alive) return;
  g_alive = false;
  if (!g_mpi) return;
  g_mpi = false;
  if (std::uncaught_exceptions() > uncaught_ && g_size > 1) {
    std::fprintf(stderr, "dist: rank %d is unwinding an exception; aborting the job\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  g_rank = 0;
  g_size = 1;
  g_local_rank = 0;
  g_local_size = 1;
}

void allreduce(Tensor& t, ReduceOp op) {
  if (!t.defined()) throw std::invalid_argument("dist::allreduce: the tensor is undefined");
  if (!g_alive || g_size == 1) return;
  // Every process must pass as many elements: check that first (max of n and of -n).
  int64_t n[2] = {t.numel(), -t.numel()};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, n, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  if (n[0] != -n[1])
    throw std::invalid_argument("dist::allreduce: the processes pass tensors of different sizes (from " +
                                std::to_string(-n[1]) + " to " + std::to_string(n[0]) + " elements; rank " +
                                std::to_string(g_rank) + " has " + shape_str(t.shape()) + ")");
  for_each_piece(t, [&](void* p, int count) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, p, count, mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  });
  const int64_t total = t.numel();
  if (op == ReduceOp::mean) {
    if (t.dtype() == Dtype::f32) {
      float* v = t.data<float>();
      for (int64_t i = 0; i < total; ++i) v[i] /= static_cast<float>(g_size);
    } else {
      double* v = t.data<double>();
      for (int64_t i = 0; i < total; ++i) v[i] /= g_size;
    }
  }
  t.bump_version();
}

double allreduce(double value, ReduceOp op) {
  if (!g_alive || g_size == 1) return value;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return op == ReduceOp::mean ? value / g_size : value;
}

void broadcast(Tensor& t, int root) {
  if (!t.defined()) throw std::invalid_argument("dist::broadcast: the tensor is undefined");
  if (root < 0 || root >= g_size)
    throw std::invalid_argument("dist::broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                                std::to_string(g_size - 1) + ")");
  if (!g_alive || g_size == 1) return;
  int64_t n = t.numel();
  check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  int64_t mismatch = n != t.numel();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &mismatch, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  if (mismatch)
    throw std::invalid_argument("dist::broadcast: rank " + std::to_string(g_rank) + " has " + shape_str(t.shape()) +
                                " (" + std::to_string(t.numel()) + " elements), the root " + std::to_string(n) +
                                " elements (or another rank differs)");
  for_each_piece(t, [&](void* p, int count) {
    check_mpi(MPI_Bcast(p, count, mpi_type(t.dtype()), root, MPI_COMM_WORLD), "MPI_Bcast");
  });
  t.bump_version();
}

void barrier() {
  if (!g_alive || g_size == 1) return;
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

bool all_equal(int64_t value) {
  if (!g_alive || g_size == 1) return true;
  int64_t v[2] = {value, value == INT64_MIN ? INT64_MAX : -value};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return v[0] == value && v[1] == (value == INT64_MIN ? INT64_MAX : -value);
}

void abort(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (g_alive && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

#else  // one process, no MPI

bool compiled_with_mpi() { return false; }

Environment::Environment(int*, char***) : uncaught_(std::uncaught_exceptions()) {
  if (g_alive) throw std::logic_error("dist::Environment: already initialised by another Environment");
  // Started by mpirun with several processes, each would train alone on the
  // whole batch: refuse rather than waste N-1 processes' work.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1)
      throw std::runtime_error(std::string("dist: started by mpirun with ") + v +
                               " processes, but xgrad was built without MPI (configure with MPI installed, "
                               "or -DXG_MPI=ON)");
  }
  g_alive = true;
}
Environment::~Environment() { g_alive = false; }

void allreduce(Tensor& t, ReduceOp) {
  if (!t.defined()) throw std::invalid_argument("dist::allreduce: the tensor is undefined");
}
double allreduce(double value, ReduceOp) { return value; }
void broadcast(Tensor& t, int root) {
  if (!t.defined()) throw std::invalid_argument("dist::broadcast: the tensor is undefined");
  if (root != 0) throw std::invalid_argument("dist::broadcast: root " + std::to_string(root) + " is not a rank (0..0)");
}
void barrier() {}
bool all_equal(int64_t) { return true; }
void abort(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(code);
}

#endif

bool initialized() { return g_alive; }
int rank() { return g_rank; }
int world_size() { return g_size; }
int local_rank() { return g_local_rank; }
int local_size() { return g_local_size; }

int cores_per_rank() {
  const int cores = available_cores();
  return g_cores_shared ? std::max(1, cores / g_local_size) : cores;
}

bool all_same_shapes(const std::vector<Tensor>& tensors) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the count, each rank, size and element size
  auto mix = [&](int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL; };
  mix(static_cast<int64_t>(tensors.size()));
  for (const Tensor& t : tensors) {
    mix(t.dim());
    for (int64_t d : t.shape()) mix(d);
    mix(dtype_size(t.dtype()));
  }
  return all_equal(static_cast<int64_t>(h >> 1));
}

}  // namespace xg::dist
