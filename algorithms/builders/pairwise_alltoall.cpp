// Pairwise-exchange alltoall (MPICH's and Open MPI's choice for long
// messages): in step s = 1 .. p-1 rank r sends its block for r + s straight
// to rank r + s and receives rank r - s's block for it (mod p). Every block
// crosses the network once and no rank forwards another's data; its own
// block it copies across in the first step. Cost under Hockney, c elements a
// block (m = p c sent by each rank): (p-1)(alpha + m/p beta) + c gamma.
// The vector is MPI's two buffers (common/schedule.hpp): block d for rank d
// at d * c, block s from rank s at (p + s) * c.
// Example, p = 3, rank 0: step 1 sends block 1 to rank 1 and receives rank
// 2's block into block 2 of its receive area; step 2 sends block 2 to rank 2
// and receives rank 1's.
// Unequal blocks (alltoallv, Shape::counts as a p x p matrix): the same
// pairs, each transfer the block as algorithms/block_layout.hpp packs it; an
// empty block is no transfer (both sides know its size), and a step with
// neither is left out.
#include "algorithms/block_layout.hpp"

namespace copse::builders {

namespace {

RankSchedule pairwise_alltoall_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  const AlltoallLayout layout(shape, rank);
  Step own;
  own.copy = LocalCopy{layout.send().offset(rank), layout.recv().offset(rank), layout.send().size(rank)};
  bool copied = own.copy.count == 0;
  for (int s = 1; s < p; ++s) {
    const int to = (rank + s) % p, from = (rank - s + p) % p;
    Step step = copied ? Step{} : own;
    step.send = layout.send().range(to, to, to + 1);
    step.recv = layout.recv().range(from, from, from + 1);
    if (step.empty()) continue;
    copied = true;
    co_yield step;
  }
  if (!copied) co_yield own;
}

}  // namespace

SchedulePlan pairwise_alltoall(const Shape& shape) {
  return [shape](int rank) { return pairwise_alltoall_rank(shape, rank); };
}

}  // namespace copse::builders
