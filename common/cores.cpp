#include "common/cores.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <fstream>
#include <string>
#include <utility>

namespace copse {

namespace {

// Without trailing zero words, so that equal sets compare equal.
CpuMask trimmed(CpuMask mask) {
  while (!mask.empty() && mask.back() == 0) mask.pop_back();
  return mask;
}

CpuMask united(const CpuMask& a, const CpuMask& b) {
  CpuMask u(std::max(a.size(), b.size()), 0);
  for (std::size_t w = 0; w < u.size(); ++w) u[w] = (w < a.size() ? a[w] : 0) | (w < b.size() ? b[w] : 0);
  return trimmed(std::move(u));
}

// The CPUs of a mask, ascending.
std::vector<int> cpu_list(const CpuMask& mask) {
  std::vector<int> list;
  for (std::size_t w = 0; w < mask.size(); ++w)
    for (std::uint64_t bits = mask[w]; bits; bits &= bits - 1)
      list.push_back(static_cast<int>(w * 64) + std::countr_zero(bits));
  return list;
}

// Ranks of groups placed on CPUs, one rank per CPU (concurrent_ranks).
struct Assignment {
  std::vector<std::vector<int>> masks;  // per group, its CPUs
  std::vector<int> holder;              // per CPU, the group of the rank on it, or -1
  std::vector<bool> seen;               // CPUs looked at by the current search

  // Places one more rank of `group`, moving ranks already placed to other
  // CPUs of their masks as needed (an augmenting path).
  bool place(int group) {
    for (int c : masks[static_cast<std::size_t>(group)]) {
      const auto cpu = static_cast<std::size_t>(c);
      if (seen[cpu]) continue;
      seen[cpu] = true;
      if (holder[cpu] < 0 || place(holder[cpu])) {
        holder[cpu] = group;
        return true;
      }
    }
    return false;
  }
};

CpuMask online_cpus() {
  const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  CpuMask mask(static_cast<std::size_t>((online + 63) / 64), 0);
  for (long c = 0; c < online; ++c) mask[static_cast<std::size_t>(c / 64)] |= std::uint64_t{1} << (c % 64);
  return mask;
}

}  // namespace

CpuMask process_cpus() {
  // A dynamically sized set: machines may have more CPUs than CPU_SETSIZE.
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(static_cast<std::size_t>(cpus));
    if (!set) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus));
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(getpid(), bytes, set) == 0) {
      CpuMask mask(static_cast<std::size_t>((cpus + 63) / 64), 0);
      for (int c = 0; c < cpus; ++c)
        if (CPU_ISSET_S(static_cast<std::size_t>(c), bytes, set))
          mask[static_cast<std::size_t>(c / 64)] |= std::uint64_t{1} << (c % 64);
      CPU_FREE(set);
      mask = trimmed(std::move(mask));
      if (!mask.empty()) return mask;
      break;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;  // EINVAL: the set is smaller than the kernel's
  }
  return online_cpus();
}

std::uint64_t machine_id() {
  std::string id;
  if (std::ifstream boot("/proc/sys/kernel/random/boot_id"); !(boot >> id) || id.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) id = host;
  }
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a: the same in every process, whatever its build
  for (const unsigned char c : id) h = (h ^ c) * 1099511628211ULL;
  return h;
}

int cpu_count(const CpuMask& mask) {
  int n = 0;
  for (std::uint64_t w : mask) n += std::popcount(w);
  return n;
}

int concurrent_ranks(const std::vector<RanksOnCpus>& groups, int others) {
  // A largest assignment of ranks to distinct CPUs of their masks, by
  // augmenting paths (a bipartite matching; a group's ranks are alike, so
  // one search per rank over the groups' masks). Set-up sizes: a few hundred
  // ranks and CPUs at most, once per communicator.
  Assignment a;
  CpuMask all;
  for (const RanksOnCpus& g : groups) all = united(all, g.cpus);
  for (const RanksOnCpus& g : groups) a.masks.push_back(cpu_list(g.cpus));
  a.masks.push_back(cpu_list(all));  // the others: within the union
  const int cpus = cpu_count(all);
  a.holder.assign(static_cast<std::size_t>(all.size() * 64), -1);
  int placed = 0;
  for (std::size_t g = 0; g <= groups.size(); ++g) {
    const int ranks = g < groups.size() ? groups[g].ranks : others;
    for (int i = 0; i < ranks && placed < cpus; ++i) {
      a.seen.assign(a.holder.size(), false);
      if (!a.place(static_cast<int>(g))) break;  // no CPU for this group's ranks, nor later ones
      ++placed;
    }
  }
  return placed;
}

}  // namespace copse
