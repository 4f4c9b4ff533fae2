#pragma once
// Schedules that look the same from every rank: the simulator's shortcut for
// them (issue 20). A builder that knows its schedule is a RotationPlan
// returns one; simulate() finds it through std::function::target and, when
// its options charge every rank alike, runs rank 0 alone against copies of
// itself (simulate_symmetric, algorithms/simulator.cpp). Every other engine
// runs the coroutines unchanged.
//
// The promise a RotationPlan makes: rank r's step s is rank 0's step s with
// every peer moved r ranks on (mod p) and the same element counts, combine
// and copy length (offsets may differ: no cost depends on them); and each
// transfer of step s meets its partner's step s (every rank sends and
// receives in lockstep, at most one transfer each way per peer and step).
//
// When the shortcut is exact: with every pair of ranks at the same cost
// (every rank on a node of its own, no interface share), every rank starting
// at 0, bidirectional ports (the unidirectional order rule, send_goes_first,
// depends on rank numbers), no DataHooks and no Timeline, every rank's clock
// holds the same values at every step as rank 0's -- by induction over the
// steps, since both ends of each of rank 0's transfers are then ready at
// rank 0's own ready times -- so rank 0's run, driven through the same
// RankClock and CostModel calls, gives every figure bit for bit
// (tests/test_symmetric_sim.cpp compares it with the step-by-step run).
// Otherwise simulate() runs the plan step by step.

#include "common/schedule.hpp"

namespace copse {

struct RotationPlan {
  SchedulePlan coroutines;
  RankSchedule operator()(int rank) const { return coroutines(rank); }
};

inline bool rotation_symmetric(const SchedulePlan& plan) { return plan.target<RotationPlan>() != nullptr; }

}  // namespace copse
