// Recursive doubling allreduce for any p: log2(p2) whole-vector exchanges with
// partners at distance 1, 2, 4, ... (after folding p onto a power of two).
// Each exchange joins two adjacent rank ranges, lower one on the left, so the
// order of a non-commutative operator is kept.
#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

RankSchedule recursive_doubling_rank(Shape shape, int rank) {
  const PowerOfTwoFold fold(shape.ranks);
  if (auto s = fold_in(fold, rank, shape.count); !s.empty()) co_yield s;
  if (const int n = fold.new_rank(rank); n >= 0)
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
      const int partner = fold.old_rank(n ^ mask);
      Step s;
      s.send = whole(partner, shape.count);
      s.recv = whole(partner, shape.count);
      s.combine = patterns::side_of(partner, rank);
      if (!s.empty()) co_yield s;
    }
  if (auto s = fold_out(fold, rank, shape.count); !s.empty()) co_yield s;
}

}  // namespace

SchedulePlan recursive_doubling_allreduce(const Shape& shape) {
  return [shape](int rank) { return recursive_doubling_rank(shape, rank); };
}

}  // namespace copse::builders
