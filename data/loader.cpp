#include "data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <utility>

#include "autograd/require.h"
#include "data/hash.h"

namespace xg::data {

namespace {

// The order of epoch `epoch`: 0..n-1, or a Fisher-Yates shuffle drawn from
// (seed, epoch).
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  Generator gen(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(gen.engine()() % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

void check_options(const Dataset& d, const LoaderOptions& o) {
  const char* who = "DataLoader: ";
  const int64_t n = d.size();
  require(n >= 1, "the dataset is empty", who);
  require(o.world >= 1 && o.rank >= 0 && o.rank < o.world,
          "rank " + std::to_string(o.rank) + " of world " + std::to_string(o.world) +
              ": expected world >= 1 and 0 <= rank < world",
          who);
  require(o.batch_size >= o.world && o.batch_size <= n,
          "batch_size " + std::to_string(o.batch_size) + ": expected in [" + std::to_string(o.world) + ", " +
              std::to_string(n) + "] (at least one example per process, at most the dataset's " + std::to_string(n) +
              ")",
          who);
  const int64_t last = n % o.batch_size;
  require(o.drop_last || last == 0 || last >= o.world,
          "the last batch of an epoch holds " + std::to_string(last) + " examples, fewer than the " +
              std::to_string(o.world) + " processes: set drop_last or another batch_size",
          who);
  require(o.prefetch >= 0 && o.prefetch <= 64, "prefetch " + std::to_string(o.prefetch) + ": expected in [0, 64]", who);
}

// Steps count from 1 (the message built only when refused: batch() runs every step).
void check_step(int64_t step) {
  if (step < 1) require(false, "DataLoader: step " + std::to_string(step) + ": expected at least 1");
}

// Copies one example's input into row `row` of a batch.
void put_row(Tensor& batch, int64_t row, const Tensor& input) {
  const int64_t n = input.numel();
  if (batch.dtype() == f32)
    std::memcpy(batch.data<float>() + row * n, input.data<float>(), static_cast<size_t>(n) * sizeof(float));
  else
    std::memcpy(batch.data<double>() + row * n, input.data<double>(), static_cast<size_t>(n) * sizeof(double));
}

}  // namespace

// The last epoch order drawn (DataLoader::epoch_order_of).
struct DataLoader::OrderCache {
  std::mutex m;
  int64_t epoch = -1;
  std::shared_ptr<const std::vector<int64_t>> order;
};

// The background thread: prepares the steps in `wanted`, in order, into
// `ready`. A step's exception is kept and rethrown by batch().
struct DataLoader::Prefetcher {
  std::mutex m;
  std::condition_variable cv;
  std::deque<int64_t> wanted;
  std::map<int64_t, std::pair<Batch, std::exception_ptr>> ready;
  int64_t working = 0;  // the step being prepared, 0 when none
  bool stop = false;
  std::thread thread;

  void run(const DataLoader& loader) {
    std::unique_lock<std::mutex> lock(m);
    for (;;) {
      cv.wait(lock, [&] { return stop || !wanted.empty(); });
      if (stop) return;
      working = wanted.front();
      wanted.pop_front();
      lock.unlock();
      std::pair<Batch, std::exception_ptr> done;
      try {
        done.first = loader.load(working);
      } catch (...) {
        done.second = std::current_exception();
      }
      lock.lock();
      ready[working] = std::move(done);
      working = 0;
      cv.notify_all();
    }
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, Transform transform)
    : dataset_(std::move(dataset)), options_(options), transform_(std::move(transform)),
      order_(std::make_unique<OrderCache>()) {
  require(dataset_ != nullptr, "DataLoader: the dataset is null");
  check_options(*dataset_, options_);
  const int64_t n = dataset_->size(), b = options_.batch_size;
  batches_per_epoch_ = options_.drop_last ? n / b : (n + b - 1) / b;
  if (options_.prefetch > 0) {
    prefetcher_ = std::make_unique<Prefetcher>();
    prefetcher_->thread = std::thread([this] { prefetcher_->run(*this); });
  }
}

DataLoader::~DataLoader() {
  if (!prefetcher_) return;
  {
    std::lock_guard<std::mutex> lock(prefetcher_->m);
    prefetcher_->stop = true;
  }
  prefetcher_->cv.notify_all();
  prefetcher_->thread.join();
}

std::vector<int64_t> DataLoader::indices(int64_t step) const {
  check_step(step);
  const int64_t epoch = (step - 1) / batches_per_epoch_, k = (step - 1) % batches_per_epoch_;
  const std::shared_ptr<const std::vector<int64_t>> order = epoch_order_of(epoch);
  const int64_t begin = k * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size, dataset_->size());
  return {order->begin() + begin, order->begin() + end};
}

// The training thread and the prefetch thread both ask; one epoch's order
// is drawn once and shared (steps run through an epoch before the next).
std::shared_ptr<const std::vector<int64_t>> DataLoader::epoch_order_of(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(order_->m);
  if (!order_->order || order_->epoch != epoch) {
    order_->order = std::make_shared<const std::vector<int64_t>>(
        epoch_order(dataset_->size(), options_.shuffle, options_.seed, epoch));
    order_->epoch = epoch;
  }
  return order_->order;
}

Batch DataLoader::load(int64_t step) const {
  Batch b;
  b.step = step;
  const std::vector<int64_t> all = indices(step);
  b.global_size = static_cast<int64_t>(all.size());
  const int64_t begin = b.global_size * options_.rank / options_.world;
  const int64_t end = b.global_size * (options_.rank + 1) / options_.world;
  b.indices.assign(all.begin() + begin, all.begin() + end);
  const uint64_t epoch = static_cast<uint64_t>((step - 1) / batches_per_epoch_);
  b.target = empty({end - begin}, i64);
  for (int64_t r = 0; r < end - begin; ++r) {
    const int64_t index = b.indices[static_cast<size_t>(r)];
    Example ex = dataset_->get(index);
    if (transform_) {
      Generator gen(splitmix64(options_.seed ^ splitmix64(epoch ^ splitmix64(static_cast<uint64_t>(index)))));
      ex.input = transform_(ex.input, gen);
    }
    if (r == 0) {
      Shape shape = ex.input.shape();
      shape.insert(shape.begin(), end - begin);
      b.input = empty(shape, ex.input.dtype());
    } else if (ex.input.dtype() != b.input.dtype() ||
               !std::equal(ex.input.shape().begin(), ex.input.shape().end(), b.input.shape().begin() + 1,
                           b.input.shape().end())) {
      throw std::runtime_error("DataLoader: example " + std::to_string(index) + " has the input " +
                               shape_str(ex.input.shape()) + ", unlike the batch's first " +
                               shape_str(b.input.shape()));
    }
    put_row(b.input, r, ex.input);
    b.target.data<int64_t>()[r] = ex.target;
  }
  return b;
}

Batch DataLoader::batch(int64_t step) {
  check_step(step);
  if (!prefetcher_) return load(step);
  Prefetcher& p = *prefetcher_;
  std::unique_lock<std::mutex> lock(p.m);
  std::pair<Batch, std::exception_ptr> got;
  const bool coming = p.working == step || std::find(p.wanted.begin(), p.wanted.end(), step) != p.wanted.end();
  if (p.ready.count(step) || coming) {
    p.cv.wait(lock, [&] { return p.ready.count(step) > 0; });
    got = std::move(p.ready[step]);
  } else {
    lock.unlock();  // a jump (the first step, a resume): made here, at once
    try {
      got.first = load(step);
    } catch (...) {
      got.second = std::current_exception();
    }
    lock.lock();
  }
  // Keep only what lies ahead, and ask for what is missing of the next steps.
  for (auto it = p.ready.begin(); it != p.ready.end();)
    it = it->first <= step || it->first > step + options_.prefetch ? p.ready.erase(it) : std::next(it);
  p.wanted.clear();
  for (int64_t s = step + 1; s <= step + options_.prefetch; ++s)
    if (!p.ready.count(s) && p.working != s) p.wanted.push_back(s);
  p.cv.notify_all();
  lock.unlock();
  if (got.second) std::rethrow_exception(got.second);
  return std::move(got.first);
}

void for_each_batch(std::shared_ptr<const Dataset> dataset, int64_t batch_size,
                    const std::function<void(const Batch&)>& f, Transform transform) {
  LoaderOptions o;
  o.batch_size = dataset ? std::min(batch_size, dataset->size()) : batch_size;
  o.shuffle = false;
  o.prefetch = 0;
  require(batch_size >= 1, "for_each_batch: batch_size " + std::to_string(batch_size) + ": expected at least 1");
  DataLoader loader(std::move(dataset), o, std::move(transform));
  for (int64_t s = 1; s <= loader.batches_per_epoch(); ++s) f(loader.batch(s));
}

}  // namespace xg::data
