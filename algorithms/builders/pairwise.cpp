// Pairwise-exchange reduce_scatter (MPICH's choice for long vectors with a
// commutative operator): in step s = 1 .. p-1 rank r sends its contribution
// to block r + s straight to rank r + s and combines rank r - s's
// contribution to its own block r (mod p). p - 1 steps, each moving one
// block: every element crosses the network once, and no rank forwards
// another's data. The contributions reach block r in the order r-1, r-2,
// ..., wrapping past 0, so the operator must be commutative.
// Example, p = 3: step 1, rank 0 sends block 1 to rank 1 and combines rank
// 2's block 0; step 2, it sends block 2 to rank 2 and combines rank 1's.
// Unequal blocks (Shape::counts) go at their own sizes, packed
// (algorithms/block_layout.hpp); a step moving nothing is left out.
#include "algorithms/block_layout.hpp"
#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

RankSchedule pairwise_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  const BlockLayout layout(shape);
  if (p == 1 || layout.total() == 0) co_return;
  for (int s = 1; s < p; ++s) {
    const int to = (rank + s) % p, from = (rank - s + p) % p;
    Step step;
    step.send = layout.range(to, to, to + 1);
    step.recv = layout.range(from, rank, rank + 1);
    step.combine = patterns::side_of(from, rank);
    if (!step.empty()) co_yield step;
  }
}

}  // namespace

SchedulePlan pairwise_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return pairwise_rank(shape, rank); };
}

}  // namespace copse::builders
