// The cores as the job sees them (common/cores.hpp): affinity masks, and how
// many ranks can run at once on them, against an exact assignment.

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "common/cores.hpp"
#include "common/wait.hpp"

using copse::concurrent_ranks;
using copse::cpu_count;
using copse::CpuMask;
using copse::RanksOnCpus;

namespace {

void add(CpuMask& m, int c) {
  const auto w = static_cast<std::size_t>(c / 64);
  if (m.size() <= w) m.resize(w + 1, 0);
  m[w] |= std::uint64_t{1} << (c % 64);
}

CpuMask cpus(std::initializer_list<int> list) {
  CpuMask m;
  for (int c : list) add(m, c);
  return m;
}

// The sequential reference, by Hall's theorem: the ranks less the largest
// shortfall of any set of groups (its ranks less the CPUs its masks reach;
// the empty set falls short by 0). Exponential in the groups: small layouts.
int hall_bound(const std::vector<RanksOnCpus>& groups) {
  int ranks = 0, shortfall = 0;
  for (const auto& g : groups) ranks += g.ranks;
  for (unsigned subset = 1; subset < (1u << groups.size()); ++subset) {
    CpuMask reach;
    int members = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (!(subset >> g & 1)) continue;
      members += groups[g].ranks;
      if (reach.size() < groups[g].cpus.size()) reach.resize(groups[g].cpus.size(), 0);
      for (std::size_t w = 0; w < groups[g].cpus.size(); ++w) reach[w] |= groups[g].cpus[w];
    }
    shortfall = std::max(shortfall, members - cpu_count(reach));
  }
  return ranks - shortfall;
}

}  // namespace

TEST_CASE("cpu_count counts every word of a mask", "[cores]") {
  CHECK(cpu_count({}) == 0);
  CHECK(cpu_count(cpus({0})) == 1);
  CHECK(cpu_count(cpus({0, 1, 63, 64, 127, 200})) == 6);
}

TEST_CASE("concurrent_ranks: the layouts of launchers and batch systems", "[cores]") {
  // Unbound on two cores: two ranks fit, four do not.
  CHECK(concurrent_ranks({{cpus({0, 1}), 1}, {cpus({0, 1}), 1}}) == 2);
  CHECK(concurrent_ranks({{cpus({0, 1}), 2}, {cpus({0, 1}), 2}}) == 2);
  // A host confined to one core of two (a cpuset; mh run --cpus "h1=0"):
  // two ranks there run one at a time, whatever the machine's online count.
  CHECK(concurrent_ranks({{cpus({0}), 1}, {cpus({0}), 1}}) == 1);
  // Bound one per core: each sees one core, yet both run at once.
  CHECK(concurrent_ranks({{cpus({0}), 1}, {cpus({1}), 1}}) == 2);
  // Masks that differ: one process pinned within another's cores.
  CHECK(concurrent_ranks({{cpus({0}), 1}, {cpus({0, 1}), 1}}) == 2);
  CHECK(concurrent_ranks({{cpus({0}), 2}, {cpus({0, 1}), 1}}) == 2);
  CHECK(concurrent_ranks({{cpus({0}), 1}, {cpus({0, 1}), 2}}) == 2);
  // Thread ranks of one process count as its ranks.
  CHECK(concurrent_ranks({{cpus({0, 1, 2, 3}), 3}, {cpus({4, 5}), 3}}) == 5);
  // Other ranks of the host (masks unknown) share the union.
  CHECK(concurrent_ranks({{cpus({0}), 1}, {cpus({1}), 1}}, 1) == 2);
  CHECK(concurrent_ranks({{cpus({0, 1, 2}), 1}}, 1) == 2);
  CHECK(concurrent_ranks({}, 3) == 0);
  // Masks beyond the first word, and trailing zero words.
  CHECK(concurrent_ranks({{cpus({70}), 1}, {CpuMask{0, std::uint64_t{1} << 6, 0}, 1}}) == 1);
  CHECK(concurrent_ranks({{cpus({70}), 1}, {cpus({0}), 1}}) == 2);
}

TEST_CASE("concurrent_ranks equals Hall's bound on random masks", "[cores]") {
  // Masks of every shape: aligned blocks (nested or disjoint, as launchers
  // bind: per socket, core, hyperthread) and scattered CPUs, some beyond the
  // first 64, with 0 to 3 ranks each, a few processes to a node.
  std::mt19937 random(17);
  for (int trial = 0; trial < 600; ++trial) {
    const int groups = 1 + static_cast<int>(random() % 7);
    std::vector<RanksOnCpus> layout;
    for (int g = 0; g < groups; ++g) {
      RanksOnCpus share;
      share.ranks = static_cast<int>(random() % 4);
      if (trial % 2 == 0) {
        const int block = 1 << (random() % 4);  // 1, 2, 4 or 8 CPUs
        const int first = static_cast<int>(random() % (88 / block)) * block;
        for (int c = first; c < first + block; ++c) add(share.cpus, c);
      } else {
        for (int n = 1 + static_cast<int>(random() % 3); n > 0; --n)
          add(share.cpus, static_cast<int>(random() % 8) * 11);
      }
      layout.push_back(share);
    }
    INFO("trial " << trial);
    CHECK(concurrent_ranks(layout) == hall_bound(layout));
    // Others of the host: as one more group over the union.
    RanksOnCpus others;
    for (const auto& g : layout)
      for (std::size_t w = 0; w < g.cpus.size(); ++w) {
        if (others.cpus.size() <= w) others.cpus.resize(w + 1, 0);
        others.cpus[w] |= g.cpus[w];
      }
    others.ranks = trial % 3;
    auto with_others = layout;
    with_others.push_back(others);
    CHECK(concurrent_ranks(layout, others.ranks) == hall_bound(with_others));
  }
}

TEST_CASE("process_cpus is the process's mask, not the calling thread's", "[cores]") {
  const CpuMask process = copse::process_cpus();
  REQUIRE(cpu_count(process) >= 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  CHECK(cpu_count(process) == CPU_COUNT(&set));
  // A thread pinned to a single CPU still sees the process's cores.
  int first = 0;
  while (!CPU_ISSET(first, &set)) ++first;
  CpuMask seen;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    seen = copse::process_cpus();
  });
  pinned.join();
  CHECK(seen == process);
  // One core: no waiter of the process spins (whoever it waits for needs it).
  CHECK(copse::spin_slots() == (cpu_count(process) > 1 ? cpu_count(process) : 0));
}
