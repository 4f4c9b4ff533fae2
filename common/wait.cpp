#include "common/wait.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "common/cores.hpp"
#include "common/error.hpp"

namespace copse {

namespace {

// Sleepers per word, striped by address: wake_all skips the syscall when no
// thread can be asleep on the word. A stripe shared by several words only
// costs a spurious syscall, never a lost wake-up.
struct alignas(64) Stripe {
  std::atomic<std::uint32_t> sleepers{0};
};
constexpr std::size_t kStripes = 512;
Stripe g_stripes[kStripes];

Stripe& stripe_of(const void* address) {
  auto x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address));
  x = (x >> 2) * 0x9E3779B97F4A7C15ULL;
  return g_stripes[x >> 55];  // top 9 bits: 512 stripes
}

// Spinning only helps while a core is free to run the thread being waited
// for: at most one spinner per core the process may use, the rest go straight
// to the futex. With hundreds of emulated ranks on two cores, that keeps
// waiting threads from eating the time slices of the ones doing the work;
// with T <= cores ranks (say two threads exchanging on two cores) both sides
// of an exchange can spin, which is what keeps small messages off the futex.
// The cores are the process's (its main thread's affinity), not those of the
// first thread to wait, which may be pinned to a single core.
alignas(64) std::atomic<int> g_spinners{0};

constexpr auto kSpinBudget = std::chrono::microseconds(4);

long futex(const std::atomic<std::uint32_t>* word, int op, std::uint32_t val, const timespec* timeout) {
  // Linux's futex word is a plain aligned 32-bit integer; std::atomic<uint32_t>
  // is exactly that (lock-free, same size and representation).
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return syscall(SYS_futex, const_cast<std::atomic<std::uint32_t>*>(word), op, val, timeout, nullptr, 0);
}

// A futex timeout (relative, never negative).
timespec relative_timespec(std::chrono::nanoseconds timeout) {
  const auto ns = std::max<std::int64_t>(timeout.count(), 0);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  return ts;
}

// The hook of a cooperative scheduler running on this thread (wait.hpp).
thread_local CooperativeYield* t_yield = nullptr;

// Idle schedulers asleep (idle_enter .. idle_sleep/idle_leave), and the word
// they sleep on, bumped by wake_all while any are registered.
alignas(64) std::atomic<std::uint32_t> g_idle_sleepers{0};
alignas(64) std::atomic<std::uint32_t> g_idle_epoch{0};
// The newest epoch an idle scheduler has gone to sleep on (compared modulo
// 2^32). A scheduler can be asleep in the kernel only on the epoch's current
// value, so a waker that moves the epoch from E needs the wake-up system call
// only if some scheduler went to sleep on E: of the many wakers while the
// schedulers are registered (they look at their tasks once more before they
// sleep, and wakers keep coming after the first has woken them), one pays
// the call, the rest a fetch_add and a load. Before any sleep: one behind 0.
alignas(64) std::atomic<std::uint32_t> g_idle_ticket{~std::uint32_t{0}};

// `a` at or after `b` on the 32-bit circle of epochs.
bool at_or_after(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) >= 0; }

// A wait on a thread with a CooperativeYield: poll, and yield to the
// scheduler's other tasks while the word stands. The clock is read every few
// polls only (a poll is a load and a stack switch, cheaper than a clock
// read); deadline, report and check behave as in the futex path below, with
// check() every kWaitSleepSlice of waiting, as a sleeper would run it.
std::uint32_t cooperative_wait(const std::atomic<std::uint32_t>& word, std::uint32_t old, const WaitPolicy& policy,
                               CooperativeYield& hook) {
  using Clock = std::chrono::steady_clock;
  const bool reports = policy.report && policy.report_every > Clock::duration::zero();
  Deadline next_report = Deadline::max(), next_check = Deadline::max();
  bool clock_started = false;
  for (std::uint32_t i = 0;; ++i) {
    hook.yield(word, old, i > 0);
    const std::uint32_t v = word.load(std::memory_order_acquire);
    if (v != old) return v;
    if ((i & 7) != 7) continue;
    const auto now = Clock::now();
    if (!clock_started) {
      clock_started = true;
      if (reports) next_report = now + policy.report_every;
      if (policy.check) next_check = now + kWaitSleepSlice;
    }
    if (now >= policy.deadline)
      throw TimeoutError(policy.timeout_message ? policy.timeout_message() : std::string("wait timed out"));
    if (now >= next_report) {
      policy.report();
      next_report = now + policy.report_every;
    }
    if (now >= next_check) {
      policy.check();
      next_check = now + kWaitSleepSlice;
    }
  }
}

}  // namespace

