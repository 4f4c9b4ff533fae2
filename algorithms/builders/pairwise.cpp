// Pairwise-exchange reduce_scatter (MPICH's choice for long vectors with a
// commutative operator): in step s = 1 .. p-1 rank r sends its contribution
// to block r + s straight to rank r + s and combines rank r - s's
// contribution to its own block r (mod p). p - 1 steps, each moving one
// block: every element crosses the network once, and no rank forwards
// another's data. The contributions reach block r in the order r-1, r-2,
// ..., wrapping past 0, so the operator must be commutative.
// Example, p = 3: step 1, rank 0 sends block 1 to rank 1 and combines rank
// 2's block 0; step 2, it sends block 2 to rank 2 and combines rank 1's.
#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

RankSchedule pairwise_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  const std::uint64_t c = shape.count;
  if (p == 1 || c == 0) co_return;
  const auto block = [&](int peer, int b) { return Transfer{peer, static_cast<std::uint64_t>(b) * c, c}; };
  for (int s = 1; s < p; ++s) {
    const int to = (rank + s) % p, from = (rank - s + p) % p;
    Step step;
    step.send = block(to, to);
    step.recv = block(from, rank);
    step.combine = patterns::side_of(from, rank);
    co_yield step;
  }
}

}  // namespace

SchedulePlan pairwise_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return pairwise_rank(shape, rank); };
}

}  // namespace copse::builders
