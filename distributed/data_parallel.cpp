#include "distributed/data_parallel.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "autograd/autograd.h"
#include "distributed/detail/mpi.h"
#include "engine/gemm.h"

namespace xg::dist {

namespace {

// A bucket's flat buffer: the gradients of its parameters one after another,
// then one flag per parameter (1: this process has a gradient for it).
struct Bucket {
  Dtype dtype = Dtype::f32;
  std::vector<int64_t> params;   // indices into State::params
  std::vector<int64_t> offsets;  // of each parameter's values in `flat`
  int64_t values = 0;            // gradient elements (the flags follow)
  Tensor flat;
  std::shared_ptr<void> keep;  // owns `flat` for the gradients that view it
  std::vector<engine::bf16_t> wire;  // bf16_exchange: `flat` as sent and reduced
  int64_t pending = 0;  // parameters whose gradient this backward has not finished
#ifdef XG_HAVE_MPI
  std::vector<MPI_Request> requests;
#endif
};

int64_t g_top_pad = 0;  // the M_TOP_PAD DataParallel has set (never lowered)

#ifdef XG_HAVE_MPI
// MPI has no bf16 sum: each pair of values widened, added in float32 and
// rounded back, as NCCL's bf16 allreduce does.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const engine::bf16_t*>(in);
  auto* b = static_cast<engine::bf16_t*>(inout);
  float x[256], y[256];
  for (int i = 0; i < *len; i += 256) {
    const int n = std::min(256, *len - i);
    engine::from_bf16(a + i, x, n);
    engine::from_bf16(b + i, y, n);
    for (int j = 0; j < n; ++j) x[j] += y[j];
    engine::to_bf16(x, b + i, n);
  }
}

MPI_Op bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op o;
    check_mpi(MPI_Op_create(&bf16_sum, /*commute=*/1, &o), "MPI_Op_create");
    return o;
  }();
  return op;
}
#endif

template <class T>
T* ptr(Tensor& t) {
  return t.data<T>();
}

// Every process must hold the same parameters (a collective: every process
// calls it at the same point).
void check_same_model(const std::vector<Tensor>& params) {
  if (!all_same_shapes(params))
    throw std::invalid_argument("DataParallel: the processes' models differ (rank " + std::to_string(rank()) +
                                " has " + std::to_string(params.size()) +
                                " parameters; their number, shapes or dtypes differ on some rank)");
}

// OpenMPI allocates each collective's temporary buffers with malloc, and
// glibc gives the top of the heap back to the system after each free: every
// bucket then paid the page faults of fresh memory, which made an allreduce
// many times slower (docs/distributed.md, section DataParallel). Keeps about
// twice `bytes` (one step's exchange) of free heap; the pad is never lowered.
void keep_heap_pad(int64_t bytes) {
  const int64_t pad = std::min<int64_t>(2 * bytes + (64 << 20), int64_t{1} << 30);
  if (pad > g_top_pad) {
    mallopt(M_TOP_PAD, static_cast<int>(pad));
    g_top_pad = pad;
  }
}

}  // namespace

struct DataParallel::State {
  DataParallelOptions opts;
  std::vector<Tensor> params;
  std::vector<int64_t> bucket_of;  // per parameter
  std::vector<bool> ready;         // per parameter, this backward
  std::vector<Bucket> buckets;
  std::vector<int64_t> hook_ids;
  // Without the progress thread (or once an error has ended it): test()
  // after every backward formula on the constructing thread, not only when a
  // gradient is ready: between two ready gradients a backward can run for
  // tens of milliseconds, and over TCP a bucket's transfer stalls for as
  // long once the socket's buffer is drained. `alive` turns the function off
  // if the destructor runs on another thread (which cannot remove it from
  // this one's list).
  int64_t between_id = 0;
  std::thread::id between_thread;
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
  size_t next_start = 0;  // buckets start in index order on every process
  bool sync = true;
  DataParallelStats stats;

  // The progress thread (opts.progress_thread): OpenMPI moves a collective
  // over TCP only inside MPI calls, and a backward formula can run for
  // longer than a socket's buffer takes to drain, so the thread tests the
  // buckets in flight every kPollInterval while any is. `started` publishes
  // the buckets whose requests start() has written; `mu` is held by the
  // thread while it tests and by wait() while it owns the requests. An MPI
  // error ends the thread (`polling` false: the backward thread tests
  // again) and is kept for wait() to throw.
  std::thread poller;
  std::atomic<bool> polling{false};  // the thread runs and tests the requests
  std::mutex mu;
  std::condition_variable wake;
  std::atomic<size_t> started{0};
  std::atomic<int64_t> in_flight{0};  // started buckets the thread has not seen complete
  std::atomic<int64_t> thread_completed{0};  // buckets the thread saw complete (stats, at wait())
  bool stop = false;                  // guarded by mu
  std::string poll_error;             // guarded by mu