YieldScope::YieldScope(CooperativeYield* hook) noexcept : previous_(t_yield) { t_yield = hook; }

YieldScope::~YieldScope() { t_yield = previous_; }

std::uint32_t idle_enter() {
  g_idle_sleepers.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with wake_all's fence: either that waker sees us registered, or
  // the caller's next look at its words sees the waker's store.
#if !defined(__SANITIZE_THREAD__)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  return g_idle_epoch.load(std::memory_order_acquire);
}

void idle_sleep(std::uint32_t ticket, std::chrono::nanoseconds timeout) {
  // Raise g_idle_ticket to `ticket`, always by a read-modify-write (written
  // back unchanged when it is newer already), ordered before the kernel's
  // look at the epoch: either that look sees a waker's fetch_add and does
  // not sleep, or that waker's load (after its fetch_add) sees the ticket
  // and makes the call. E.g. a scheduler takes ticket 7 and a waker moves the
  // epoch 7 -> 8 before the scheduler reaches the kernel: the kernel sees 8
  // and returns at once; had the scheduler been asleep on 7, the waker would
  // have read a ticket of 7 (or newer) and woken it.
  std::uint32_t newest = g_idle_ticket.load(std::memory_order_relaxed);
  while (!g_idle_ticket.compare_exchange_weak(newest, at_or_after(newest, ticket) ? newest : ticket,
                                              std::memory_order_seq_cst, std::memory_order_relaxed)) {
  }
  const timespec ts = relative_timespec(timeout);
  futex(&g_idle_epoch, FUTEX_WAIT_PRIVATE, ticket, &ts);  // woken, timed out, or the epoch moved: all fine
  idle_leave();
}

void idle_leave() { g_idle_sleepers.fetch_sub(1, std::memory_order_release); }

int spin_slots() {
  static const int slots = [] {
    const int cores = cpu_count(process_cpus());
    return cores > 1 ? cores : 0;  // one core: whoever we wait for needs it
  }();
  return slots;
}

