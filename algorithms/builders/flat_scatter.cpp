// Linear scatter and gather: the root sends every other rank its block
// straight, in rank order from root + 1 around to root - 1; the gather is
// that run backwards (patterns::reversed), so the root hears from root - 1
// first. p - 1 rounds at the root: (p-1)(alpha + m/p beta) for m = p c in
// all, against the binomial tree's ceil(log2 p) alpha + (p-1)/p m beta. No
// rank but the root sends or receives more than once, which is what makes it
// the choice for a handful of ranks on a model where start-ups overlap
// (LogGP: the root's sends leave one overhead apart). Unequal blocks
// (Shape::counts): each rank's own, packed (algorithms/block_layout.hpp); a
// rank with none is skipped.
#include "algorithms/block_layout.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

RankSchedule flat_scatter_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  const BlockLayout layout(shape);
  if (p == 1 || layout.total() == 0) co_return;
  Step s;
  if (rank != shape.root) {
    s.recv = layout.range(shape.root, rank, rank + 1);
    if (s.recv) co_yield s;
    co_return;
  }
  for (int i = 1; i < p; ++i) {
    const int to = (shape.root + i) % p;
    s.send = layout.range(to, to, to + 1);
    if (s.send) co_yield s;
  }
}

}  // namespace

SchedulePlan flat_scatter(const Shape& shape) {
  return [shape](int rank) { return flat_scatter_rank(shape, rank); };
}
SchedulePlan flat_gather(const Shape& shape) { return patterns::reversed(flat_scatter(shape)); }

}  // namespace copse::builders
