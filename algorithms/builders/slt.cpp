// Sorted linear tree allreduce (Proficz 2018, §4.1, Fig. 5), for commutative
// operators. The ranks are renumbered by predicted arrival (PlanHints), the
// earliest first; the vector, cut into segments, is reduced along the chain
// of new ids 0 -> 1 -> ... -> P-1, and the results go on around the ring,
// P-1 -> 0 -> 1 -> ... -> P-2 (Fig. 5's "send to (id + 1) mod P" in both
// loops). The latest rank is last in the chain: while it computes, the
// others reduce every segment among themselves, and once it arrives it only
// adds its part and starts the results on their way (Fig. 6b).
//
// Fig. 5 cuts the vector into P segments; here the segment count is the
// pipeline's block count (Shape::blocks, `--blocks P` for the paper's). With
// balanced arrival the chain moves every segment twice over most links, so
// SLT is slower than the ring (Table 3: 0.75x); with one rank late by more
// than the time the others need to pre-reduce, what is left after its
// arrival is one pass of the vector through it and down the chain.
//
// The steps come from replaying the ring against the predicted arrivals
// (arrival_ring.hpp), which lets a rank forward results while it still
// reduces later segments, as the paper's non-blocking sends do.
#include "algorithms/builders/arrival_ring.hpp"
#include "algorithms/builders/planning.hpp"

namespace copse::builders {

SchedulePlan slt_allreduce(const Shape& shape) {
  const std::vector<int> order = arrival_order(shape);
  const BlockPartition part(shape.count, shape.blocks);
  std::vector<RingUnit> units;
  for (int j = 0; j < part.blocks; ++j)
    if (part.size(j) > 0) units.push_back(RingUnit{part.offset(j), part.size(j), 0});
  const Picos round = predicted_transfer(shape, part.size(0)) + predicted_combine(shape, part.size(0));
  return ring_plan(std::make_shared<const ArrivalRing>(
      order, arrival_rounds(predicted_arrivals(shape), order, round), std::move(units),
      [](int, int unit) { return long{unit}; }));  // segments in order, as Fig. 5's loops
}

}  // namespace copse::builders
