// Rabenseifner's allreduce for any p: reduce-scatter by recursive halving,
// then allgather by recursive doubling, after folding p onto a power of two.
// Halving runs at distance 1, 2, 4, ... so each exchange joins two adjacent
// rank ranges (lower on the left) and non-commutative operators stay right;
// the rank whose bit is clear keeps the lower half of the current region.
// The allgather retraces the halvings in reverse.
// Example, p = 4, count 8: distance 1: 0<->1 and 2<->3 split [0,8) at 4
// (ranks 0, 2 keep [0,4)); distance 2: 0<->2 split [0,4) at 2, 1<->3 split
// [4,8) at 6; rank 0 ends with [0,2), 2 with [2,4), 1 with [4,6), 3 with [6,8).
#include <memory>

#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor_grid.hpp"

namespace copse::builders {

namespace {

// `to_zero`: instead of the allgather, gather the reduced segments to rank 0
// (reversing the halvings, a rank whose bit is set hands its region to its
// partner and is done) -- a reduce in which every rank still reduces its own
// share of the vector rather than the root doing it all.
RankSchedule rabenseifner_rank(Shape shape, int rank, bool to_zero) {
  for (auto g = patterns::halving_reduce_scatter(rank, shape.ranks, shape.count); g.next();) co_yield g.value();
  auto gather = to_zero ? patterns::doubling_gather_to_zero(rank, shape.ranks, shape.count)
                        : patterns::doubling_allgather(rank, shape.ranks, shape.count);
  while (gather.next()) co_yield gather.value();
}

// rabenseifner_rank's allreduce from (rank, position), for the simulator at
// millions of ranks: positions [0, h) are the reduce-scatter's, [h, 2h) the
// allgather's (h = patterns::halving_positions). Nothing per rank is stored.
//
// Partners meet at one position (a halving's, or a doubling's, distance; the
// fold's first or last), so the cursor is in lockstep too.
class RabenseifnerCursor final : public cursor::LockstepGridCursor<RabenseifnerCursor> {
 public:
  explicit RabenseifnerCursor(const Shape& shape)
      : ranks_(shape.ranks), count_(shape.count), half_(patterns::halving_positions(shape.ranks)) {}
  std::uint32_t positions(int) const { return positions(); }
  std::uint32_t positions() const override { return static_cast<std::uint32_t>(2 * half_); }
  bool fill(int rank, std::uint32_t position, Step& step) const {
    return fill_with(rank, position, step, patterns::Offsets::computed);
  }
  // The simulator's: a halving's offset is a sum over the levels below it.
  bool fill_counts(int rank, std::uint32_t position, Step& step) const {
    return fill_with(rank, position, step, patterns::Offsets::none);
  }

 private:
  bool fill_with(int rank, std::uint32_t position, Step& step, patterns::Offsets offsets) const {
    const int i = static_cast<int>(position);
    return cursor::fill_step(step, i < half_
                                       ? patterns::halving_step(rank, ranks_, count_, i, offsets)
                                       : patterns::doubling_step(rank, ranks_, count_, i - half_, false, offsets));
  }

  int ranks_;
  std::uint64_t count_;
  int half_;
};

}  // namespace

SchedulePlan rabenseifner_allreduce(const Shape& shape) {
  auto coroutines = [shape](int rank) { return rabenseifner_rank(shape, rank, false); };
  return CursorPlan{coroutines, std::make_shared<const RabenseifnerCursor>(shape)};
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
