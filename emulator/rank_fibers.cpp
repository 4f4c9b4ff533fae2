#include "emulator/rank_fibers.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/wait.hpp"

// Ranks run as fibers on a worker thread per core (RankThreads, below),
// except under AddressSanitizer and ThreadSanitizer: a thread per rank there.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define COPSE_RANK_FIBERS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COPSE_RANK_FIBERS 0
#endif
#endif
#ifndef COPSE_RANK_FIBERS
#define COPSE_RANK_FIBERS 1
#endif

namespace copse {

// ---- RankThreads: ranks as fibers on one worker thread per core ----
//
// Each worker thread sleeps on its own word until start() bumps it, runs its
// share of the ranks, and counts itself off `pending`; the last one wakes
// wait(). The job (body, ranks, stopping) is written before the bump (a
// release) and read after seeing it (an acquire).
//
// A worker runs its ranks as stackful fibers (Boost.Context), round robin:
// it installs itself as the thread's CooperativeYield (common/wait.hpp), so
// a rank's wait polls its word and, while it stands, switches to the next
// fiber -- a few nanoseconds of register saving, where a thread per rank paid
// a futex sleep and wake-up per switch. Whatever else a rank body does must
// not block the worker thread (a mutex held across a wait, a condition
// variable, a sleep): the other ranks of the worker would stall behind it.
// The emulator's rank path waits only in wait_while_equal (link_engine.cpp:
// links and barrier); its one mutex (Cluster::fail) is never held across a
// wait. A worker whose fibers all wait for longer than its spin limit (at
// most kIdleSpin, adapting: see there) sleeps until some thread calls wake_all (idle_enter/idle_sleep), so ranks
// waiting for the main thread (the reference, the first barrier) or for a slow peer do not burn the core.
//
// Under AddressSanitizer and ThreadSanitizer the ranks run as before on a
// thread each: Boost 1.74 as Debian builds it has no sanitizer annotations
// for its stack switches, and both sanitizers would misread a switch (ASan's
// stack bounds, TSan's per-thread clocks). The sanitizer builds therefore
// check the protocol with a thread per rank, not the fiber scheduler
// (COPSE_RANK_FIBERS, at the top).

namespace {

constexpr bool kRankFibers = COPSE_RANK_FIBERS != 0;
#if !COPSE_RANK_FIBERS
constexpr std::size_t kStackBytes = std::size_t{4} << 20;
#else
constexpr std::size_t kStackBytes = std::size_t{256} << 10;  // thousands of ranks start quickly
#endif
// A worker whose fibers all wait polls them for up to its spin limit, then
// sleeps. The limit adapts between kIdleSpinMin and kIdleSpin, as glibc's
// adaptive mutexes do: halved when the wait outlasted it (the peer worker
// is slow or, on a shared machine, off its core, and spinning only burns the
// core it needs: under ctest -j2 a small-message emulation on two workers
// spent four times the CPU of one worker), and moved up towards twice what
// the waits that spinning caught have taken.
constexpr auto kIdleSpin = std::chrono::microseconds(100);
constexpr auto kIdleSpinMin = std::chrono::microseconds(10);
constexpr auto kIdleNapMax = std::chrono::milliseconds(5);  // longest sleep before the fibers look again
constexpr std::uint32_t kPassOver = 8;                      // a waiting rank whose word stands runs every 8th sweep

std::size_t page_bytes() {
  static const std::size_t page = static_cast<std::size_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
  return page;
}

// Fiber stacks of kStackBytes, each below a guard page, kept for the next
// job: the acceptance matrix runs thousands of emulations on one RankThreads.
// Only the worker that owns the pool takes and returns stacks while a job
// runs; start() grows it between jobs, before any body runs.
class StackPool {
 public:
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (const auto& s : free_) munmap(static_cast<std::byte*>(s.sp) - s.size - page_bytes(), s.size + page_bytes());
  }

  // Makes sure `n` stacks are free; SystemError if the system refuses one.
  void reserve(std::size_t n) {
    while (free_.size() < n) {
      const std::size_t bytes = kStackBytes + page_bytes();
      void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED)
        throw SystemError("emulator: cannot map a rank's stack (" + std::to_string(kStackBytes >> 10) + " KiB) after " +
                          std::to_string(free_.size()) + ": " + std::strerror(errno));
      if (mprotect(base, page_bytes(), PROT_NONE) != 0) {
        const int error = errno;
        munmap(base, bytes);
        throw SystemError("emulator: cannot guard a rank's stack: " + std::string(std::strerror(error)));
      }
      boost::context::stack_context s;
      s.size = kStackBytes;
      s.sp = static_cast<std::byte*>(base) + bytes;  // stacks grow down from here
      free_.push_back(s);
    }
  }
  boost::context::stack_context take() {
    reserve(1);  // start() reserved every stack of the job; this never maps
    const auto s = free_.back();
    free_.pop_back();
    return s;
  }
  void give_back(const boost::context::stack_context& s) noexcept { free_.push_back(s); }

