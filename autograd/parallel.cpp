// The thread pool behind parallel_for. Workers spin briefly after each job
// (a training step issues thousands of short jobs back to back) and then sleep
// on a condition variable, so an idle process does not hold a core for long.
#include "autograd/parallel.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace xg {

namespace {

thread_local bool t_inside_job = false;

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    try {
      for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { work(i); });
    } catch (const std::system_error& e) {
      stop();  // the workers already started must not outlive this half-built pool
      throw std::runtime_error("set_num_threads: could not start " + std::to_string(threads_ - 1) +
                               " worker threads: " + e.what());
    }
  }
  ~Pool() { stop(); }
  int threads() const { return threads_; }

  // Runs job(i) for i in [0, threads) and waits; the caller runs i = 0.
  void run(const std::function<void(int)>& job) {
    job_ = &job;
    error_ = nullptr;
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(m_);
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    guarded(job, 0);
    while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void guarded(const std::function<void(int)>& job, int i) {
    t_inside_job = true;
    try {
      job(i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_m_);
      if (!error_) error_ = std::current_exception();
    }
    t_inside_job = false;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  void work(int i) {
    uint64_t seen = 0;
    for (;;) {
      // Wait for the next job: spin for up to 1 ms, then sleep. Waking a
      // sleeping thread was measured at ~85 us on these VMs, and sched_yield
      // at ~10 us, more than many kernels take, while a training step issues
      // its jobs back to back.
      auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; gen_.load(std::memory_order_acquire) == seen; ++s) {
        _mm_pause();
        if ((s & 63) == 63 && std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(1)) break;
      }
      if (gen_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
      }
      seen = gen_.load(std::memory_order_acquire);
      if (stop_) return;
      guarded(*job_, i);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> pending_{0};
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_m_;
  std::mutex m_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
};

int default_threads() {
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(var)) {
      int n = std::atoi(v);
      if (n >= 1) return n;
    }
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

std::mutex g_pool_m;  // held by whichever thread is using or replacing the pool
std::unique_ptr<Pool> g_pool;
std::atomic<int> g_threads{0};

Pool& pool_locked() {
  if (!g_pool) {
    int n = g_threads.load();
    if (n == 0) g_threads = n = default_threads();
    openblas_set_num_threads(1);  // GEMMs are split by parallel_for instead
    g_pool = std::make_unique<Pool>(n);
  }
  return *g_pool;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
  // The calling parallel_for holds the pool (and its workers wait on this
  // thread): replacing it here would deadlock.
  if (t_inside_job)
    throw std::logic_error("set_num_threads: called from inside a parallel_for body; change the thread count "
                           "between parallel regions");
  std::lock_guard<std::mutex> lk(g_pool_m);
  if (g_pool && g_pool->threads() == n) return;
  const int before = g_threads;
  g_pool.reset();
  g_threads = n;
  try {
    pool_locked();
  } catch (...) {
    g_threads = before;  // the next use builds the pool it had (or the default)
    throw;
  }
}

int num_threads() {
  if (int n = g_threads.load()) return n;
  std::lock_guard<std::mutex> lk(g_pool_m);
  return pool_locked().threads();
}

void parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  constexpr int64_t kMinWork = 32768;
  if (t_inside_job || n < 2 || n * std::max<int64_t>(cost, 1) < kMinWork || num_threads() == 1) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> lk(g_pool_m, std::try_to_lock);
  if (!lk.owns_lock()) {  // another thread is using the pool
    body(0, n);
    return;
  }
  Pool& p = pool_locked();
  const int64_t parts = std::min<int64_t>(p.threads(), n);
  p.run([&](int i) {
    if (i >= parts) return;
    int64_t b = n * i / parts, e = n * (i + 1) / parts;
    body(b, e);
  });
}

}  // namespace xg
