#pragma once
// `--blocks auto`: the block count that minimises simulated time. The search
// starts from the pipelining optimum b* = sqrt(c0 * (beta+gamma) * m / (c1 * alpha))
// of T(b) = (c0 + c1*b) * (alpha + (beta+gamma)*m/b) (Träff 2021 §1.2,
// Lowery–Langou Table I), with the step counts c0, c1 read off two short
// simulations, then refines by golden-section search on log b.

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

namespace copse {

//
// The search is bounded (issue 20): never more blocks than elements, nor
// than kMaxBlocks; and when the closed form's start lies beyond the point
// where the model's gain flattens -- at alpha = 0 it is infinite -- it
// starts there instead. At alpha = 0 the model reads T(b) = (c0 + c1*b) w m/b
// = c1 w m + c0 w m/b: blocks beyond b gain at most c0/(c1*b) of the time,
// under kFlatGain once b > c0/(c1*kFlatGain). (Schedules like Lowery–Langou's
// uni-greedy even slow down well before that: at p = 64, 1 MB, alpha = 0
// and the default LogGP overheads its best is about 380 blocks, and 4096
// blocks take twice as long.)
inline constexpr long kMaxBlocks = 1L << 20;
inline constexpr double kFlatGain = 1.0 / 1000;

// Which bound, if any, kept the search below the closed form's optimum.
enum class BlockBound {
  none,           // the closed form's start was within every bound
  element_count,  // no more blocks than elements
  max_blocks,     // kMaxBlocks
  flat_gain,      // the model's gain flattens (alpha = 0 or nearly)
};
std::string_view to_string(BlockBound bound);
// The bound's cap, in blocks, and what it is.
struct BlockSearch {
  int blocks = 1;
  BlockBound bound = BlockBound::none;
  long cap = 0;  // the bound's block count (0 with none)
};

int best_blocks(const AlgorithmInfo& algorithm, const Shape& shape, const SimulationOptions& options);

// The same for any schedule family (e.g. a hierarchical composition):
// `plan_for(shape)` plans it for a block count; `pipelined` false means blocks
// do not apply and the answer is 1.
int best_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, bool pipelined, const Shape& shape,
                const SimulationOptions& options);
// The same, saying which bound the search hit.
BlockSearch search_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, bool pipelined, const Shape& shape,
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

// `search`, if given, receives the search's result (untouched when `requested`).
int resolve_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, const AlgorithmInfo& algorithm,
                   Shape shape, std::optional<int> requested, const SimulationOptions& options,
                   BlockSearch* search = nullptr);

}  // namespace copse
