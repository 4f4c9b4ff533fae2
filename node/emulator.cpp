#include "node/emulator.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/wait.hpp"
#include "internode/simulator.hpp"
#include "intranode/arena.hpp"
#include "intranode/link_engine.hpp"
#include "intranode/step_executor.hpp"

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

namespace {

constexpr bool kRankFibers = COPSE_RANK_FIBERS != 0;

struct alignas(64) RankOutcome {
  Picos finish = 0;
  bool virtual_time_changed = false;
  int bad_repetition = -1;  // first repetition with a wrong result
  std::uint64_t bad_element = 0;
  std::string bad_value;  // what the rank held there
};

std::string format_element(const ReduceOp& op, const std::byte* p) {
  std::ostringstream out;
  const std::size_t scalar = dtype_size(op.dtype);
  if (op.element_bytes % scalar != 0) {
    out << "0x";
    static const char* hex = "0123456789abcdef";
    for (std::size_t i = 0; i < op.element_bytes; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      out << hex[b >> 4] << hex[b & 15];
    }
    return out.str();
  }
  const std::size_t n = op.element_bytes / scalar;
  if (n > 1) out << '(';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out << ", ";
    with_dtype(op.dtype, [&](auto v) {
      std::memcpy(&v, p + i * scalar, sizeof(v));
      if constexpr (sizeof(v) == 1)
        out << static_cast<int>(v);
      else
        out << v;
    });
  }
  if (n > 1) out << ')';
  return out.str();
}

std::size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

class Cluster {
 public:
  Cluster(const AlgorithmInfo& algorithm, SchedulePlan plan, const Shape& shape, const ReduceOp& op,
          const EmulatorConfig& config, std::optional<std::span<const std::byte>> expected)
      : algorithm_(algorithm),
        plan_(std::move(plan)),
        shape_(shape),
        op_(op),
        config_(config),
        p_(shape.ranks),
        eb_(op.element_bytes),
        n_(vector_elements(algorithm.collective, shape)),
        bytes_(static_cast<std::size_t>(n_ * op.element_bytes)),
        given_(expected) {}

  EmulationResult run();

  // Thread entry; never throws.
  void rank_main(int rank) noexcept;

 private:
  void materialise();
  void compute_reference();
  void fail(std::exception_ptr error) noexcept;
  void prepare(LinkRank& c, std::byte* y);
  void barrier(LinkRank& c);
  void verify(LinkRank& c, const std::byte* y);

  const AlgorithmInfo& algorithm_;
  SchedulePlan plan_;
  const Shape shape_;
  const ReduceOp& op_;
  const EmulatorConfig& config_;
  const int p_;
  const std::size_t eb_;
  const std::uint64_t n_;    // elements in each rank's vector (ranks x count for allgather, reduce_scatter)
  const std::size_t bytes_;  // per rank vector

  // The plan, materialised once: rank r's steps are steps_[first_[r] .. first_[r+1]).
  std::vector<Step> steps_;
  std::vector<std::size_t> first_;
  std::vector<std::uint64_t> scratch_elements_;  // per rank

  // Every rank's working buffer and scratch, and the link state, live in one
  // arena owned here, not on rank threads, so that an aborted rank never
  // frees memory a peer may still be reading. Buffers come from one mapping
  // (huge pages where the kernel offers them: fewer page faults for hundreds
  // of MiB), untouched until each rank fills its own slot.
  HeapArena arena_;
  std::unique_ptr<LinkEngine> engine_;
  std::byte* buffers_ = nullptr;
  std::vector<std::size_t> buffer_offset_;           // per rank: Y at buffers_ + offset, scratch right after
  std::optional<std::span<const std::byte>> given_;  // the caller's reference, if any
  std::vector<std::byte> reference_;                 // else the one computed here
  std::span<const std::byte> expected_;              // what a verified rank holds: one of the two

