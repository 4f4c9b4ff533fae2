#include "cli/memory_limits.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "algorithms/shift_plan.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/step_cursor.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace copse {
namespace {

// The first number in `path` (0 if unreadable); "max" reads as no limit.
std::uint64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return 0;
  if (word == "max") return UINT64_MAX;
  try {
    return std::stoull(word);
  } catch (const std::exception&) {
    return 0;
  }
}

// A /proc file's "Key:   N kB" value in bytes (0 if absent).
std::uint64_t proc_kib(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return 0;
}

void lower_to(AvailableMemory& a, std::uint64_t bytes, const char* source) {
  if (bytes < a.bytes) a.bytes = bytes, a.source = source;
}

// The cgroup this process is in, as the container sees it (its namespace
// root): v2 memory.max / memory.current, else v1's pair. Limits the kernel
// reports as "unlimited" (max, or near 2^63) are none.
void apply_cgroup(AvailableMemory& a) {
  for (auto [limit_path, usage_path] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::uint64_t limit = read_number(limit_path);
    if (limit == 0 || limit >= (std::uint64_t{1} << 62)) continue;
    const std::uint64_t usage = read_number(usage_path);
    lower_to(a, limit > usage ? limit - usage : 0, "cgroup limit");
    return;
  }
}

double allocated_heap() { return static_cast<double>(mallinfo2().uordblks + mallinfo2().hblkhd); }

// The heap one rank's coroutine frames hold: they nest as it goes (a phase's
// generator inside the rank's), so the most they hold over their first
// steps, a few ranks of a plan for `ranks` at once.
double coroutine_frame_bytes(const SchedulePlan& plan, int ranks) {
  constexpr int kSampledRanks = 16, kSampledSteps = 256;
  const int sampled = std::min(ranks, kSampledRanks);
  std::vector<RankSchedule> schedules;
  schedules.reserve(static_cast<std::size_t>(sampled));
  const double frames_before = allocated_heap();
  for (int i = 0; i < sampled; ++i) schedules.push_back(plan(static_cast<int>(static_cast<long>(i) * ranks / sampled)));
  double most = allocated_heap();
  for (int step = 0; step < kSampledSteps; ++step) {
    bool any = false;
    for (RankSchedule& s : schedules) any = s.next() || any;
    most = std::max(most, allocated_heap());
    if (!any) break;
  }
  return std::max(0.0, most - frames_before) / sampled;
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory a;
  if (const std::uint64_t free = proc_kib("/proc/meminfo", "MemAvailable"); free > 0) lower_to(a, free, "MemAvailable");
  apply_cgroup(a);
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const std::uint64_t mapped = proc_kib("/proc/self/status", "VmSize");
    lower_to(a, as.rlim_cur > mapped ? as.rlim_cur - mapped : 0, "ulimit -v");
  }
  return a;
}

namespace {

// A plan of `algorithm` for at most 4096 of `shape`'s ranks, and the heap it
// keeps per rank (a cursor's per-rank links: the two-tree's 24 bytes).
struct SampledPlan {
  SchedulePlan plan;
  int ranks = 0;
  double shared_bytes_per_rank = 0;
};

SampledPlan sampled_plan(const AlgorithmInfo& algorithm, const Shape& shape) {
  Shape sample = shape;
  sample.ranks = std::min(shape.ranks, 4096);
  if (sample.root >= sample.ranks) sample.root = 0;
  const double before = allocated_heap();
  SampledPlan s;
  try {
    s.plan = algorithm.plan(sample);
  } catch (const Error&) {
    sample = shape;  // a schedule file is written for its own rank count only
    s.plan = algorithm.plan(sample);
  }
  s.ranks = sample.ranks;
  s.shared_bytes_per_rank = std::max(0.0, allocated_heap() - before) / sample.ranks;
  return s;
}

}  // namespace

