#include "emulator/emulator.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "common/wait.hpp"
#include "exec/step_executor.hpp"
#include "runtime/failure_record.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

namespace copse {

namespace {

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

// Read once: sysconf(_SC_PHYS_PAGES) is a sysinfo system call, and the
// acceptance matrix runs 32,000 emulations in one of its cases.
std::size_t physical_memory() {
  static const std::size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return std::numeric_limits<std::size_t>::max();
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  }();
  return bytes;
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
  // What rank `rank` should hold at element e (of those it is verified on).
  const std::byte* expected_at(int rank, std::uint64_t e) const;

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

  FailureRecord failure_;  // the first; the run rethrows it
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

// What a verified rank holds: the root's input (bcast; a scatter rank checks
// only its own block of it), every rank's block in rank order (allgather, and
// a gather's root), every rank's send area in rank order (alltoall: rank r's
// receive block s is block r of rank s's), or the reduction of every rank's
// whole vector (the others; a reduce_scatter rank checks only its own block).
void Cluster::compute_reference() {
  if (given_) {
    expected_ = *given_;
    return;
  }
  switch (algorithm_.collective) {
    case Collective::bcast:
    case Collective::scatter:
      reference_.resize(bytes_);
      fill_input(op_, shape_.root, n_, reference_.data());
      break;
    case Collective::alltoall:
      reference_.resize(static_cast<std::size_t>(p_) * bytes_ / 2);
      for (int s = 0; s < p_; ++s)
        fill_input(op_, s, n_ / 2, reference_.data() + static_cast<std::size_t>(s) * bytes_ / 2);
      break;
    case Collective::allgather:
    case Collective::gather:
      reference_.resize(bytes_);
      for (int b = 0; b < p_; ++b)
        fill_input(op_, b, shape_.count, reference_.data() + static_cast<std::size_t>(b) * shape_.count * eb_);
      break;
    default: reference_ = reference_result(op_, p_, n_);
  }
  expected_ = reference_;
}

void Cluster::fail(std::exception_ptr error) noexcept {
  failure_.record(std::move(error));
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
  const Collective collective = algorithm_.collective;
  if (collective == Collective::allgather || collective == Collective::gather) {  // only its own block is its input
    std::memset(y, 0xA5, bytes_);
    fill_input(op_, c.rank, shape_.count, y + static_cast<std::size_t>(c.rank) * shape_.count * eb_);
  } else if (collective == Collective::alltoall) {  // its send area; the receive area starts as poison
    fill_input(op_, c.rank, n_ / 2, y);
    std::memset(y + bytes_ / 2, 0xA5, bytes_ / 2);
  } else if (collective != Collective::bcast && collective != Collective::scatter) {
    fill_input(op_, c.rank, n_, y);
  } else if (c.rank == shape_.root) {
    fill_input(op_, shape_.root, n_, y);
  } else {
    std::memset(y, 0xA5, bytes_);
  }
}

const std::byte* Cluster::expected_at(int rank, std::uint64_t e) const {
  if (algorithm_.collective != Collective::alltoall || given_) return expected_.data() + e * eb_;
  const std::uint64_t area = n_ / 2, s = (e - area) / shape_.count;  // e in the receive area: from rank s
  return expected_.data() +
         (s * area + static_cast<std::uint64_t>(rank) * shape_.count + (e - area) % shape_.count) * eb_;
}

void Cluster::verify(LinkRank& c, const std::byte* y) {
  const Collective collective = algorithm_.collective;
  if ((collective == Collective::reduce || collective == Collective::gather) && c.rank != shape_.root) return;
  // A reduce_scatter or scatter rank is only responsible for its own block,
  // an alltoall rank for its receive area.
  std::uint64_t first = 0, last = n_;
  if (collective == Collective::reduce_scatter || collective == Collective::scatter)
    first = static_cast<std::uint64_t>(c.rank) * shape_.count, last = first + shape_.count;
  if (collective == Collective::alltoall) first = n_ / 2;
  // Compared in runs contiguous in the reference: an alltoall's blocks one by one.
  const std::uint64_t run = collective == Collective::alltoall ? shape_.count : last - first;
  bool right = true;
  for (std::uint64_t e = first; right && e < last; e += run)
    right = std::memcmp(y + e * eb_, expected_at(c.rank, e), static_cast<std::size_t>(run) * eb_) == 0;
  if (right) return;
  RankOutcome& out = outcome_[static_cast<std::size_t>(c.rank)];
  if (out.bad_repetition >= 0) return;
  out.bad_repetition = c.round;
  for (std::uint64_t e = first; e < last; ++e) {
    if (std::memcmp(y + e * eb_, expected_at(c.rank, e), eb_) != 0) {
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

EmulationResult Cluster::run() {
  if (given_ && algorithm_.collective == Collective::alltoall)
    throw UsageError("an alltoall's expected result is every rank's own: the emulator computes it");
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

  if (!RankThreads::fibers() && p_ >= 64) widen_futex_hash(p_ + 1);  // fibers: a few threads only
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
  failure_.rethrow_if_any();

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
      << ": " << o.bad_value << ", expected " << format_element(op_, expected_at(bad_rank, o.bad_element));
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
