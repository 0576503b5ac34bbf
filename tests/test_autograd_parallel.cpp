// The thread pool behind parallel_for: ranges, errors, nesting, the thread count.
#include <atomic>
#include <stdexcept>
#include <vector>

#include "tests/helpers.h"

using namespace xg;

TEST_CASE("parallel_for: covers every index exactly once, at 1, 2 and 3 threads") {
  xgt::ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    CHECK(num_threads() == threads);
    for (int64_t n : {1, 2, 7, 100000}) {
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> ranges{0};
      parallel_for(n, 1000, [&](int64_t b, int64_t e) {
        CHECK(b < e);
        ranges.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      int wrong = 0;
      for (auto& h : hits) wrong += h.load() != 1;
      CHECK(wrong == 0);
      CHECK(ranges.load() <= threads);
    }
  }
}

TEST_CASE("parallel_for: an exception in a range reaches the caller, and the pool still works") {
  xgt::ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int64_t> done{0};
  std::string msg = XG_THROW_MESSAGE(parallel_for(1000, 1000,
                                                  [&](int64_t b, int64_t e) {
                                                    if (b == 0) throw std::runtime_error("range at 0 failed");
                                                    done.fetch_add(e - b);
                                                  }),
                                     std::runtime_error);
  CHECK(msg == "range at 0 failed");
  CHECK(done.load() == 500);  // the other range ran to its end before the rethrow
  std::atomic<int64_t> total{0};
  parallel_for(1000, 1000, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  CHECK(total.load() == 1000);
}

TEST_CASE("parallel_for: a nested call runs inline instead of waiting on the busy pool") {
  xgt::ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(4, 100000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(1000, 1000, [&](int64_t ib, int64_t ie) { total.fetch_add(ie - ib); });
  });
  CHECK(total.load() == 4000);
}

TEST_CASE("set_num_threads: refuses fewer than one thread") {
  xgt::ThreadsGuard guard;
  std::string msg = XG_THROW_MESSAGE(set_num_threads(0), std::invalid_argument);
  CHECK(xgt::contains(msg, "set_num_threads: need at least 1 thread, got 0"));
}

TEST_CASE("set_num_threads: refused inside a parallel_for body, which would deadlock") {
  xgt::ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int> refused{0};
  parallel_for(2, 100000, [&](int64_t, int64_t) {
    try {
      set_num_threads(1);
    } catch (const std::logic_error& e) {
      if (xgt::contains(e.what(), "set_num_threads: called from inside a parallel_for body")) refused.fetch_add(1);
    }
  });
  CHECK(refused.load() == 2);  // on the calling thread and on the worker
  CHECK(num_threads() == 2);
}