double simulation_bytes_per_rank(const AlgorithmInfo& algorithm, const Shape& shape, const RunTraits& run) {
  const SampledPlan sample = sampled_plan(algorithm, shape);
  const SimulationEngine engine = simulation_engine(sample.plan, run);
  const double fixed = static_cast<double>(simulator_bytes_per_rank(engine)) + sample.shared_bytes_per_rank;
  // The shift profile and the lockstep run read no per-rank schedule state;
  // a cursor run rank by rank keeps a position a rank
  // (algorithms/step_cursor.hpp).
  if (engine != SimulationEngine::coroutines)
    return fixed + (engine == SimulationEngine::cursor ? sizeof(std::uint32_t) : 0);
  return fixed + coroutine_frame_bytes(sample.plan, sample.ranks);
}

// Checked against peak RSS (/usr/bin/time -v) of `copse sim --bytes 1MiB
// --blocks 16`: its slope between p = 2^18 and 2^20, B/rank, measured
// against estimated (the margin included). The ring's shift profile: 8
// against 9 (39 MB at 2^22, 137 MB at 2^24). The lockstep run: two-tree 64
// against 72, rabenseifner and recursive-doubling 40 and 39 against 45,
// dual-root 84 against 94 (1.38 GB at 2^24); two-tree with late arrivals 100
// against 117. Rank by rank on a cursor: binomial 91 against 109, two-tree
// with unidirectional ports 116 against 136 (dual-root, before its lockstep
// run, 108 against 127). On coroutines: bi-greedy 1042 against 1167 (the sampled
// ranks hold their deepest frames at once, which not every rank does at the
// peak: up to 45% above, for rabenseifner on coroutines).
MemoryEstimate simulation_estimate(const AlgorithmInfo& algorithm, const Shape& shape, double per_rank_inputs,
                                   const RunTraits& run) {
  constexpr double kProgramBytes = 16e6, kMargin = 1.125;
  const double per_rank = simulation_bytes_per_rank(algorithm, shape, run) + per_rank_inputs;
  return MemoryEstimate{kProgramBytes, per_rank * kMargin};
}

namespace {

// Steps of a few ranks of `plan` for `ranks`, each counted to its end: the
// most any takes (at most a few times one rank's share of the work) and
// their mean.
struct StepCounts {
  double most = 0, mean = 0;
};
StepCounts sampled_steps(const SchedulePlan& plan, int ranks) {
  constexpr int kSampledRanks = 8;
  const int sampled = std::min(ranks, kSampledRanks);
  StepCounts counts;
  for (int i = 0; i < sampled; ++i) {
    // The first, the last and some between: roots, leaves and the ring's middle.
    const int rank = static_cast<int>(static_cast<long>(i) * (ranks - 1) / std::max(1, sampled - 1));
    double steps = 0;
    for (RankSchedule s = plan(rank); s.next();) ++steps;
    counts.most = std::max(counts.most, steps);
    counts.mean += steps / sampled;
  }
  return counts;
}

double sampled_steps_per_rank(const AlgorithmInfo& algorithm, const Shape& shape) {
  return sampled_steps(algorithm.plan(shape), shape.ranks).most;
}

// A rank's mean steps at `shape`'s p, from plans for at most 4096 ranks and
// half as many: as steps grow by the halving, they grow on up to p (a ring's
// double, a tree's barely).
double mean_steps(const AlgorithmInfo& algorithm, const Shape& shape, const SampledPlan& sample) {
  const double steps = sampled_steps(sample.plan, sample.ranks).mean;
  if (sample.ranks == shape.ranks || sample.ranks < 4) return steps;
  Shape half = shape;
  half.ranks = sample.ranks / 2;
  const SampledPlan smaller = sampled_plan(algorithm, half);
  const double fewer = sampled_steps(smaller.plan, smaller.ranks).mean;
  const double growth = fewer > 0 ? std::clamp(std::log2(steps / fewer), 0.0, 1.0) : 0.0;
  return steps * std::pow(static_cast<double>(shape.ranks) / sample.ranks, growth);
}

}  // namespace