  void cut_buckets();
  void on_ready(int64_t i);
  void start(Bucket& b);
  int64_t test(size_t n);
  void poll_loop();
  void stop_poller();
};

namespace {
// How often the progress thread tests the buckets in flight: at 10 Gbit/s
// this moves 0.6 MB per test, well within a socket's buffer, and a test that
// finds nothing to do costs microseconds, so the thread takes a few percent
// of a core at most.
constexpr auto kPollInterval = std::chrono::microseconds(500);
}  // namespace

// Buckets, one dtype each. Cut in the parameters' order, the first one
// (the first parameters: embeddings, the first layer) up to
// last_bucket_bytes and the others up to bucket_bytes; started in the
// reverse order, so that the bucket left when backward ends is small.
// Sets bucket_of, ready, buckets and the stats' bytes and buckets.
void DataParallel::State::cut_buckets() {
  const int64_t n = static_cast<int64_t>(params.size());
  bucket_of.assign(n, -1);
  ready.assign(n, false);
  std::vector<std::vector<int64_t>> cut;
  int64_t bytes = 0;
  Dtype dtype = Dtype::f32;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    const int64_t pb = p.numel() * (p.dtype() == Dtype::f32 ? 4 : 8);
    const int64_t cap = cut.size() <= 1 ? std::min(opts.last_bucket_bytes, opts.bucket_bytes) : opts.bucket_bytes;
    if (cut.empty() || dtype != p.dtype() || (bytes + pb > cap && !cut.back().empty())) {
      cut.emplace_back();
      bytes = 0;
      dtype = p.dtype();
    }
    cut.back().push_back(i);
    bytes += pb;
  }
  for (auto it = cut.rbegin(); it != cut.rend(); ++it) {
    Bucket& b = buckets.emplace_back();
    b.dtype = params[it->front()].dtype();
    for (auto j = it->rbegin(); j != it->rend(); ++j) {
      b.offsets.push_back(b.values);
      b.values += params[*j].numel();
      b.params.push_back(*j);
      bucket_of[*j] = static_cast<int64_t>(buckets.size()) - 1;
    }
  }
  for (Bucket& b : buckets) {
    b.flat = zeros({b.values + static_cast<int64_t>(b.params.size())}, b.dtype);
    b.keep = std::shared_ptr<void>(new Tensor(b.flat), [](void* t) { delete static_cast<Tensor*>(t); });
    b.pending = static_cast<int64_t>(b.params.size());
    if (opts.bf16_exchange && b.dtype == Dtype::f32) b.wire.resize(static_cast<size_t>(b.flat.numel()));
    stats.bytes += b.wire.empty() ? b.flat.numel() * (b.dtype == Dtype::f32 ? 4 : 8) : b.flat.numel() * 2;
  }
  stats.buckets = static_cast<int64_t>(buckets.size());
}

DataParallel::DataParallel(nn::Module& module, DataParallelOptions o)
    : DataParallel(module.parameters(),
                   [&] {
                     std::vector<Tensor> bufs;
                     for (auto& [name, t] : module.named_buffers()) bufs.push_back(t);
                     return bufs;
                   }(),
                   o) {}

