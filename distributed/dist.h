// xg::dist: processes that train together over MPI (OpenMPI 4.1 here).
//
//   int main(int argc, char** argv) {
//     xg::dist::Environment env(&argc, &argv);   // MPI_Init_thread ... MPI_Finalize
//     if (xg::dist::rank() == 0) fmt::print("{} processes\n", xg::dist::world_size());
//     xg::dist::allreduce(t, xg::dist::ReduceOp::mean);
//   }
//
// Launched with `mpirun -np N program ...`; started directly, a program is one
// process of world size 1. Built without MPI (-DXG_MPI=OFF, or no MPI found),
// every call here works for that single process (compiled_with_mpi() says
// which) and Environment refuses only a launch by mpirun with N > 1.
//
// Only the thread that created the Environment may call these functions;
// xgrad's kernel threads never do. MPI is initialised with
// MPI_THREAD_MULTIPLE so that DataParallel's progress thread may test its
// own requests beside them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace xg::dist {

// An MPI call that returned an error: the message names the call and carries
// MPI's own description.
struct MpiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool compiled_with_mpi();  // false in a build without MPI (-DXG_MPI=OFF, or no MPI found)

// Initialises MPI for the life of the object (once per process; a second
// Environment while one is alive throws std::logic_error) when the program
// was started by mpirun; started directly, it is one process and MPI is not
// started at all. Errors from MPI
// then come back as MpiError instead of aborting the job. The destructor
// calls MPI_Finalize, or MPI_Abort when destroyed by an exception in flight
// (so the other processes stop instead of waiting forever for this one).
class Environment {
 public:
  Environment(int* argc, char*** argv);  // main()'s, handed to MPI_Init_thread
  ~Environment();
  // Not copyable: MPI is initialised once.
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  int uncaught_;
};

bool initialized();  // an Environment is alive
int rank();          // 0..world_size()-1; 0 without an Environment
int world_size();    // 1 without an Environment
int local_rank();    // rank among the processes on this host
int local_size();    // processes on this host
// The cores each process on this host should use: the cores this process may
// run on (mpirun's binding narrows them), shared among the processes of this
// host that see the same cores. At least 1. What the trainers default to, so
// that N processes never oversubscribe the machine.
int cores_per_rank();

// What allreduce computes over the processes.
enum class ReduceOp { sum, mean };
// In place, over every process: each ends with the sum (or mean) of all the
// processes' values. Same shape and dtype on every process (a mismatch in
// element count is caught by MPI only as a hang or truncation: the shape is
// checked first with one small allreduce).
void allreduce(Tensor& t, ReduceOp op = ReduceOp::sum);
double allreduce(double value, ReduceOp op = ReduceOp::sum);  // the same for one value, returned
// In place: every process ends with root's values. Shapes must agree.
void broadcast(Tensor& t, int root = 0);
void barrier();  // returns when every process has called it
// Whether every process passed the same value (one small allreduce).
bool all_equal(int64_t value);
// Whether every process holds as many tensors, of the same shapes and dtypes,
// in the same order (a hash of them compared by all_equal).
bool all_same_shapes(const std::vector<Tensor>& tensors);
// Ends every process of the job with `code` after printing `message` (with the
// rank) to stderr. Without MPI: std::exit(code).
[[noreturn]] void abort(int code, const std::string& message);

}  // namespace xg::dist