 private:
  std::vector<boost::context::stack_context> free_;
};

// Boost.Context's stack allocator concept over a pool.
struct PooledStack {
  StackPool* pool;
  boost::context::stack_context allocate() { return pool->take(); }
  void deallocate(boost::context::stack_context& s) noexcept { pool->give_back(s); }
};

// The C++ runtime keeps the exceptions being handled per thread (a list
// that catch blocks push and pop). A rank may wait inside a catch block (the
// step executor withdraws its transfers there), and another fiber of the
// same worker may throw and catch meanwhile: each fiber keeps its own copy,
// swapped in and out with the fiber (as Folly's fibers do).
struct EhState {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};

void swap_eh(EhState& mine) noexcept {
  auto* globals = reinterpret_cast<EhState*>(abi::__cxa_get_globals());
  std::swap(*globals, mine);
}

}  // namespace

struct RankThreads::Impl {
  struct Task {
    int rank = 0;
    bool done = false;
    boost::context::fiber fiber;  // the rank, suspended
    boost::context::fiber sink;   // the worker's scheduler, while the rank runs
    EhState eh;
    // The word the rank waits on, suspended in wait_while_equal, and the
    // value it waits to see leave; none when it yielded otherwise.
    const std::atomic<std::uint32_t>* watched = nullptr;
    std::uint32_t watched_old = 0;
    std::uint32_t passed_over = 0;  // sweeps since it last ran while it waits
  };

  struct alignas(64) Worker final : CooperativeYield {
    std::atomic<std::uint32_t> go{0};
    int index = 0;
    Impl* pool = nullptr;
    pthread_t thread{};
    std::vector<int> ranks;  // this job's
    StackPool stacks;
    std::vector<Task> tasks;
    Task* current = nullptr;
    bool again = false;                               // the current fiber yielded from a wait without progress
    std::chrono::nanoseconds spin_limit = kIdleSpin;  // adapts: see kIdleSpin

    // A wait that spinning caught after `waited`: the limit moves an eighth
    // of the way to twice that.
    void spun(std::chrono::nanoseconds waited) {
      const auto target = std::clamp<std::chrono::nanoseconds>(2 * waited, kIdleSpinMin, kIdleSpin);
      spin_limit += (target - spin_limit) / 8;
    }

    void yield(const std::atomic<std::uint32_t>& word, std::uint32_t old, bool looked_again) override {
      again = looked_again;
      Task& t = *current;
      t.watched = &word;
      t.watched_old = old;
      t.sink = std::move(t.sink).resume();
      t.watched = nullptr;
    }

    // One round over the unfinished fibers; true if any got somewhere
    // (started, finished, or yielded from a wait it had not yielded from).
    // A rank whose word still stands is passed over, not switched to: it
    // would only load the word and yield back (two stack switches and the
    // exception state's swaps, most of a sweep's cost over 50 waiting ranks).
    // It still runs every kPassOver-th sweep, and on every `full` one, to
    // read its clock for its deadline, report and check; the idle worker's
    // sweep before it sleeps is full, so that those keep their pace.
    bool sweep(std::size_t& live, bool full) {
      bool progress = false;
      for (Task& t : tasks) {
        if (t.done) continue;
        if (t.watched && !full && ++t.passed_over < kPassOver &&
            t.watched->load(std::memory_order_relaxed) == t.watched_old)
          continue;
        t.passed_over = 0;
        current = &t;
        again = false;
        if (!t.fiber) {
          t.fiber =
              boost::context::fiber(std::allocator_arg, PooledStack{&stacks}, [this, &t](boost::context::fiber&& sink) {
                t.sink = std::move(sink);
                (*pool->body)(t.rank);
                return std::move(t.sink);
              });
        }
        swap_eh(t.eh);
        t.fiber = std::move(t.fiber).resume();
        swap_eh(t.eh);
        if (!t.fiber) {
          t.done = true;
          --live;
          progress = true;
        } else if (!again) {
          progress = true;
        }
      }
      current = nullptr;
      return progress;
    }

    void run_fibers() {
      tasks.clear();
      tasks.resize(ranks.size());  // never grows while fibers point into it
      for (std::size_t i = 0; i < ranks.size(); ++i) tasks[i].rank = ranks[i];
      std::size_t live = tasks.size();
      const YieldScope scope(this);
      using Clock = std::chrono::steady_clock;
      std::optional<Clock::time_point> idle_since;
      Clock::time_point last_look{};
      bool slept = false;  // in this idle spell
      while (live > 0) {
        if (sweep(live, false)) {
          if (idle_since && !slept) spun(last_look - *idle_since);
          idle_since.reset();
          slept = false;
          continue;
        }
        const auto now = Clock::now();
        last_look = now;
        if (!idle_since) idle_since = now;
        const auto idle = now - *idle_since;
        if (idle < spin_limit) continue;
        if (!slept) spin_limit = std::max<std::chrono::nanoseconds>(spin_limit / 2, kIdleSpinMin);
        slept = true;
        // Idle for a while: register, look once more, and sleep until a
        // wake_all (each of our fibers waits for some peer's store, followed
        // by its wake_all), at most a quarter of the idle time so far: the
        // fibers' deadlines and reports are read by the fibers themselves.
        const std::uint32_t ticket = idle_enter();
        if (sweep(live, true)) {
          idle_leave();
          idle_since.reset();
          slept = false;
          continue;
        }
        idle_sleep(ticket, std::min<std::chrono::nanoseconds>(idle / 4, kIdleNapMax));
      }
      tasks.clear();
    }

