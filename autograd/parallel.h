// xgrad's one threading layer: a pool of `num_threads() - 1` workers plus the
// calling thread. GEMMs are split across it (OpenBLAS itself runs at one
// thread, so two pools never spin against each other), and so are the large
// elementwise kernels and the optimiser updates.
#pragma once

#include <cstdint>
#include <functional>

namespace xg {

// Threads used by xgrad's kernels, the calling thread included. The default is
// XG_NUM_THREADS, else OMP_NUM_THREADS, else available_cores().
// Throws std::invalid_argument for n < 1, std::logic_error when called from
// inside a parallel_for body, std::runtime_error if the threads cannot start.
void set_num_threads(int n);
int num_threads();
// The cores this process may run on (sched_getaffinity: taskset, cgroups'
// cpusets and mpirun's binding narrow it), at least 1.
int available_cores();

// Calls body(begin, end) on disjoint ranges that cover [0, n), one range per
// thread, and returns when all are done. `cost` is a rough count of scalar
// operations per item: below about 32k operations in all the call runs inline
// on the calling thread. Ranges depend only on n and num_threads(), so results
// are reproducible for a given thread count. Runs inline when called from
// inside another parallel_for, or while another thread uses the pool. An
// exception thrown by body is rethrown here, after every range has finished.
void parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace xg
