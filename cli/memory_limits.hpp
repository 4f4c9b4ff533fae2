#pragma once
// Refusing what cannot fit (issue 20, item 2): before `copse sim` or `copse
// emulate` allocates anything per rank, an estimate of the memory the run
// needs is compared with what this process may still use; a run that cannot
// fit fails at once (UsageError, exit 2) with one line naming the estimate,
// what is available and the largest rank count that would fit, instead of
// growing until the machine runs out. `--force` skips the check.

#include <cstdint>
#include <string>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

namespace copse {

// What this process may still allocate: the least of the cgroup's limit less
// its usage (v2 memory.max, v1 memory.limit_in_bytes), MemAvailable, and
// RLIMIT_AS less the address space already mapped. `source` names the bound
// that decided ("MemAvailable", "cgroup limit", "ulimit -v").
struct AvailableMemory {
  std::uint64_t bytes = UINT64_MAX;
  std::string source = "no limit known";
};
AvailableMemory available_memory();

// A run's memory as a fixed part plus a part per rank, so that the largest
// rank count that fits follows from it.
struct MemoryEstimate {
  double fixed_bytes = 0;
  double bytes_per_rank = 0;
  double total(double ranks) const { return fixed_bytes + bytes_per_rank * ranks; }
};

// What a simulation of `algorithm` on `shape` holds per rank on the engine
// `run` picks (algorithms/simulator.hpp): the simulator's own arrays, the
// plan's shared state (scaled from a plan for at most 4096 ranks) and, on
// coroutines, one rank's frames (sampled over a few ranks, each advanced a
// few steps), measured with the allocator's own count (mallinfo2).
double simulation_bytes_per_rank(const AlgorithmInfo& algorithm, const Shape& shape, const RunTraits& run);

// `copse sim` of `algorithm` on `shape`: simulation_bytes_per_rank with a
// margin; `per_rank_inputs` adds what the command keeps per rank besides
// (arrival offsets, a node table).
MemoryEstimate simulation_estimate(const AlgorithmInfo& algorithm, const Shape& shape, double per_rank_inputs,
                                   const RunTraits& run);

// `copse sim` of `algorithm` on `shape`, roughly: the simulator's work (its
// steps, by its engine) at what each engine was measured to take a step here.
double simulation_seconds(const AlgorithmInfo& algorithm, const Shape& shape, const RunTraits& run);

// UsageError if `seconds` is past two minutes: a run that fits in memory but
// would take many minutes (the ring at p = 2^31: 2^32 steps of its profile,
// 17 GB of finish times) is refused at once, as one that cannot fit is:
// "copse sim: 2147483647 ranks would take about 344 s to simulate; at most
// about 750183150 ranks run within 120 s (--force runs anyway)".
void check_time(const std::string& command, int ranks, double seconds);

// `copse emulate` of `algorithm` on `shape` with `vector_bytes` per rank: the
// simulation it is cross-checked with, plus each rank's data (its vector and
// scratch of at most as much again), its stack and, with `count_steps`, its
// materialised steps (counted on a few sampled ranks: check first without,
// so that an absurd p is refused before it is planned).
MemoryEstimate emulation_estimate(const AlgorithmInfo& algorithm, const Shape& shape, std::uint64_t vector_bytes,
                                  bool count_steps);

// UsageError unless `estimate` at `ranks` ranks fits in available_memory():
// "copse sim: 2147483647 ranks need about 1.1 TB (520 B per rank); 20.3 GB is
// available (MemAvailable); at most 39000000 ranks fit (--force runs anyway)".
void check_memory(const std::string& command, int ranks, const MemoryEstimate& estimate);

}  // namespace copse
