// Recursive-doubling allgather, any p: after folding p onto a power of two
// (power_of_two_fold.hpp; a folded rank first hands its block to its
// partner), the group of butterfly ranks a rank has gathered doubles at
// distance 1, 2, 4, ...: it sends its group's blocks to the partner group
// and receives theirs. A group of butterfly ranks stands for a contiguous run
// of ranks, so each exchange is one transfer each way. At the end a folded
// rank receives the whole vector from its partner. Example, p = 6 (count
// 1): rank 0 gives block 0 to rank 1; butterfly ranks 0..3 are ranks 1, 3,
// 4, 5 holding blocks [0,2), [2,4), 4, 5; at distance 1 butterfly 0 and 1
// swap [0,2) and [2,4); at distance 2 butterfly 0 and 2 swap [0,4) and
// [4,6); rank 1 then sends all six blocks to rank 0.
#include "algorithms/block_layout.hpp"
#include "algorithms/builders/power_of_two_fold.hpp"

namespace copse::builders {

namespace {

RankSchedule recursive_doubling_allgather_rank(Shape shape, int rank) {
  const PowerOfTwoFold fold(shape.ranks);
  const BlockLayout layout(shape);  // unequal blocks (allgatherv) packed, algorithms/block_layout.hpp
  if (rank < 2 * fold.extra) {
    Step s;
    if (rank % 2 == 0)
      s.send = layout.range(rank + 1, rank, rank + 1);
    else
      s.recv = layout.range(rank - 1, rank - 1, rank);
    if (!s.empty()) co_yield s;
  }
  if (const int n = fold.new_rank(rank); n >= 0)
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
      const int mine = n & ~(mask - 1), theirs = mine ^ mask;
      Step s;
      s.send = layout.range(fold.old_rank(n ^ mask), fold.first_old(mine), fold.first_old(mine + mask));
      s.recv = layout.range(fold.old_rank(n ^ mask), fold.first_old(theirs), fold.first_old(theirs + mask));
      if (!s.empty()) co_yield s;
    }
  if (auto s = fold_out(fold, rank, layout.total()); !s.empty()) co_yield s;
}

}  // namespace

SchedulePlan recursive_doubling_allgather(const Shape& shape) {
  return [shape](int rank) { return recursive_doubling_allgather_rank(shape, rank); };
}

}  // namespace copse::builders
