#pragma once
// Neighbour pipelines around the ring whose chunks move one rank a step: the
// simulator's shortcut for them (issue 20). A builder whose schedule keeps
// the promise below returns a ShiftPlan; simulate() finds it through
// std::function::target and, when its options charge every rank alike, runs
// it as one profile over the chunks (simulate_shift, algorithms/shift_sim.cpp)
// rather than rank by rank. Every other engine runs the coroutines unchanged.
//
// The promise: the phases run one after another, every rank taking each
// phase's `steps` steps. At step t of a phase, rank r sends chunk
// (r - t + shift) mod p of `chunks` to rank r+1 and receives chunk
// (r - t + shift - 1) mod p -- the one its left neighbour sends -- from rank
// r-1, combining it by `combine`, with no copy; a void chunk (past
// chunks.blocks) is no transfer, and a step with neither is not yielded.
//
// Why it is exact: with every pair of ranks at one cost, bidirectional ports,
// every rank starting at 0, no DataHooks and no Timeline, a rank's clock
// after step s depends on its rank and s only through r - s: the clocks of
// its two neighbours and its own before the step, and chunk sizes that are
// functions of r - s. So the whole run is a profile over p diagonals, moved
// one step at a time through the same PairCost and CostModel calls as the
// step-by-step run. Where the profile is an arithmetic run over chunks of
// one size it stays one, so a step costs the profile's runs, not p
// (tests/test_symmetric_sim.cpp compares it with the step-by-step run).

#include <cstdint>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

struct ShiftPhase {
  std::int64_t steps = 0;
  std::int64_t shift = 0;
  Combine combine = Combine::replace;
};

struct ShiftPlan {
  SchedulePlan coroutines;
  BlockPartition chunks;  // over at most p blocks: chunk j of the promise is chunks' block j
  std::vector<ShiftPhase> phases;
  RankSchedule operator()(int rank) const { return coroutines(rank); }
};

inline const ShiftPlan* shift_plan_of(const SchedulePlan& plan) { return plan.target<ShiftPlan>(); }

}  // namespace copse
