#pragma once
// Choosing an algorithm by size and shape (issue 8, item 1): for one
// collective, rank count, node layout, vector size, element size, cost model
// and operator, the registered algorithm whose schedule the simulator finds
// fastest -- each pipelined one at its own best block count (best_blocks, the
// one autotuner). `copse sim --algorithm auto`, `copse emulate --algorithm
// auto`, the selection table of `copse algorithms --selection` and a one-node
// team (node/team_plan.hpp) all ask this.
//
// The candidates are the registry's algorithms for the collective except
//  - those that need a commutative operator when the operator is not one;
//  - the arrival-aware ones (slt, prr: they are planned from predicted
//    arrivals, which a selection made before the call does not have);
//  - `flat` (linear fan-in and fan-out; never faster than a tree beyond a
//    handful of ranks, and kept for Bjørndalen's scripted trees);
//  - schedule files (they are not registered, and are written for one shape).
// Ties in time go to fewer steps, then to fewer bytes reaching the busiest
// rank, then to the registry's order: the same time with fewer messages or
// less traffic is the better bet on a real machine.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

namespace copse {

// The algorithm name that asks for the selection's choice (`--algorithm auto`,
// `collectives.allreduce = "auto"`).
inline constexpr std::string_view kSelectAlgorithm = "auto";

struct SelectionCandidate {
  const AlgorithmInfo* algorithm = nullptr;
  int blocks = 1;  // the block count it was simulated with (best_blocks; 1 unless pipelined)
  Picos time = 0;
  std::uint64_t steps = 0;         // longest rank's step count
  std::uint64_t max_received = 0;  // elements reaching the rank that receives most from its peers
};

struct Selection {
  SelectionCandidate chosen;
  std::vector<SelectionCandidate> candidates;  // every candidate evaluated, in the registry's order
  const AlgorithmInfo& algorithm() const { return *chosen.algorithm; }
};

// Whether the selection considers `algorithm` for an operator that is (or is
// not) commutative.
bool selectable(const AlgorithmInfo& algorithm, bool commutative);

// How a candidate is planned for a shape; empty: the algorithm's own flat
// plan. (An emulated hierarchy passes its composition, so that the algorithm
// among the off-node ranks is chosen for the schedule that really runs.)
using SelectionPlanner = std::function<SchedulePlan(const AlgorithmInfo&, const Shape&)>;

// The fastest candidate for `collective` on `shape` (ranks, count = elements
// per rank as the collective counts them, root; blocks ignored; hints
// defaulted to planning_hints(options)) under `options` (cost model, layout,
// element size). A candidate the planner refuses (UsageError: e.g. a
// hierarchy that composes only trees) is left out. UsageError for a bad
// shape, or when no candidate applies.
Selection select_algorithm(Collective collective, Shape shape, const SimulationOptions& options, bool commutative,
                           const SelectionPlanner& planner = {});

}  // namespace copse
