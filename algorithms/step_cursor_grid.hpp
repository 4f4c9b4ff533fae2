#pragma once
// The pieces every StepCursor (step_cursor.hpp) is made of: a grid of
// positions some of which are void, and block transfers computed without
// BlockPartition's divisions. The builders whose cursors sit beside their
// coroutines (two_tree.cpp, rabenseifner.cpp) use them as step_cursor.cpp's
// own cursors do.

#include <algorithm>
#include <cstdint>

#include "algorithms/step_cursor.hpp"

namespace copse::cursor {

// Positions are 32-bit: every grid holds fewer than 64 (blocks + 1) slots a
// rank (a tree over an int's ranks is at most 31 deep, a binomial rank has at
// most 31 children, a two-tree rank 4 slots a round), which fits below this
// many blocks. A builder asked for more runs on its coroutines.
constexpr int kMostBlocks = 1 << 25;

// Positions run over a fixed grid of slots, some of them void; seek() skips
// the void ones, as the coroutines skip their empty steps. Derived supplies
// positions(rank), the end of rank's grid, and fill(rank, position, step),
// which sets `step` and returns true, or returns false for a void slot
// (most slots of a leaf are void). It may also hide first_from(rank,
// position), the first slot at or after `position` that may be non-void,
// to jump over runs of void slots it can tell at once, and fill_counts(rank,
// position, step), fill() with the counts alone right, for seek_move, when
// its offsets cost more than its counts.
//
// seek_move() computes no offsets only if find(), fill() and
// Blocks::transfer() are all inlined into it, the step a local that never
// reaches memory; left to itself GCC calls find() or fill() out of line,
// and they write a whole Step, offsets included. So all three are
// always_inline, and a Derived's fill() should be too (a sixth of the
// instructions of a dual-root or binomial run at p = 2^18).
template <class Derived>
class GridCursor : public StepCursor {
 public:
  bool seek(int rank, std::uint32_t& position, Step& step) const final { return find<false>(rank, position, step); }
  // The step stays local, so the compiler drops whatever of fill() only
  // offsets and the combine's side read.
  bool seek_move(int rank, std::uint32_t& position, StepMove& move) const final {
    Step step;
    if (!find<true>(rank, position, step)) return false;
    move = move_of(step);
    return true;
  }
  std::uint32_t first_from(int, std::uint32_t position) const { return position; }
  [[gnu::always_inline]] bool fill_counts(int rank, std::uint32_t position, Step& step) const {
    return static_cast<const Derived&>(*this).fill(rank, position, step);
  }
  Step at(int rank, std::uint32_t position) const final {
    Step step;
    static_cast<const Derived&>(*this).fill(rank, position, step);
    return step;
  }

 private:
  // kCounts: the step's counts are all that is read (fill_counts).
  template <bool kCounts>
  [[gnu::always_inline]] bool find(int rank, std::uint32_t& position, Step& step) const {
    const auto& grid = static_cast<const Derived&>(*this);
    for (const std::uint32_t end = grid.positions(rank); (position = grid.first_from(rank, position)) < end; ++position)
      if (kCounts ? grid.fill_counts(rank, position, step) : grid.fill(rank, position, step)) return true;
    return false;
  }
};

// A GridCursor whose grids keep the lockstep promise (step_cursor.hpp):
// Derived adds positions(), every rank's grid length, and moves_at reads each
// rank's slot at the position, void ones included.
template <class Derived>
class LockstepGridCursor : public GridCursor<Derived>, public LockstepMoves {
 public:
  const LockstepMoves* lockstep() const final { return this; }
  void moves_at(std::uint32_t position, int first, int count, StepMove* out) const final {
    const auto& grid = static_cast<const Derived&>(*this);
    for (int i = 0; i < count; ++i) {
      Step step;
      out[i] = grid.fill_counts(first + i, position, step) ? move_of(step) : StepMove{};
    }
  }
};

// Sets `step` to a step of these transfers, or returns false if both are void.
inline bool fill_step(Step& step, Transfer send, Transfer recv, Combine combine) {
  if (!send && !recv) return false;
  step.send = send;
  step.recv = recv;
  step.combine = combine;
  step.copy = LocalCopy{};
  return true;
}

// For a grid whose builder computes each slot's whole step, an empty one for
// a void slot (its coroutines yield the same function's non-empty steps):
// sets `step` to `s` unless it is empty.
inline bool fill_step(Step& step, const Step& s) {
  if (s.empty()) return false;
  step = s;
  return true;
}

// BlockPartition::transfer without its two divisions a call: the simulator
// asks for a few million blocks a second.
class Blocks {
 public:
  explicit Blocks(const BlockPartition& part)
      : base_(part.base),
        per_block_(part.count / static_cast<std::uint64_t>(part.blocks)),
        longer_(part.count % static_cast<std::uint64_t>(part.blocks)),
        blocks_(part.count > 0 ? part.blocks : 0) {}
  long blocks() const { return blocks_; }  // blocks 0 .. blocks() - 1 are not void
  [[gnu::always_inline]] Transfer transfer(long j, int peer) const {
    if (j < 0 || j >= blocks_ || peer < 0) return {};
    const auto uj = static_cast<std::uint64_t>(j);
    return Transfer{peer, base_ + uj * per_block_ + std::min(uj, longer_), per_block_ + (uj < longer_ ? 1 : 0)};
  }

 private:
  std::uint64_t base_, per_block_, longer_;  // the first `longer_` blocks hold one element more
  long blocks_;                              // 0: no elements, every block void
};

}  // namespace copse::cursor
