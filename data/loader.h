// DataLoader: batches of a Dataset in a seeded order, prepared ahead on a
// background thread, this process's share under mpirun, and the same batch
// for the same step whether a run was resumed or not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "data/dataset.h"

namespace xg::data {

// A change made to each example as it is loaded (data/transforms.h): input
// in, input out. `gen` is seeded from the loader's seed, the epoch and the
// example's index, so a transform draws the same numbers on every run.
using Transform = std::function<Tensor(const Tensor& input, Generator& gen)>;

// What a DataLoader draws, in what order, and how far ahead.
struct LoaderOptions {
  int64_t batch_size = 64;  // the global batch, at least `world` examples
  bool shuffle = true;      // a new order each epoch, drawn from (seed, epoch); false: 0, 1, 2, ...
  uint64_t seed = 0;        // decides the orders and the transforms' draws
  bool drop_last = false;   // drop the last batch of an epoch when it is short
  int64_t prefetch = 2;     // batches prepared ahead on a background thread; 0: none, no thread
  // Under mpirun: this process takes rows [B rank / world, B (rank + 1) /
  // world) of each global batch of B examples (as train::Shard).
  int rank = 0, world = 1;
};

// This process's rows of one global batch.
struct Batch {
  Tensor input;                  // (b, input shape...), the examples stacked
  Tensor target;                 // (b) int64 class ids
  std::vector<int64_t> indices;  // which examples, in order
  int64_t step = 0;              // the step it was drawn for, from 1
  int64_t global_size = 0;       // B: the rows of the global batch (the last of an epoch may be short)
};

// Batches by step: step s (from 1) is batch (s - 1) % batches_per_epoch()
// of epoch (s - 1) / batches_per_epoch(). Nothing but the step decides it,
// so a resumed run reads what an uninterrupted one would.
class DataLoader {
 public:
  // Throws std::invalid_argument naming the option and its accepted range.
  DataLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, Transform transform = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The batch of `step` (at least 1); the next `prefetch` steps are then
  // prepared in the background. Rethrows what the dataset or the transform
  // threw for this step.
  Batch batch(int64_t step);
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // The global batch's example indices of `step`.
  std::vector<int64_t> indices(int64_t step) const;
  const LoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  struct Prefetcher;
  struct OrderCache;
  Batch load(int64_t step) const;
  std::shared_ptr<const std::vector<int64_t>> epoch_order_of(int64_t epoch) const;
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  Transform transform_;
  int64_t batches_per_epoch_ = 0;
  std::unique_ptr<OrderCache> order_;  // declared before the prefetcher, whose thread reads it
  std::unique_ptr<Prefetcher> prefetcher_;
};

// Calls f on each batch of one pass over `dataset` in order (no shuffle,
// the last batch short), `transform` applied to each example, with no
// background thread: evaluations.
void for_each_batch(std::shared_ptr<const Dataset> dataset, int64_t batch_size,
                    const std::function<void(const Batch&)>& f, Transform transform = {});

}  // namespace xg::data
