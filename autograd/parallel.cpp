// The thread pool behind parallel_for. Workers spin briefly after each job
// (a training step issues thousands of short jobs back to back) and then sleep
// on a condition variable, so an idle process does not hold a core for long;
// the caller waiting for its workers does the same.
#include "autograd/parallel.h"

#include <immintrin.h>
#include <sched.h>

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

// Runs job(part) for part in [0, parts) on the caller and the workers. Parts
// are claimed from a shared counter, so the caller never waits for a worker
// that has not started: when another process holds the cores and a worker is
// descheduled, the caller runs its parts itself. (Waiting for it instead
// made a step many times slower with two jobs side by side: see
// docs/performance.md, section Threads.) What part i computes does not
// depend on which thread runs it, so results depend only on the number of
// parts.
class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    try {
      for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      stop();  // the workers already started must not outlive this half-built pool
      throw std::runtime_error("set_num_threads: could not start " + std::to_string(threads_ - 1) +
                               " worker threads: " + e.what());
    }
  }
  ~Pool() { stop(); }
  int threads() const { return threads_; }

  void run(int parts, const std::function<void(int)>& job) {
    job_.store(&job, std::memory_order_relaxed);
    parts_.store(parts, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> 32) + 1;
    {
      std::lock_guard<std::mutex> lk(m_);
      state_.store(gen << 32, std::memory_order_seq_cst);  // no part claimed yet
    }
    if (sleepers_.load(std::memory_order_seq_cst) > 0) cv_.notify_all();
    claim_parts(gen);
    // Parts a worker claimed and is still running: spin briefly, then sleep
    // until the last one wakes us.
    if (!spin_until([&] { return done_.load(std::memory_order_acquire) == parts; })) {
      std::unique_lock<std::mutex> lk(done_m_);
      caller_waiting_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lk, [&] { return done_.load(std::memory_order_seq_cst) == parts; });
      caller_waiting_.store(false, std::memory_order_relaxed);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Claims and runs parts of job `gen` until none is left. A claim succeeds
  // only while `gen` is the current job, so job_ and parts_ are that job's.
  void claim_parts(uint64_t gen) {
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      if ((s >> 32) != gen) return;
      const int part = static_cast<int>(s & 0xffffffffu);
      if (part >= parts_.load(std::memory_order_relaxed)) return;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
      guarded(*job_.load(std::memory_order_relaxed), part);
      const int parts = parts_.load(std::memory_order_relaxed);
      if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == parts &&
          caller_waiting_.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lk(done_m_);
        done_cv_.notify_one();
      }
    }
  }

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
      state_.fetch_add(uint64_t{1} << 32, std::memory_order_seq_cst);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // Spins on `ready` for up to kSpin, yielding the core between checks after
  // kPauseOnly; true if it became ready.
  template <class F>
  static bool spin_until(F ready) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0;; ++s) {
      if (ready()) return true;
      if ((s & 63) == 63) {
        const auto waited = std::chrono::steady_clock::now() - t0;
        if (waited > kSpin) return false;
        if (waited > kPauseOnly) std::this_thread::yield();
      }
      _mm_pause();
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      // Wait for the next job: spin for up to kSpin, then sleep. Waking a
      // sleeping thread takes longer than many kernels (docs/performance.md,
      // section Threads), while a training step issues its jobs back to back.
      auto next_gen = [&] { return state_.load(std::memory_order_acquire) >> 32; };
      if (!spin_until([&] { return next_gen() != seen; })) {
        std::unique_lock<std::mutex> lk(m_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lk, [&] { return next_gen() != seen; });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = next_gen();
      if (stop_) return;
      claim_parts(seen);
    }
  }

  // How long a thread spins for the next job or for its partners before it
  // sleeps; past kPauseOnly it yields its core while it spins.
  static constexpr std::chrono::microseconds kSpin{200};
  static constexpr std::chrono::microseconds kPauseOnly{20};

  const int threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> state_{0};  // (job generation << 32) | parts claimed
  std::atomic<int> parts_{0};
  std::atomic<int> done_{0};  // parts finished
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::exception_ptr error_;
  std::mutex error_m_;
  std::mutex m_;  // workers sleep on cv_ until the generation changes
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::mutex done_m_;  // the caller sleeps on done_cv_ until every part is done
  std::condition_variable done_cv_;
  std::atomic<bool> caller_waiting_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n >= 1) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

namespace {

int default_threads() {
  for (const char* var : {"XG_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n >= 1 && n <= 1024) return static_cast<int>(n);
    }
  }
  return available_cores();
}

std::mutex g_pool_m;  // held by whichever thread is using or replacing the pool
std::unique_ptr<Pool> g_pool;
std::atomic<int> g_threads{0};

Pool& pool_locked() {
  if (!g_pool) {
    int n = g_threads.load();
    if (n == 0) g_threads = n = default_threads();
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
  p.run(static_cast<int>(parts), [&](int i) {
    const int64_t b = n * i / parts, e = n * (i + 1) / parts;
    body(b, e);
  });
}

}  // namespace xg