DataParallel::DataParallel(std::vector<Tensor> params, std::vector<Tensor> buffers, DataParallelOptions o)
    : s_(std::make_unique<State>()) {
  if (o.bucket_bytes < 1 || o.last_bucket_bytes < 1)
    throw std::invalid_argument("DataParallel: bucket_bytes " + std::to_string(o.bucket_bytes) +
                                " and last_bucket_bytes " + std::to_string(o.last_bucket_bytes) +
                                ": expected at least 1 (bytes of gradients per allreduce)");
  s_->opts = o;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined() || !params[i].requires_grad() || !params[i].is_leaf())
      throw std::invalid_argument("DataParallel: parameter " + std::to_string(i) +
                                  " is not a leaf that requires grad");
    for (size_t j = 0; j < i; ++j)
      if (params[j].impl() == params[i].impl())
        throw std::invalid_argument("DataParallel: parameter " + std::to_string(i) + " is parameter " +
                                    std::to_string(j) + " again");
  }
  s_->params = std::move(params);
  const int64_t n = static_cast<int64_t>(s_->params.size());

  check_same_model(s_->params);

  {
    NoGradGuard no_grad;
    for (Tensor& p : s_->params) broadcast(p, 0);
    for (Tensor& b : buffers) broadcast(b, 0);
  }

  s_->cut_buckets();
  if (world_size() > 1) keep_heap_pad(s_->stats.bytes);

  if (world_size() > 1) {
    State* s = s_.get();
    for (int64_t i = 0; i < n; ++i)
      s_->hook_ids.push_back(s_->params[i].add_post_accumulate_grad_hook([s, i](const Tensor&) { s->on_ready(i); }));
#ifdef XG_HAVE_MPI
    const bool threads = thread_multiple();
#else
    const bool threads = false;
#endif
    if (o.progress_thread && threads) {
      s_->polling = true;
      s_->poller = std::thread([s] { s->poll_loop(); });
    }
    s_->between_thread = std::this_thread::get_id();
    s_->between_id = add_between_backward_nodes([s, alive = s_->alive] {
      if (alive->load() && !s->polling.load()) s->test(s->next_start);
    });
  }
  s_->stats.progress_thread = s_->poller.joinable();
}

DataParallel::~DataParallel() {
  s_->stop_poller();
  s_->alive->store(false);
  if (s_->between_id != 0 && std::this_thread::get_id() == s_->between_thread)
    remove_between_backward_nodes(s_->between_id);
  for (size_t i = 0; i < s_->hook_ids.size(); ++i) s_->params[i].remove_post_accumulate_grad_hook(s_->hook_ids[i]);
#ifdef XG_HAVE_MPI
  // Requests in flight must complete before their buffers go away.
  for (Bucket& b : s_->buckets)
    if (!b.requests.empty()) MPI_Waitall(static_cast<int>(b.requests.size()), b.requests.data(), MPI_STATUSES_IGNORE);
#endif
}

void DataParallel::set_sync(bool on) { s_->sync = on; }
bool DataParallel::sync() const { return s_->sync; }
const DataParallelStats& DataParallel::stats() const { return s_->stats; }

std::vector<std::vector<int64_t>> DataParallel::buckets() const {
  std::vector<std::vector<int64_t>> out;
  for (const Bucket& b : s_->buckets) out.push_back(b.params);
  return out;
}

void DataParallel::State::on_ready(int64_t i) {
  if (!sync) return;
  if (ready[i])
    throw std::logic_error("DataParallel: a second backward() reached parameter " + std::to_string(i) + " " +
                           shape_str(params[i].shape()) +
                           " before wait() reduced the first one's gradients. Call wait() after each backward, "
                           "or set_sync(false) for the backward passes that only accumulate");
  ready[i] = true;
  Bucket& b = buckets[bucket_of[i]];
  --b.pending;
  // Start the buckets that are full, in order: collectives must be issued in
  // the same order on every process.
  while (next_start < buckets.size() && buckets[next_start].pending == 0) {
    start(buckets[next_start++]);
    ++stats.started_in_backward;
  }
  if (!polling.load()) test(next_start);
}

void DataParallel::State::start(Bucket& b) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t nv = b.values;
  // Copied in already divided by the number of processes (when averaging):
  // the sum is then the mean, and wait() hands out views of the buffer
  // without another pass. A gradient that still is such a view (no backward
  // reached it since) is scaled in place: the mean of equal values is itself.
  const double scale = opts.average ? 1.0 / world_size() : 1.0;
  auto pack = [&](auto zero) {
    using T = decltype(zero);
    T* flat = ptr<T>(b.flat);
    const T f = static_cast<T>(scale);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor g = params[b.params[k]].grad();
      const int64_t len = params[b.params[k]].numel();
      T* dst = flat + b.offsets[k];
      if (g.defined()) {
        const T* src = g.data<T>();
        for (int64_t j = 0; j < len; ++j) dst[j] = src[j] * f;
        flat[nv + static_cast<int64_t>(k)] = 1;
      } else {
        std::fill(dst, dst + len, T(0));
        flat[nv + static_cast<int64_t>(k)] = 0;
      }
    }
  };
  if (b.dtype == Dtype::f32) pack(float{});
  else pack(double{});
