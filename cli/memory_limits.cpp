#include "cli/memory_limits.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

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

double schedule_bytes_per_rank(const AlgorithmInfo& algorithm, const Shape& shape) {
  Shape sample = shape;
  sample.ranks = std::min(shape.ranks, 4096);
  if (sample.root >= sample.ranks) sample.root = 0;
  const double before = allocated_heap();
  SchedulePlan plan;
  try {
    plan = algorithm.plan(sample);
  } catch (const Error&) {
    sample = shape;  // a schedule file is written for its own rank count only
    plan = algorithm.plan(sample);
  }
  const double shared = std::max(0.0, allocated_heap() - before) / sample.ranks;
  // A plan with a step cursor (dual-root, binomial, two-tree, rabenseifner,
  // recursive-doubling) is walked by a position per rank, not by coroutine
  // frames (algorithms/step_cursor.hpp); what its cursor keeps per rank (the
  // two-tree's 24-byte links) is in `shared`.
  if (cursor_of(plan)) return shared + sizeof(std::uint32_t);
  // A rank's frames nest as it goes (a phase's generator inside the rank's):
  // the most they hold over their first steps, all sampled ranks at once.
  constexpr int kSampledRanks = 16, kSampledSteps = 256;
  const int sampled = std::min(sample.ranks, kSampledRanks);
  std::vector<RankSchedule> schedules;
  schedules.reserve(static_cast<std::size_t>(sampled));
  const double frames_before = allocated_heap();
  for (int i = 0; i < sampled; ++i)
    schedules.push_back(plan(static_cast<int>(static_cast<long>(i) * sample.ranks / sampled)));
  double most = allocated_heap();
  for (int step = 0; step < kSampledSteps; ++step) {
    bool any = false;
    for (RankSchedule& s : schedules) any = s.next() || any;
    most = std::max(most, allocated_heap());
    if (!any) break;
  }
  return shared + std::max(0.0, most - frames_before) / sampled;
}

// Checked against peak RSS (/usr/bin/time -v) of `copse sim --bytes 1MiB
// --blocks 16` at p = 2^14 ... 2^20: the RSS grew linearly in p, by
// 509 B/rank (dual-root, recursive-doubling), 826 (two-tree), 982
// (binomial) and 1138 (rabenseifner), from about 12 MB for the program
// itself. This estimate per rank, with its margin of 1/8 for the allocator's
// rounding, came to 541, 559, 908, 1260 and 1641 B: never below the measured
// slope, at most 45% above it (the sampled ranks hold their deepest frames
// at once, which not every rank does at the peak). Since the simulator frees
// a finished rank's frames and the doubly pipelined frame keeps one Step
// (issue 20), dual-root measures 410 B/rank at p = 2^20 and this estimate
// gives 451; the others are unchanged. Walked by a step cursor, dual-root
// measures 130 B/rank at p = 2^24 (2.19 GB peak) and binomial 116 at p =
// 2^22 (498 MB); the estimate gives 146 and 132. Two-tree and rabenseifner
// on cursors measure 142 and 119 B/rank at p = 2^22 (597 and 498 MB peak);
// the estimate gives 159 and 132.
MemoryEstimate simulation_estimate(const AlgorithmInfo& algorithm, const Shape& shape, double per_rank_inputs) {
  constexpr double kProgramBytes = 16e6, kMargin = 1.125;
  const double per_rank =
      static_cast<double>(simulator_bytes_per_rank()) + schedule_bytes_per_rank(algorithm, shape) + per_rank_inputs;
  return MemoryEstimate{kProgramBytes, per_rank * kMargin};
}

// The most steps any of a few sampled ranks of `shape` takes (each counted
// to its end: at most a few times one rank's share of the emulation's work).
double sampled_steps_per_rank(const AlgorithmInfo& algorithm, const Shape& shape) {
  const SchedulePlan plan = algorithm.plan(shape);
  constexpr int kSampledRanks = 4;
  double most = 0;
  for (int i = 0; i < std::min(shape.ranks, kSampledRanks); ++i) {
    // The first, the last and two between: roots, leaves and the ring's middle.
    const int rank = static_cast<int>(static_cast<long>(i) * (shape.ranks - 1) / std::max(1, kSampledRanks - 1));
    double steps = 0;
    for (RankSchedule s = plan(rank); s.next();) ++steps;
    most = std::max(most, steps);
  }
  return most;
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
  MemoryEstimate e = simulation_estimate(algorithm, shape, 0);
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