std::uint32_t wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t old, const WaitPolicy& policy,
                               FutexScope scope, std::atomic<std::uint32_t>* sleepers, const SpinPolicy* spin) {
  std::uint32_t v = word.load(std::memory_order_acquire);
  if (v != old) return v;
  if (CooperativeYield* hook = t_yield) return cooperative_wait(word, old, policy, *hook);

  if (spin) {
    // The caller's spinning: a spin of pause instructions, if any, then
    // polls that yield the core (another rank on it gets to run) before the
    // futex. No clock read before the first 64 looks: a small message's
    // wait ends sooner.
    if (spin->spin.count() > 0) {
      Deadline spin_end{};
      for (int i = 1;; ++i) {
        cpu_relax();
        v = word.load(std::memory_order_acquire);
        if (v != old) break;
        if ((i & 63) == 0) {
          const auto now = std::chrono::steady_clock::now();
          if (spin_end == Deadline{})
            spin_end = now + spin->spin;
          else if (now >= spin_end)
            break;
        }
      }
    }
    if (v != old) return v;
    if (spin->poll.count() > 0) {
      const auto poll_end = std::chrono::steady_clock::now() + spin->poll;
      for (int i = 1;; ++i) {
        sched_yield();
        v = word.load(std::memory_order_acquire);
        if (v != old) return v;
        if ((i & 7) == 0 && std::chrono::steady_clock::now() >= poll_end) break;
      }
    }
  } else {
    // Spin briefly (bounded in time, not iterations: pause costs 10 to 140
    // cycles depending on the CPU) while a spinning slot is free.
    const int slots = spin_slots();
    if (slots > 0) {
      if (g_spinners.fetch_add(1, std::memory_order_relaxed) < slots) {
        const auto spin_end = std::chrono::steady_clock::now() + kSpinBudget;
        for (int i = 1;; ++i) {
          cpu_relax();
          v = word.load(std::memory_order_acquire);
          if (v != old) break;
          if ((i & 63) == 0 && std::chrono::steady_clock::now() >= spin_end) break;
        }
      }
      g_spinners.fetch_sub(1, std::memory_order_relaxed);
      if (v != old) return v;
    }
  }

  // Block. Register as a sleeper first (an RMW, so that a waker's RMW on the
  // same counter either sees us or we see its store to the word), then
  // re-check the word inside the futex call. Shared words are counted only
  // by a count beside them: their wakers may live in another process, and
  // without one always make the call.
  const bool shared = scope == FutexScope::shared;
  std::atomic<std::uint32_t>* count = sleepers ? sleepers : shared ? nullptr : &stripe_of(&word).sleepers;
  if (count) count->fetch_add(1, std::memory_order_acq_rel);
  struct Leave {
    std::atomic<std::uint32_t>* n;
    ~Leave() {
      if (n) n->fetch_sub(1, std::memory_order_release);
    }
  } leave{count};
  const int wait_op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  const bool reports = policy.report && policy.report_every > std::chrono::steady_clock::duration::zero();
  auto next_report = reports ? std::chrono::steady_clock::now() + policy.report_every : Deadline::max();
  for (bool slept = false;; slept = true) {
    v = word.load(std::memory_order_acquire);
    if (v != old) return v;
    const auto now = std::chrono::steady_clock::now();
    if (now >= policy.deadline)
      throw TimeoutError(policy.timeout_message ? policy.timeout_message() : std::string("wait timed out"));
    if (now >= next_report) {
      policy.report();
      next_report = now + policy.report_every;
    }
    // Not before the first sleep: most waits end within one, and the check
    // may be a system call.
    if (slept && policy.check) policy.check();
    const auto slice = std::min({policy.deadline - now, next_report - now,
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(kWaitSleepSlice)});
    const timespec ts = relative_timespec(std::chrono::duration_cast<std::chrono::nanoseconds>(slice));
    futex(&word, wait_op, old, &ts);  // EAGAIN, ETIMEDOUT, EINTR: just re-check
  }
}

void wake_all(std::atomic<std::uint32_t>& word, FutexScope scope, std::atomic<std::uint32_t>* sleepers) {
  // Idle cooperative schedulers first (see idle_enter): the fence orders the
  // caller's store to `word` before the look at their count. ThreadSanitizer
  // knows no fences: an RMW on the count does the same (a shared cache line
  // for every waker, which the fence avoids).
#if defined(__SANITIZE_THREAD__)
  const bool idle = g_idle_sleepers.fetch_add(0, std::memory_order_acq_rel) != 0;
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool idle = g_idle_sleepers.load(std::memory_order_relaxed) != 0;
#endif
  if (idle) {
    const std::uint32_t before = g_idle_epoch.fetch_add(1, std::memory_order_seq_cst);
    if (at_or_after(g_idle_ticket.load(std::memory_order_seq_cst), before))  // see g_idle_ticket
      futex(&g_idle_epoch, FUTEX_WAKE_PRIVATE, static_cast<std::uint32_t>(INT_MAX), nullptr);
  }
  const int wake_op = scope == FutexScope::shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  std::atomic<std::uint32_t>* count = sleepers                      ? sleepers
                                      : scope == FutexScope::shared ? nullptr
                                                                    : &stripe_of(&word).sleepers;
  // An RMW rather than a load: it is ordered after the caller's store to
  // `word` and totally ordered with the sleepers' increments (see above).
  if (count && count->fetch_add(0, std::memory_order_acq_rel) == 0) return;
  futex(&word, wake_op, static_cast<std::uint32_t>(INT_MAX), nullptr);
}

}  // namespace copse