// Measured here (2 cores, user time): the ring's shift profile takes some
// 80 ns a step of the whole ring (2.7 s for its 2^25 steps at p = 2^24); the
// lockstep run 8 to 16 ns a rank and position (two-tree and rabenseifner at
// p = 2^22: 5.3 and 3.2 s), or some 20 ns a step where a position names its
// ranks (dual-root at p = 2^24: 22 s for 1.07e9); a cursor run rank by rank
// some 25 to 35 ns a rank's step (dual-root at p = 2^24, rank by rank: 28
// s), the coroutines about 30 (the ring with late arrivals at p = 2^14:
// 16.6 s for 5.4e8).
double simulation_seconds(const AlgorithmInfo& algorithm, const Shape& shape, const RunTraits& run) {
  const SampledPlan sample = sampled_plan(algorithm, shape);
  const double p = shape.ranks;
  switch (simulation_engine(sample.plan, run)) {
    case SimulationEngine::shift_profile: {
      double steps = 0;  // each phase takes about p steps: scaled from the sample's
      for (const ShiftPhase& phase : shift_plan_of(sample.plan)->phases) steps += static_cast<double>(phase.steps);
      return 80e-9 * steps * p / sample.ranks;
    }
    case SimulationEngine::lockstep: {
      const LockstepMoves& moves = *cursor_of(sample.plan)->lockstep();
      // Positions that name their ranks cost their steps, not p each.
      if (moves.ranks_at(0)) return 25e-9 * mean_steps(algorithm, shape, sample) * p;
      return 16e-9 * moves.positions() * p;
    }
    case SimulationEngine::cursor:
    case SimulationEngine::coroutines: break;
  }
  return 35e-9 * mean_steps(algorithm, shape, sample) * p;
}

void check_time(const std::string& command, int ranks, double seconds) {
  constexpr double kMostSeconds = 120;
  if (seconds <= kMostSeconds) return;
  std::ostringstream m;
  m << command << ": " << ranks << " ranks would take about " << format_time(seconds) << " to simulate; at most about "
    << static_cast<long long>(ranks * (kMostSeconds / seconds)) << " ranks run within " << format_time(kMostSeconds)
    << " (--force runs anyway)";
  throw UsageError(m.str());
}

// Fitted against peak RSS of `copse emulate --ranks-per-node 4 --repetitions
// 1` at 256 and 1024 nodes, 4 KiB and 64 KiB per rank, for dual-root,
// rabenseifner, binomial and ring: per rank, the vector, a scratch buffer (at
// most as large), the materialised steps (ring's 2(p-1) dominate at 64 KiB:
// 2.9 GB at p = 4096) and under 8 KiB besides (the fiber stack's touched
// pages, link state, outcome records).
MemoryEstimate emulation_estimate(const AlgorithmInfo& algorithm, const Shape& shape, std::uint64_t vector_bytes,
                                  bool count_steps) {
  constexpr double kRankOverhead = 8 * 1024.0;
  // The cross-check's simulation, as its hungriest engine would run it.
  MemoryEstimate e = simulation_estimate(algorithm, shape, 0, RunTraits{});
  e.bytes_per_rank += 2.0 * static_cast<double>(vector_bytes) + kRankOverhead;
  if (count_steps) e.bytes_per_rank += sampled_steps_per_rank(algorithm, shape) * sizeof(Step);
  e.fixed_bytes += static_cast<double>(vector_bytes);  // the reference result
  return e;
}

void check_memory(const std::string& command, int ranks, const MemoryEstimate& estimate) {
  const AvailableMemory available = available_memory();
  const double need = estimate.total(ranks);
  if (need <= static_cast<double>(available.bytes)) return;
  const double fit =
      std::floor((static_cast<double>(available.bytes) - estimate.fixed_bytes) / estimate.bytes_per_rank);
  std::ostringstream m;
  m << command << ": " << ranks << " ranks need about " << format_bytes(static_cast<std::uint64_t>(need)) << " ("
    << std::lround(estimate.bytes_per_rank) << " B per rank); " << format_bytes(available.bytes) << " is available ("
    << available.source << "); ";
  if (fit >= 1)
    m << "at most " << static_cast<long long>(std::min(fit, 2147483647.0)) << " ranks fit";
  else
    m << "not even one rank fits";
  m << " (--force runs anyway)";
  throw UsageError(m.str());
}

}  // namespace copse
