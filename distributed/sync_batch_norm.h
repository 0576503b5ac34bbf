// Batch normalisation over the union of the processes' batches under
// mpirun (PyTorch's SyncBatchNorm): with it, N processes each given 1/N of a
// batch train as one process given all of it.
//
//   xg::dist::sync_batch_norm(model);   // before training; a no-op for one process
#pragma once

#include <cstdint>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace xg::dist {

// The sum of `t` over every process (an allreduce), as a differentiable op:
// its gradient is the sum of every process's gradient of the output, so a
// backward through it needs every process to run the same backward. With one
// process, t itself.
Tensor all_sum(const Tensor& t);

// Makes every nn::BatchNorm in `model` take its training statistics over
// all processes (BatchNorm::synchronise(all_sum)); returns how many it set.
int64_t sync_batch_norm(nn::Module& model);

}  // namespace xg::dist
