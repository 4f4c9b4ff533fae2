#pragma once
// The emulator's scheduler (emulator/emulator.hpp): its ranks as fibers on a
// worker thread per core, or a thread each under the sanitizers.

#include <functional>
#include <memory>

namespace copse {

// Where emulated ranks run, kept from one emulation to the next. The ranks
// are user-level tasks (fibers) on one worker thread per core of the
// process's affinity: a rank that waits (wait_while_equal) yields to the next
// rank of its worker instead of sleeping on a futex, so thousands of ranks
// on two cores switch at the cost of a stack switch (rank_fibers.cpp; under
// AddressSanitizer or ThreadSanitizer, a thread per rank instead). By
// default emulate() starts the workers and joins them at the end. A caller
// that runs many emulations in a row (the acceptance matrix runs thousands)
// can keep one RankThreads and hand it over in EmulatorConfig::threads: its
// workers and the ranks' stacks are made once and kept between emulations.
// One emulation at a time per RankThreads; no state is shared between two of
// them.
class RankThreads {
 public:
  // `workers`: at most that many worker threads (0: one per core). One
  // worker runs every rank of a job without waits across threads: on cores
  // that other programs share, a small-message emulation on two workers
  // costs several times the CPU of one (each worker waits, spinning or in
  // the kernel, for ranks of the other while it is off its core).
  explicit RankThreads(int workers = 0);
  ~RankThreads();  // ends and joins every thread (none may be running a body)
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  // Runs body(0), ..., body(n-1) concurrently, each as a task of its own, and
  // returns at once. Starts the workers and stacks it lacks first; if the
  // system refuses one, throws SystemError naming it, and no body has run.
  // `body` must not throw and must stay alive until wait() returns. A body
  // waits for the others only through wait_while_equal (common/wait.hpp):
  // anything else that blocks its thread (a condition variable, a mutex held
  // across a wait, a sleep, a spin on a word) stalls the other bodies of its
  // worker, and a spin until they move never ends.
  void start(int n, const std::function<void(int)>& body);
  // Returns once every body of the last start() has returned.
  void wait();
  // The most bodies started at once so far.
  int size() const;
  // Whether bodies run as fibers (false under AddressSanitizer and
  // ThreadSanitizer: a thread each).
  static bool fibers();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace copse
