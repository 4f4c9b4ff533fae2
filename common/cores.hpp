#pragma once
// The cores as the job sees them. Every decision whether a waiter may spin
// (keep its core) or must yield it to the ranks it waits for asks how many
// ranks can run at once, each on a core of its own: the cores of the
// processes' affinity masks -- a batch system's cpuset, a container's, a
// launcher's binding, `taskset` -- and the ranks that share them. Never the
// machine's online count: a host pinned to one core of two (Slurm, cgroups,
// `mh run --cpus`) has one core, whatever sysconf(_SC_NPROCESSORS_ONLN) says,
// and a rank that spins there keeps the rank it waits for off that core.

#include <cstdint>
#include <vector>

namespace copse {

// A set of CPUs as an affinity mask gives them: bit i of word i / 64 is the
// operating system's CPU i. Trailing zero words do not matter.
using CpuMask = std::vector<std::uint64_t>;

// This process's affinity mask: its main thread's (sched_getaffinity of the
// pid), not the calling thread's, which may be pinned to one core. Every
// online CPU if the kernel will not say.
CpuMask process_cpus();

// How many CPUs `mask` holds.
int cpu_count(const CpuMask& mask);

// Which machine (which running kernel) this process runs on: a hash of
// Linux's boot id, the same in every namespace of one kernel -- so hosts
// made of network namespaces on one machine (`mh`, containers) share it,
// while their host names differ -- else of the host name. Processes of one
// machine whose masks overlap share those cores, whatever node they are in.
std::uint64_t machine_id();

// `ranks` ranks confined to the CPUs of `cpus` (one process's thread ranks
// and its affinity mask).
struct RanksOnCpus {
  CpuMask cpus;
  int ranks = 0;
};

// How many of the ranks can run at once, each on a CPU of its own: the size
// of a largest assignment of ranks to distinct CPUs of their masks (by
// Hall's theorem, the ranks less the worst shortfall of any set of them:
// their number less the CPUs their masks reach). `others` more ranks (of the
// host, whose masks are unknown) are taken to run within the union of the
// masks. The ranks oversubscribe their cores when the answer is below their
// number.
int concurrent_ranks(const std::vector<RanksOnCpus>& groups, int others = 0);

}  // namespace copse
