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
#include "algorithms/builders/power_of_two_fold.hpp"

namespace copse::builders {

namespace {

RankSchedule pairwise_alltoall_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  const std::uint64_t c = shape.count;
  if (c == 0) co_return;
  auto received_at = [&](int from) { return static_cast<std::uint64_t>(p + from) * c; };
  Step own;
  own.copy = LocalCopy{static_cast<std::uint64_t>(rank) * c, received_at(rank), c};
  for (int s = 1; s < p; ++s) {
    const int to = (rank + s) % p, from = (rank - s + p) % p;
    Step step = s == 1 ? own : Step{};
    step.send = blocks(to, to, to + 1, c);
    step.recv = Transfer{from, received_at(from), c};
    co_yield step;
  }
  if (p == 1) co_yield own;
}

}  // namespace

SchedulePlan pairwise_alltoall(const Shape& shape) {
  return [shape](int rank) { return pairwise_alltoall_rank(shape, rank); };
}

}  // namespace copse::builders