#ifdef XG_HAVE_MPI
  const bool half = !b.wire.empty();  // bf16 on the wire (the flags, small integers, stay exact)
  if (half) engine::to_bf16(ptr<float>(b.flat), b.wire.data(), b.flat.numel());
  stats.pack_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const MPI_Datatype type = half ? MPI_UINT16_T : mpi_type(b.dtype);
  const MPI_Op op = half ? bf16_sum_op() : MPI_SUM;
  auto issue = [&](void* p, int count) {
    b.requests.emplace_back();
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, p, count, type, op, MPI_COMM_WORLD, &b.requests.back()), "MPI_Iallreduce");
  };
  if (half)
    for_each_piece(b.wire.data(), b.flat.numel(), sizeof(engine::bf16_t), issue);
  else
    for_each_piece(b.flat, issue);
  if (poller.joinable()) {
    started.store(static_cast<size_t>(&b - buckets.data()) + 1, std::memory_order_release);
    if (in_flight.fetch_add(1) == 0) {
      // Through the mutex: a thread between its check of in_flight and its
      // sleep would miss a bare notify, and sleep through the step.
      { std::lock_guard<std::mutex> lock(mu); }
      wake.notify_one();
    }
  }
#endif
}

// MPI moves a non-blocking collective forward only inside MPI calls: tests
// the requests of the first `n` buckets started. Returns how many buckets
// this call found complete. Without the progress thread, called each time a
// gradient is ready and after every backward formula.
int64_t DataParallel::State::test(size_t n) {
  int64_t completed = 0;
#ifdef XG_HAVE_MPI
  for (size_t k = 0; k < n; ++k) {
    Bucket& b = buckets[k];
    if (b.requests.empty()) continue;
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(b.requests.size()), b.requests.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
    if (done) {
      b.requests.clear();
      ++completed;
    }
  }
#else
  (void)n;
#endif
  return completed;
}

void DataParallel::State::poll_loop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop) {
    wake.wait(lock, [&] { return stop || in_flight.load() > 0; });
    if (stop) break;
    try {
      const int64_t done = test(started.load(std::memory_order_acquire));
      in_flight.fetch_sub(done);
      thread_completed.fetch_add(done);
    } catch (const std::exception& e) {
      poll_error = e.what();  // wait() throws it
      polling = false;        // the backward thread tests again
      break;
    }
    lock.unlock();
    std::this_thread::sleep_for(kPollInterval);
    lock.lock();
  }
}

void DataParallel::State::stop_poller() {
  if (!poller.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  wake.notify_one();
  poller.join();
}

void DataParallel::wait() {
  State& s = *s_;
  if (world_size() == 1) {  // nothing to exchange: the gradients are the batch's
    ++s.stats.steps;
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  // Buckets no hook started: parameters this backward did not reach, a
  // backward under set_sync(false), or no backward at all.
  while (s.next_start < s.buckets.size()) s.start(s.buckets[s.next_start++]);
  // The requests are this thread's from here on: the progress thread waits
  // for the lock and finds nothing in flight once it has it.
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.poll_error.empty()) throw MpiError("DataParallel's progress thread: " + s.poll_error);
  s.stats.completed_by_thread = s.thread_completed.load();
#ifdef XG_HAVE_MPI
  for (Bucket& b : s.buckets)
    if (!b.requests.empty()) {
      check_mpi(MPI_Waitall(static_cast<int>(b.requests.size()), b.requests.data(), MPI_STATUSES_IGNORE),
                "MPI_Waitall");
      b.requests.clear();
    }
#endif
  // The gradients become views of the reduced buffers (PyTorch's
  // gradient_as_bucket_view): no copy out.
  NoGradGuard no_grad;
  for (Bucket& b : s.buckets) {
    if (!b.wire.empty()) engine::from_bf16(b.wire.data(), ptr<float>(b.flat), b.flat.numel());
    auto hand_out = [&](auto zero) {
      using T = decltype(zero);
      T* flat = ptr<T>(b.flat);
      for (size_t k = 0; k < b.params.size(); ++k) {
        Tensor& p = s.params[b.params[k]];
        if (flat[b.values + static_cast<int64_t>(k)] == 0) continue;  // no process had a gradient
        p.set_grad(from_blob(flat + b.offsets[k], p.shape(), p.dtype(), b.keep));
      }
    };
    if (b.dtype == Dtype::f32) hand_out(float{});
    else hand_out(double{});
    b.pending = static_cast<int64_t>(b.params.size());
  }
  s.ready.assign(s.ready.size(), false);
  s.next_start = 0;
  s.started.store(0);
  s.in_flight.store(0);
  ++s.stats.steps;
  s.stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace xg::dist