  std::unique_ptr<RankOutcome[]> outcome_;
  std::vector<double> wall_;         // [repetition * p + rank]
  std::vector<Timeline> timelines_;  // per rank, with config_.record_timeline: the last repetition's

  std::mutex error_mutex_;
  std::exception_ptr error_;
};

void Cluster::materialise() {
  const SchedulePlan& plan = plan_;
  if (!plan) throw ScheduleError("algorithm '" + std::string(algorithm_.name) + "' produced no plan");
  first_.assign(static_cast<std::size_t>(p_) + 1, 0);
  scratch_elements_.assign(static_cast<std::size_t>(p_), 0);
  for (int r = 0; r < p_; ++r) {
    first_[static_cast<std::size_t>(r)] = steps_.size();
    scratch_elements_[static_cast<std::size_t>(r)] = compile_steps(plan, r, p_, n_, steps_);
  }
  first_[static_cast<std::size_t>(p_)] = steps_.size();
}

// What a verified rank holds: the root's input (bcast), every rank's block in
// rank order (allgather), or the reduction of every rank's whole vector (the
// others; a reduce_scatter rank checks only its own block of it).
void Cluster::compute_reference() {
  if (given_) {
    expected_ = *given_;
    return;
  }
  switch (algorithm_.collective) {
    case Collective::bcast:
      reference_.resize(bytes_);
      fill_input(op_, shape_.root, n_, reference_.data());
      break;
    case Collective::allgather:
      reference_.resize(bytes_);
      for (int b = 0; b < p_; ++b)
        fill_input(op_, b, shape_.count, reference_.data() + static_cast<std::size_t>(b) * shape_.count * eb_);
      break;
    default: reference_ = reference_result(op_, p_, n_);
  }
  expected_ = reference_;
}

void Cluster::fail(std::exception_ptr error) noexcept {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::move(error);
  }
  if (engine_) engine_->abort();
}

void Cluster::barrier(LinkRank& c) {
  // The main thread joins the first barrier once the reference is ready.
  engine_->barrier(c, static_cast<std::uint32_t>(p_) + (c.round == 0 ? 1U : 0U));
}

// The rank's input, generated afresh (as fast as copying a saved one, and
// half the memory); a bcast non-root starts from poison.
void Cluster::prepare(LinkRank& c, std::byte* y) {
  if (bytes_ == 0) return;
  if (algorithm_.collective == Collective::allgather) {  // only its own block is a rank's input
    std::memset(y, 0xA5, bytes_);
    fill_input(op_, c.rank, shape_.count, y + static_cast<std::size_t>(c.rank) * shape_.count * eb_);
  } else if (algorithm_.collective != Collective::bcast) {
    fill_input(op_, c.rank, n_, y);
  } else if (c.rank == shape_.root) {
    fill_input(op_, shape_.root, n_, y);
  } else {
    std::memset(y, 0xA5, bytes_);
  }
}

void Cluster::verify(LinkRank& c, const std::byte* y) {
  if (algorithm_.collective == Collective::reduce && c.rank != shape_.root) return;
  // A reduce_scatter rank is only responsible for its own block.
  std::uint64_t first = 0, last = n_;
  if (algorithm_.collective == Collective::reduce_scatter)
    first = static_cast<std::uint64_t>(c.rank) * shape_.count, last = first + shape_.count;
  const std::size_t from = static_cast<std::size_t>(first) * eb_, length = static_cast<std::size_t>(last - first) * eb_;
  if (length == 0 || std::memcmp(y + from, expected_.data() + from, length) == 0) return;
  RankOutcome& out = outcome_[static_cast<std::size_t>(c.rank)];
  if (out.bad_repetition >= 0) return;
  out.bad_repetition = c.round;
  for (std::uint64_t e = first; e < last; ++e) {
    if (std::memcmp(y + e * eb_, expected_.data() + e * eb_, eb_) != 0) {
      out.bad_element = e;
      out.bad_value = format_element(op_, y + e * eb_);
      break;
    }
  }
}

