// Recursive doubling allreduce for any p: log2(p2) whole-vector exchanges with
// partners at distance 1, 2, 4, ... (after folding p onto a power of two).
// Each exchange joins two adjacent rank ranges, lower one on the left, so the
// order of a non-commutative operator is kept.
#include <bit>
#include <memory>

#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor_grid.hpp"

namespace copse::builders {

namespace {

// Rank's step at `position` (possibly empty): 0 the fold-in, 1 + k the
// exchange at distance 2^k, 1 + log2 p2 the fold-out. The coroutines yield
// the non-empty ones in order and the step cursor seeks them.
int recursive_doubling_positions(const PowerOfTwoFold& fold) {
  return std::countr_zero(static_cast<unsigned>(fold.p2)) + 2;
}

Step recursive_doubling_step(const PowerOfTwoFold& fold, std::uint64_t count, int rank, int position) {
  if (position == 0) return fold_in(fold, rank, count);
  if (position + 1 == recursive_doubling_positions(fold)) return fold_out(fold, rank, count);
  const int n = fold.new_rank(rank);
  if (n < 0) return {};
  const int partner = fold.old_rank(n ^ (1 << (position - 1)));
  Step s;
  s.send = whole(partner, count);
  s.recv = whole(partner, count);
  s.combine = patterns::side_of(partner, rank);
  return s;
}

RankSchedule recursive_doubling_rank(Shape shape, int rank) {
  const PowerOfTwoFold fold(shape.ranks);
  for (int i = 0, end = recursive_doubling_positions(fold); i < end; ++i)
    if (const Step s = recursive_doubling_step(fold, shape.count, rank, i); !s.empty()) co_yield s;
}

// Partners meet at one position (the distance, or the fold's first or
// last): a lockstep cursor.
class RecursiveDoublingCursor final : public cursor::LockstepGridCursor<RecursiveDoublingCursor> {
 public:
  explicit RecursiveDoublingCursor(const Shape& shape) : fold_(shape.ranks), count_(shape.count) {}
  std::uint32_t positions(int) const { return positions(); }
  std::uint32_t positions() const override { return static_cast<std::uint32_t>(recursive_doubling_positions(fold_)); }
  bool fill(int rank, std::uint32_t position, Step& step) const {
    return cursor::fill_step(step, recursive_doubling_step(fold_, count_, rank, static_cast<int>(position)));
  }

 private:
  PowerOfTwoFold fold_;
  std::uint64_t count_;
};

}  // namespace

SchedulePlan recursive_doubling_allreduce(const Shape& shape) {
  auto coroutines = [shape](int rank) { return recursive_doubling_rank(shape, rank); };
  return CursorPlan{coroutines, std::make_shared<const RecursiveDoublingCursor>(shape)};
}

}  // namespace copse::builders
