// Data-parallel training, in the spirit of PyTorch's DistributedDataParallel:
// every process holds the whole model and trains on its own slice of each
// batch; gradients are summed over the processes while backward runs.
//
//   xg::dist::Environment env(&argc, &argv);
//   auto model = std::make_shared<MyModel>(...);
//   xg::dist::DataParallel ddp(*model);      // rank 0's parameters and buffers everywhere
//   xg::optim::Adam opt(model->parameters(), {});
//   for (...) {
//     opt.zero_grad();
//     Tensor loss = model->loss(my_slice_of_the_batch);
//     loss.backward();                       // buckets start their allreduce as they fill
//     ddp.wait();                            // every bucket reduced, gradients averaged
//     opt.step();                            // the same update on every process
//   }
//
// The parameters' gradients are grouped into buckets of about
// `bucket_bytes`, in reverse order of the parameters (the order backward
// produces them in, roughly); the last one, of the first parameters, is kept
// small (`last_bucket_bytes`) since nothing is left to overlap its exchange. A bucket's MPI_Iallreduce starts as soon as the
// last of its gradients is accumulated (Tensor::add_post_accumulate_grad_hook)
// and buckets start in the same order on every process. wait() starts any
// bucket still waiting (parameters this backward did not reach), waits for all
// and sets each gradient to a view of the reduced buffer (no copy, as
// PyTorch's gradient_as_bucket_view): such a view changes at the next
// exchange, so clone() a gradient to keep it.
//
// Averaging: each process's gradient is that of its own mean loss, and wait()
// gives their mean. That equals the gradient of the global batch's mean loss
// when every process's loss averages over as many terms; otherwise scale each
// loss by (its terms * world_size / all terms), as train::Trainer does.
//
// Gradient accumulation: with set_sync(false), backward leaves gradients
// local (no communication); the last micro-batch's backward with sync on, or
// wait(), reduces the accumulated sums.
//
// A parameter no process gave a gradient keeps none (as in one process); one
// that some processes did gets the reduced value, zeros standing for the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/dist.h"
#include "nn/module.h"

namespace xg::dist {

// How DataParallel groups and reduces the gradients.
struct DataParallelOptions {
  int64_t bucket_bytes = 25 << 20;  // ~25 MB, PyTorch's default; at least one parameter a bucket
  // The bucket of the first parameters (the last gradients backward
  // produces; its exchange cannot overlap anything): kept this small.
  int64_t last_bucket_bytes = 1 << 20;
  bool average = true;              // mean over processes (false: sum)
  // float32 gradients sent as bf16, as PyTorch's bf16_compress_hook: half the
  // bytes on the wire; each process's (already averaged) gradient is rounded
  // to bf16, and so is each partial sum of the reduction.
  bool bf16_exchange = false;
  // A thread that moves the buckets in flight forward every half
  // millisecond while backward runs (it needs the MPI_THREAD_MULTIPLE that
  // Environment asks for). Off, or where MPI gave less, the backward thread
  // tests them after each backward formula instead, and a transfer over TCP
  // stalls while one long formula runs.
  bool progress_thread = true;
};

// What DataParallel has done so far (stats()).
struct DataParallelStats {
  int64_t buckets = 0;           // how many buckets the parameters make
  int64_t bytes = 0;             // reduced per step (gradients and their flags)
  int64_t steps = 0;             // wait() calls that reduced
  int64_t started_in_backward = 0;  // buckets started by a hook (rest: by wait())
  double wait_seconds = 0;       // total time blocked in wait(): communication not hidden
  double pack_seconds = 0;       // total time copying gradients into the buckets (and to bf16 for the wire)
  bool progress_thread = false;  // a progress thread runs (the option, MPI_THREAD_MULTIPLE, more than 1 process)
  int64_t completed_by_thread = 0;  // buckets the progress thread saw complete, up to the last wait()
};

// Keeps one model's gradients equal over the processes: buckets reduced while
// backward runs, wait() before the optimiser step.
class DataParallel {
 public:
  // Broadcasts `module`'s parameters and buffers from rank 0 and checks that
  // every process has the same parameter shapes (std::invalid_argument naming
  // the first difference otherwise).
  explicit DataParallel(nn::Module& module, DataParallelOptions o = {});
  // The same for parameters and buffers not held by a Module.
  DataParallel(std::vector<Tensor> params, std::vector<Tensor> buffers, DataParallelOptions o = {});
  ~DataParallel();  // removes its hooks; waits for buckets in flight
  // Not copyable: it owns the hooks and buffers of its parameters.
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Whether backward starts the exchange (on by default); off: gradients
  // accumulate locally until a backward with sync on, or wait().
  void set_sync(bool on);
  bool sync() const;
  // After backward, before clipping and the optimiser step. Throws MpiError
  // if a collective fails.
  void wait();
  const DataParallelStats& stats() const;  // counters since construction
  // Parameter indices (into the constructor's list) of each bucket, in launch order.
  std::vector<std::vector<int64_t>> buckets() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace xg::dist