void Cluster::rank_main(int rank) noexcept {
  LinkRank c;
  c.rank = rank;
  c.clock = RankClock(config_.model.ports());
  const auto r = static_cast<std::size_t>(rank);
  try {
    // Buffers: first touched by the rank itself (in prepare()).
    std::byte* y = buffers_ + buffer_offset_[r];
    std::byte* scratch = scratch_elements_[r] > 0 ? y + round_up(bytes_, 64) : nullptr;
    const std::span<const Step> steps(steps_.data() + first_[r], first_[r + 1] - first_[r]);
    RankOutcome& out = outcome_[r];
    StepExecutor executor(*engine_);
    for (int rep = 0; rep < config_.repetitions; ++rep) {
      c.round = rep;
      prepare(c, y);
      c.clock.reset();
      if (!config_.start.empty()) arrive_at(c.clock, config_.start[r]);
      barrier(c);
      const auto t0 = std::chrono::steady_clock::now();
      Timeline* timeline = nullptr;
      if (config_.record_timeline && rep + 1 == config_.repetitions) {
        timeline = &timelines_[r];
        timeline->reserve(3 * steps.size());
      }
      executor.run(c, steps, y, scratch, op_, timeline);
      const auto t1 = std::chrono::steady_clock::now();
      wall_[static_cast<std::size_t>(rep) * static_cast<std::size_t>(p_) + r] =
          std::chrono::duration<double>(t1 - t0).count();
      if (rep == 0)
        out.finish = c.clock.now();
      else if (c.clock.now() != out.finish)
        out.virtual_time_changed = true;
      verify(c, y);
    }
  } catch (const LinkAborted&) {
    // Another rank failed; its error is the one reported.
  } catch (...) {
    fail(std::current_exception());
  }
}

// Linux 6.16+ gives each multi-threaded process a private futex hash sized by
// its CPU count (16 buckets on two cores): thousands of sleeping ranks would
// share them, and every wake would walk hundreds of waiters. Ask for about
// four buckets per thread (a process-wide setting; only ever grown). Older
// kernels refuse the request and keep their global hash, which is fine.
void widen_futex_hash(int threads) {
  constexpr int kPrFutexHash = 78, kSetSlots = 1, kGetSlots = 2;
  unsigned long want = 16;
  while (want < 4UL * static_cast<unsigned long>(threads) && want < (1UL << 16)) want <<= 1;
  const int have = prctl(kPrFutexHash, kGetSlots, 0UL, 0UL, 0UL);
  if (have < 0 || static_cast<unsigned long>(have) >= want) return;
  (void)prctl(kPrFutexHash, kSetSlots, want, 0UL, 0UL);
}

#if !COPSE_RANK_FIBERS
constexpr std::size_t kStackBytes = std::size_t{4} << 20;
#else
constexpr std::size_t kStackBytes = std::size_t{256} << 10;  // thousands of ranks start quickly
#endif

