#pragma once
// `--blocks auto`: the block count that minimises simulated time. The search
// starts from the pipelining optimum b* = sqrt(c0 * (beta+gamma) * m / (c1 * alpha))
// of T(b) = (c0 + c1*b) * (alpha + (beta+gamma)*m/b) (Träff 2021 §1.2,
// Lowery–Langou Table I), with the step counts c0, c1 read off two short
// simulations, then refines by golden-section search on log b.

#include <functional>
#include <optional>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

namespace copse {

int best_blocks(const AlgorithmInfo& algorithm, const Shape& shape, const SimulationOptions& options);

// The same for any schedule family (e.g. a hierarchical composition):
// `plan_for(shape)` plans it for a block count; `pipelined` false means blocks
// do not apply and the answer is 1.
int best_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, bool pipelined, const Shape& shape,
                const SimulationOptions& options);

// The block count to plan `algorithm` with: `requested` if given, else the
// best_blocks of `plan_for` (empty: the algorithm's own plan). Validates the
// shape with one block and with the answer (UsageError).
// Lowery–Langou §VIII, unequal segmentation: starting from the equal
// segments of `shape` (BlockPartition(count, blocks): the best equal
// segmentation when blocks came from best_blocks), moves delta elements from
// one segment to a neighbour (or between the first and the last) while that
// lowers the simulated time, taking the best move each time; delta starts at
// an eighth of a segment and halves down to one element -- at their m = 10,
// the +-1 adjustments of Table IV. UsageError unless the algorithm takes
// explicit segment sizes (AlgorithmInfo::explicit_segments).
struct SegmentSearch {
  std::vector<std::uint64_t> segments;  // the best found (the equal ones if nothing beat them)
  Picos equal_time = 0;                 // with the equal segments
  Picos time = 0;                       // with `segments`
  int simulations = 0;
};
SegmentSearch best_unequal_segments(const AlgorithmInfo& algorithm, const Shape& shape,
                                    const SimulationOptions& options);

// `shape` planned with explicit segment sizes (kept with its other hints).
Shape with_segments(Shape shape, std::vector<std::uint64_t> segments);

int resolve_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, const AlgorithmInfo& algorithm,
                   Shape shape, std::optional<int> requested, const SimulationOptions& options);

}  // namespace copse
