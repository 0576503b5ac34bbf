// Op profile: while an OpProfile is alive on a thread, every op that thread
// passes through record() and every backward formula it runs is timed and
// added up by phase, module and op. Outside a profile, training pays one
// thread-local test per op.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace xg {

// The times of one thread's ops while it is alive (a scope guard, like TraceGuard).
class OpProfile {
 public:
  // phase: "forward" (an op's time is the time since the previous event on
  // this thread ended: its kernels run before it records), "backward" (the
  // formula's own time), or a label given to mark().
  // module: the innermost module's type (its NameScope up to the first
  // "(" or " "), "" outside modules.
  using Key = std::tuple<std::string, std::string, std::string>;  // phase, module, op
  // What one key has cost so far.
  struct Cost {
    double seconds = 0;  // wall-clock time charged to the key
    int64_t calls = 0;   // events charged to it
  };

  OpProfile();   // starts timing this thread; modules name their ops while it is alive
  ~OpProfile();  // the previous profile (or none) again
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Charges the time since the last event to (label, "", what): the work
  // between ops that records nothing (an optimiser step, a batch's loading).
  void mark(const std::string& label, const std::string& what);
  // Forgets what was charged so far (after a warm-up) and restarts the clock.
  void clear();
  const std::map<Key, Cost>& costs() const { return costs_; }
  // The rows sorted by time, each with its share of the total, divided by
  // `steps` (ms per step).
  std::string table(int64_t steps) const;

  // Called by the tape (autograd/tape.cpp, autograd/backward.cpp).
  void charge(const char* phase, const std::string& scope, const std::string& op);
  void restart();  // the clock only

 private:
  OpProfile* prev_;
  double last_;
  std::map<Key, Cost> costs_;
};

// Whether an OpProfile is alive on this thread.
bool profiling();

}  // namespace xg