EmulationResult Cluster::run() {
  if (given_ && given_->size() != bytes_)
    throw UsageError("the expected result has " + std::to_string(given_->size()) + " bytes, but each rank holds " +
                     std::to_string(bytes_));
  materialise();
  const auto p = static_cast<std::size_t>(p_);
  buffer_offset_.resize(p);
  // Buffers: the vector (and scratch) of every rank, in 4 KiB-aligned slots
  // so that no two ranks' data share a cache line. Sizes are in long double
  // first so that absurd shapes are refused rather than wrapped around.
  long double total = 0;
  std::size_t arena_bytes = 0;
  for (std::size_t r = 0; r < p; ++r) {
    buffer_offset_[r] = arena_bytes;
    const long double scratch = static_cast<long double>(scratch_elements_[r]) * static_cast<long double>(eb_);
    total += static_cast<long double>(n_) * static_cast<long double>(eb_) + scratch + 4224;
    if (total > static_cast<long double>(physical_memory())) break;
    arena_bytes += round_up(bytes_, 64) + round_up(static_cast<std::size_t>(scratch), 64);
    arena_bytes = round_up(arena_bytes, 4096);
  }
  if (total > static_cast<long double>(physical_memory()))
    throw UsageError("emulating " + std::to_string(p_) + " ranks of " + std::to_string(n_) +
                     " elements needs more memory than this machine has (" + std::to_string(physical_memory() >> 20) +
                     " MiB)");
  buffers_ = arena_.address(arena_.allocate(std::max<std::size_t>(arena_bytes, 4096), 4096));
  engine_ = std::make_unique<LinkEngine>(
      arena_, LinkEngine::create_shared(arena_, p_),
      executor_config(config_.layout,
                      config_.model.for_schedule(plan_, p_, config_.layout),  // the same NicLoad as the simulator's
                      wait_settings(config_.wait_timeout, "repetition")));
  outcome_ = std::make_unique<RankOutcome[]>(p);
  wall_.assign(p * static_cast<std::size_t>(config_.repetitions), 0.0);
  if (config_.record_timeline) timelines_.resize(p);

  if (!kRankFibers && p_ >= 64) widen_futex_hash(p_ + 1);  // fibers: a few threads only
  // The ranks' threads: the caller's, or threads of their own for this run.
  std::optional<RankThreads> own;
  RankThreads& threads = config_.threads ? *config_.threads : own.emplace();
  const std::function<void(int)> body = [this](int r) { rank_main(r); };
  threads.start(p_, body);  // nothing runs if a thread cannot be started

  // The reference is computed here while the ranks set up; the first
  // repetition starts when both are done.
  try {
    compute_reference();
    engine_->arrive(static_cast<std::uint32_t>(p_) + 1);
  } catch (...) {
    fail(std::current_exception());
  }
  threads.wait();
  if (error_) std::rethrow_exception(error_);

  EmulationResult result;
  result.blocks = blocks_used(algorithm_, shape_);
  result.virtual_finish.resize(p);
  int bad_rep = -1, bad_rank = -1, changed_rank = -1;
  for (std::size_t r = 0; r < p; ++r) {
    const RankOutcome& o = outcome_[r];
    result.virtual_finish[r] = o.finish;
    result.virtual_time = std::max(result.virtual_time, o.finish);
    if (o.bad_repetition >= 0 && (bad_rep < 0 || o.bad_repetition < bad_rep))
      bad_rep = o.bad_repetition, bad_rank = static_cast<int>(r);
    if (o.virtual_time_changed && changed_rank < 0) changed_rank = static_cast<int>(r);
  }
  for (int rep = 0; rep < config_.repetitions; ++rep) {
    const auto* w = wall_.data() + static_cast<std::size_t>(rep) * p;
    result.wall_seconds.push_back(*std::max_element(w, w + p));
  }
  result.verified = bad_rep < 0 && changed_rank < 0;
  for (auto& t : timelines_) result.timeline.insert(result.timeline.end(), t.begin(), t.end());
  if (bad_rep >= 0) {
    const RankOutcome& o = outcome_[static_cast<std::size_t>(bad_rank)];
    std::ostringstream m;
    m << "repetition " << bad_rep << ": rank " << bad_rank << " holds a wrong result at element " << o.bad_element
      << ": " << o.bad_value << ", expected " << format_element(op_, expected_.data() + o.bad_element * eb_);
    result.failure = m.str();
  } else if (changed_rank >= 0) {
    result.failure = "rank " + std::to_string(changed_rank) + "'s virtual finish time differs between repetitions";
  }
  return result;
}

