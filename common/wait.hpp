#pragma once
// Waiting that survives oversubscription: spin briefly, then block on a
// futex, with a deadline. Hundreds of emulated ranks share two cores, so a
// pure spin loop would starve the very thread being waited for.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace copse {

using Deadline = std::chrono::steady_clock::time_point;

// Who may wait on a word. `process` (the default) is for words only this
// process's threads touch: private futexes, and a per-process count of
// sleepers lets wake_all skip the system call when nobody sleeps. `shared` is
// for words in memory mapped by several processes (a ShmArena): shared futex
// operations keyed by the physical page, and wake_all always makes the call,
// since sleepers in other processes are not counted here.
enum class FutexScope : std::uint8_t { process, shared };

// What a blocked wait may do besides waiting. Past `deadline` it throws
// TimeoutError with timeout_message() as its text; every `report_every` (when
// non-zero) it calls report() and goes on waiting -- for callers that must not
// give up on a slow peer but should say who they are waiting for. check(),
// when set, runs each time a sleep slice ends (at least every
// kWaitSleepSlice): it throws to end a wait that can no longer succeed (the
// peer's process has died), so that a dead peer is noticed within a slice.
struct WaitPolicy {
  Deadline deadline = Deadline::max();
  std::chrono::steady_clock::duration report_every{0};
  std::function<std::string()> timeout_message;  // empty: "wait timed out"
  std::function<void()> report;
  std::function<void()> check;
};

// The longest a blocked wait sleeps before it looks at its deadline, report
// and check again.
inline constexpr std::chrono::milliseconds kWaitSleepSlice{100};

// One pause of a spin loop: tells the core (and a hyperthread sibling) that
// this thread is only waiting. The waits here and the executor's polling use it.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// How waits on shared words spin before they sleep, when the default (a
// short spin per core of the process's affinity, see wait.cpp) does not fit:
// processes pinned one per core each see a single core, though the ranks
// they wait for run on other cores. A waiter spins `spin` (waiters that each
// have a core; 0 where ranks share cores: a spin there only keeps the rank
// waited for off the core), then polls, yielding the core between looks,
// for `poll` more before it sleeps on the futex.
struct SpinPolicy {
  std::chrono::nanoseconds spin{0};
  std::chrono::nanoseconds poll{0};
};

// How many waiters of this process may spin at once without starving the
// threads they wait for: the cores of the process's affinity, or 0 on a
// single core (whoever we wait for needs it).
int spin_slots();

// Blocks until `word` != `old`: a short spin, then a sleep on the futex, under
// `policy`. Returns the new value. `sleepers`, when given, is the word's own
// count of sleepers, kept beside it (for a word in shared memory, where the
// process's own count cannot see other processes' sleepers): the waker passes
// it too and skips the system call while it is 0. `spin`, when given,
// replaces the default spinning.
std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old, const WaitPolicy& policy,
                               FutexScope scope = FutexScope::process, std::atomic<std::uint32_t>* sleepers = nullptr,
                               const SpinPolicy* spin = nullptr);

// Wakes every thread blocked in wait_while_equal on `word` (with the same
// scope and sleepers count), and every idle_sleep() of this process.
void wake_all(std::atomic<std::uint32_t>& word, FutexScope scope = FutexScope::process,
              std::atomic<std::uint32_t>* sleepers = nullptr);

// ---- Cooperative waiting: many tasks on one thread ----
//
// A user-level scheduler (the emulator runs thousands of ranks as fibers on
// one thread per core) installs a CooperativeYield on its thread while its
// tasks run. wait_while_equal on that thread then never sleeps on the futex:
// it polls the word and, while it is unchanged, calls yield() so that the
// scheduler runs its other tasks -- a switch of stacks, where a futex would
// cost a system call and a wake-up per rank switch. Deadline, report and
// check keep their meaning and messages. Such a waiter is not counted as a
// sleeper, so its wakers skip the system call; waiters on other threads
// without a hook sleep and are woken as before.
class CooperativeYield {
 public:
  // Runs other tasks and returns to the caller later. The caller waits for
  // `word` to leave `old`: while it stands the scheduler may look at the word
  // itself instead of switching back to a caller that would only find it
  // unchanged -- as long as it still returns now and then, since the caller
  // reads its clock (deadline, report, check) every few returns. `again`:
  // false on the first call of a wait (the caller got somewhere since it last
  // yielded), true once the caller has looked again and found nothing new --
  // a scheduler whose every task yields `again` is idle.
  virtual void yield(const std::atomic<std::uint32_t>& word, std::uint32_t old, bool again) = 0;

 protected:
  ~CooperativeYield() = default;
};

// Installs `hook` on the calling thread for the scope's lifetime (the
// previous one, usually none, comes back after it).
class YieldScope {
 public:
  explicit YieldScope(CooperativeYield* hook) noexcept;
  ~YieldScope();
  YieldScope(const YieldScope&) = delete;
  YieldScope& operator=(const YieldScope&) = delete;

 private:
  CooperativeYield* previous_;
};

// A scheduler whose tasks all wait may sleep until some thread of the process
// calls wake_all (or `timeout` passes), instead of polling on: idle_enter()
// registers it and returns a ticket; it then looks at its tasks' words once
// more (each task polls) and, if none changed, calls idle_sleep(ticket, ...),
// else idle_leave(). While nobody is registered, wake_all pays a fence and a
// load for this, never a system call.
std::uint32_t idle_enter();
void idle_sleep(std::uint32_t ticket, std::chrono::nanoseconds timeout);
void idle_leave();

}  // namespace copse