    void run_job() {
      if constexpr (kRankFibers) {
        run_fibers();
      } else {
        for (int r : ranks) (*pool->body)(r);  // a thread per rank: one each
      }
    }
  };

  std::vector<std::unique_ptr<Worker>> workers;
  int slots = 0;         // the largest rank count started
  int most_workers = 0;  // fibers: at most this many workers (0: one per core)
  const std::function<void(int)>* body = nullptr;
  bool stopping = false;
  alignas(64) std::atomic<std::uint32_t> pending{0};

  static void* main(void* arg) {
    auto* w = static_cast<Worker*>(arg);
    Impl& pool = *w->pool;
    std::uint32_t seen = 0;
    for (;;) {
      seen = wait_while_equal(w->go, seen, WaitPolicy{});
      if (pool.stopping) return nullptr;
      w->run_job();
      if (pool.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) wake_all(pool.pending);
    }
  }
};

RankThreads::RankThreads(int workers) : impl_(std::make_unique<Impl>()) {
  if (workers < 0) throw UsageError("emulator: " + std::to_string(workers) + " worker threads");
  impl_->most_workers = workers;
}

RankThreads::~RankThreads() {
  wait();
  impl_->stopping = true;
  for (auto& w : impl_->workers) {
    w->go.fetch_add(1, std::memory_order_release);
    wake_all(w->go);
  }
  for (auto& w : impl_->workers) pthread_join(w->thread, nullptr);
}

int RankThreads::size() const { return impl_->slots; }

void RankThreads::start(int n, const std::function<void(int)>& body) {
  Impl& pool = *impl_;
  wait();  // one job at a time
  n = std::max(n, 0);
  // Workers: one per core with fibers (never more than ranks), else one per rank.
  // The cores of the process's affinity (spin_slots() says 0 for one core).
  int cores = std::max(spin_slots(), 1);
  if (pool.most_workers > 0) cores = std::min(cores, pool.most_workers);
  const int w_count = kRankFibers ? std::min(cores, n) : n;
  if (w_count > static_cast<int>(pool.workers.size())) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kStackBytes);
    pool.workers.reserve(static_cast<std::size_t>(w_count));
    for (int i = static_cast<int>(pool.workers.size()); i < w_count; ++i) {
      auto w = std::make_unique<Impl::Worker>();
      w->index = i;
      w->pool = &pool;
      const int rc = pthread_create(&w->thread, &attr, &Impl::main, w.get());
      if (rc != 0) {
        pthread_attr_destroy(&attr);
        throw SystemError("emulator: cannot start " +
                          std::string(kRankFibers ? "worker thread " : "the thread of rank ") + std::to_string(i) +
                          " of " + std::to_string(w_count) + ": " + std::strerror(rc));
      }
      pool.workers.push_back(std::move(w));
    }
    pthread_attr_destroy(&attr);
  }
  // Ranks in contiguous runs, so that a node's ranks mostly share a worker
  // (bench_emulator: about 10% faster per repetition than rank r on worker
  // r % workers).
  for (int i = 0; i < w_count; ++i) {
    Impl::Worker& w = *pool.workers[static_cast<std::size_t>(i)];
    const auto first = static_cast<int>(static_cast<long long>(n) * i / w_count);
    const auto last = static_cast<int>(static_cast<long long>(n) * (i + 1) / w_count);
    w.ranks.clear();
    for (int r = first; r < last; ++r) w.ranks.push_back(r);
    if constexpr (kRankFibers) w.stacks.reserve(w.ranks.size());  // nothing runs if the system refuses
  }
  pool.slots = std::max(pool.slots, n);
  pool.body = &body;
  pool.pending.store(static_cast<std::uint32_t>(w_count), std::memory_order_relaxed);
  for (int i = 0; i < w_count; ++i) {
    Impl::Worker& w = *pool.workers[static_cast<std::size_t>(i)];
    w.go.fetch_add(1, std::memory_order_release);
    wake_all(w.go);
  }
}

void RankThreads::wait() {
  std::uint32_t left = impl_->pending.load(std::memory_order_acquire);
  while (left != 0) left = wait_while_equal(impl_->pending, left, WaitPolicy{});
}

bool RankThreads::fibers() { return kRankFibers; }

}  // namespace copse
