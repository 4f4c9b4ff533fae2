// Recursive-halving reduce_scatter (Thakur, Rabenseifner, Gropp 2005; MPICH's
// choice for commutative operators), any p: after folding p onto a power of
// two (power_of_two_fold.hpp; a folded rank first hands its whole vector to
// its partner), butterfly rank n exchanges with n ^ m for m = p2/2, ..., 1,
// sending the half of its region that the partner's group ends with and
// combining the half its own group ends with: log2 p2 steps, each rank
// sending about (p-1)/p of the vector in all. A group of butterfly ranks
// stands for a contiguous run of ranks, so every half is one transfer. A
// partner that folded a rank in holds two blocks at the end and gives the
// folded rank its block back. Combining partners that are not neighbours
// reorders the operands: commutative operators only.
// Example, p = 4 (count 1): rank 0 sends blocks [2,4) to rank 2 and combines
// [0,2) from it, then sends block 1 to rank 1 and combines block 0 from it.
#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

RankSchedule recursive_halving_rank(Shape shape, int rank) {
  const PowerOfTwoFold fold(shape.ranks);
  const std::uint64_t c = shape.count;
  // The blocks of butterfly ranks [first, end): those of the ranks they stand for.
  const auto of_group = [&](int peer, int first, int end) {
    return blocks(peer, fold.first_old(first), fold.first_old(end), c);
  };
  if (auto s = fold_in(fold, rank, c * static_cast<std::uint64_t>(shape.ranks)); !s.empty()) co_yield s;
  const int n = fold.new_rank(rank);
  if (n < 0) {  // a folded rank: its block comes back at the end
    Step s;
    s.recv = blocks(rank + 1, rank, rank + 1, c);
    if (!s.empty()) co_yield s;
    co_return;
  }
  for (int m = fold.p2 / 2; m >= 1; m /= 2) {
    const int partner = n ^ m, group = n & ~(2 * m - 1);
    const int keep = (n & m) ? group + m : group, give = (n & m) ? group : group + m;
    Step s;
    s.send = of_group(fold.old_rank(partner), give, give + m);
    s.recv = of_group(fold.old_rank(partner), keep, keep + m);
    s.combine = patterns::side_of(fold.old_rank(partner), rank);
    if (!s.empty()) co_yield s;
  }
  if (n < fold.extra) {  // hand the folded rank (rank - 1) its block
    Step s;
    s.send = blocks(rank - 1, rank - 1, rank, c);
    if (!s.empty()) co_yield s;
  }
}

}  // namespace

SchedulePlan recursive_halving_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return recursive_halving_rank(shape, rank); };
}

}  // namespace copse::builders
