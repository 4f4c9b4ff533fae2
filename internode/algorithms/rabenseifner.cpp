// Rabenseifner's allreduce for any p: reduce-scatter by recursive halving,
// then allgather by recursive doubling, after folding p onto a power of two.
// Halving runs at distance 1, 2, 4, ... so each exchange joins two adjacent
// rank ranges (lower on the left) and non-commutative operators stay right;
// the rank whose bit is clear keeps the lower half of the current region.
// The allgather retraces the halvings in reverse.
// Example, p = 4, count 8: distance 1: 0<->1 and 2<->3 split [0,8) at 4
// (ranks 0, 2 keep [0,4)); distance 2: 0<->2 split [0,4) at 2, 1<->3 split
// [4,8) at 6; rank 0 ends with [0,2), 2 with [2,4), 1 with [4,6), 3 with [6,8).
#include <array>

#include "internode/algorithms/power_of_two_fold.hpp"
#include "internode/patterns.hpp"

namespace copse::builders {

namespace {

// `to_zero`: instead of the allgather, gather the reduced segments to rank 0
// (reversing the halvings, a rank whose bit is set hands its region to its
// partner and is done) -- a reduce in which every rank still reduces its own
// share of the vector rather than the root doing it all.
RankSchedule rabenseifner_rank(Shape shape, int rank, bool to_zero) {
  const PowerOfTwoFold fold(shape.ranks);
  if (auto s = fold_in(fold, rank, shape.count); !s.empty()) co_yield s;
  if (const int n = fold.new_rank(rank); n >= 0) {
    struct Region {
      std::uint64_t lo, hi;
    };
    std::array<Region, 32> before{};  // the region held before each halving
    Region mine{0, shape.count};
    int levels = 0;
    for (int mask = 1; mask < fold.p2; mask <<= 1, ++levels) {
      const int partner = fold.old_rank(n ^ mask);
      const std::uint64_t mid = mine.lo + (mine.hi - mine.lo) / 2;
      const bool keep_lower = (n & mask) == 0;
      const Region keep = keep_lower ? Region{mine.lo, mid} : Region{mid, mine.hi};
      const Region give = keep_lower ? Region{mid, mine.hi} : Region{mine.lo, mid};
      before[static_cast<std::size_t>(levels)] = mine;
      Step s;
      s.send = region(partner, give.lo, give.hi);
      s.recv = region(partner, keep.lo, keep.hi);
      s.combine = patterns::side_of(partner, rank);
      if (!s.empty()) co_yield s;
      mine = keep;
    }
    for (int level = levels - 1; level >= 0; --level) {
      const int bit = 1 << level;
      if (to_zero && (n & ~((bit << 1) - 1)) != 0) continue;  // already handed its region on
      const int partner = fold.old_rank(n ^ bit);
      const Region whole_region = before[static_cast<std::size_t>(level)];
      const bool kept_lower = (n & bit) == 0;
      const Region theirs = kept_lower ? Region{mine.hi, whole_region.hi} : Region{whole_region.lo, mine.lo};
      Step s;
      if (!to_zero || !kept_lower) s.send = region(partner, mine.lo, mine.hi);
      if (!to_zero || kept_lower) s.recv = region(partner, theirs.lo, theirs.hi);
      if (!s.empty()) co_yield s;
      mine = whole_region;
    }
  }
  // Folded ranks get the result back; for a reduce only rank 0 needs it.
  if (to_zero && rank > 1) co_return;
  if (auto s = fold_out(fold, rank, shape.count); !s.empty()) co_yield s;
}

}  // namespace

SchedulePlan rabenseifner_allreduce(const Shape& shape) {
  return [shape](int rank) { return rabenseifner_rank(shape, rank, false); };
}

SchedulePlan rabenseifner_reduce(const Shape& shape) {
  return [shape](int rank) {
    return [](Shape s, int r) -> RankSchedule {
      for (auto g = rabenseifner_rank(s, r, true); g.next();) co_yield g.value();
      for (auto g = patterns::forward(r, 0, s.root, BlockPartition(s.count, 1)); g.next();) co_yield g.value();
    }(shape, rank);
  };
}

}  // namespace copse::builders