EmulationResult run_emulation(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape,
                              const ReduceOp& op, const EmulatorConfig& config,
                              std::optional<std::span<const std::byte>> expected) {
  validate_shape(algorithm, shape);
  check_operator(algorithm, op.name, op.commutative);
  if (!op.combine || op.element_bytes == 0) throw UsageError("operator '" + op.name + "' has no combine function");
  if (config.layout.ranks() != shape.ranks)
    throw UsageError("the emulated cluster has " + std::to_string(config.layout.ranks()) +
                     " ranks, but the schedule is planned for " + std::to_string(shape.ranks));
  if (config.repetitions < 1) throw UsageError("repetitions must be at least 1");
  if (config.wait_timeout.count() <= 0) throw UsageError("the wait timeout must be positive");
  if (config.layout.nodes() > 1 && config.model.levels() < 2)
    throw UsageError("the cost model needs a link level for other nodes (level 1)");
  if (shape.ranks > (1 << 30)) throw UsageError("the emulator supports at most 2^30 ranks");
  check_start_offsets(config.start, shape.ranks);
  Cluster cluster(algorithm, plan, shape, op, config, expected);
  return cluster.run();
}

}  // namespace

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
// wait. A worker whose fibers all wait for longer than kIdleSpin sleeps until
// some thread calls wake_all (idle_enter/idle_sleep), so ranks waiting for
// the main thread (the reference, the first barrier) or for a slow peer do
// not burn the core.
//
// Under AddressSanitizer and ThreadSanitizer the ranks run as before on a
// thread each: Boost 1.74 as Debian builds it has no sanitizer annotations
// for its stack switches, and both sanitizers would misread a switch (ASan's
// stack bounds, TSan's per-thread clocks). The sanitizer builds therefore
// check the protocol with a thread per rank, not the fiber scheduler
// (COPSE_RANK_FIBERS, at the top).

namespace {

constexpr auto kIdleSpin = std::chrono::microseconds(100);  // all fibers waiting this long: sleep
constexpr auto kIdleNapMax = std::chrono::milliseconds(5);  // longest sleep before the fibers look again

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
    bool again = false;  // the current fiber yielded from a wait without progress

    void yield(bool looked_again) override {
      again = looked_again;
      Task& t = *current;
      t.sink = std::move(t.sink).resume();
    }

    // One round over the unfinished fibers; true if any got somewhere
    // (started, finished, or yielded from a wait it had not yielded from).
    bool sweep(std::size_t& live) {
      bool progress = false;
      for (Task& t : tasks) {
        if (t.done) continue;
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
      while (live > 0) {
        if (sweep(live)) {
          idle_since.reset();
          continue;
        }
        const auto now = Clock::now();
        if (!idle_since) idle_since = now;
        const auto idle = now - *idle_since;
        if (idle < kIdleSpin) continue;
        // Idle for a while: register, look once more, and sleep until a
        // wake_all (each of our fibers waits for some peer's store, followed
        // by its wake_all), at most a quarter of the idle time so far: the
        // fibers' deadlines and reports are read by the fibers themselves.
        const std::uint32_t ticket = idle_enter();
        if (sweep(live)) {
          idle_leave();
          idle_since.reset();
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
  int slots = 0;  // the largest rank count started
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

RankThreads::RankThreads() : impl_(std::make_unique<Impl>()) {}

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
  const int cores = std::max(spin_slots(), 1);
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

EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config) {
  validate_shape(algorithm, shape);
  if (!algorithm.plan) throw UsageError("algorithm '" + std::string(algorithm.name) + "' has no schedule builder");
  return run_emulation(algorithm, algorithm.plan(shape), shape, op, config, std::nullopt);
}

EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config, std::span<const std::byte> expected) {
  validate_shape(algorithm, shape);
  if (!algorithm.plan) throw UsageError("algorithm '" + std::string(algorithm.name) + "' has no schedule builder");
  return run_emulation(algorithm, algorithm.plan(shape), shape, op, config, expected);
}

EmulationResult emulate(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape,
                        const ReduceOp& op, const EmulatorConfig& config) {
  return run_emulation(algorithm, plan, shape, op, config, std::nullopt);
}

}  // namespace copse
