#pragma once
// Schedules whose steps can be computed from (rank, position) alone: the
// simulator's fast path at millions of ranks (issue 20). A coroutine frame
// per rank costs some 250 bytes and all of them are alive at once in an
// allreduce (a leaf's first step comes before the root's last, its last after
// it); a position costs 4 bytes.
//
// A builder that has one returns a CursorPlan: a SchedulePlan whose
// coroutines are the builder's own (every other engine runs them unchanged),
// with the cursor beside it. simulate() finds the cursor through
// std::function::target and walks it instead; tests/test_step_cursor.cpp
// checks that a cursor yields exactly its coroutine's steps.

#include <cstdint>
#include <memory>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

// What the simulator's matching and clock read of a step: its peers (-1 for
// none), its counts, and the elements its local work combines or copies
// (local_work_elements, common/cost_model.hpp). Offsets and the combine's
// side cost nothing, so a cursor that only reports moves need not compute
// them.
struct StepMove {
  std::int32_t send_peer = -1, recv_peer = -1;
  std::uint64_t send_count = 0, recv_count = 0;
  std::uint64_t work_elements = 0;
};

inline StepMove move_of(const Step& step) {
  const std::uint64_t combined = (step.recv && step.combine != Combine::replace) ? step.recv.count : 0;
  return StepMove{step.send.peer, step.recv.peer, step.send.count, step.recv.count, combined + step.copy.count};
}

// A schedule in lockstep: every rank's grid has the same `positions()`
// slots, numbered alike, and each transfer's send and receive sit at the same
// position of their two ranks' grids (two-tree's rounds and colours,
// Rabenseifner's distances). Then a position's steps depend only on the
// clocks its ranks had before it, and the simulator may run the schedule a
// position at a time over all ranks, reading compact arrays as streams
// (algorithms/lockstep_sim.hpp), rather than rank by rank.
class LockstepMoves {
 public:
  virtual ~LockstepMoves() = default;
  virtual std::uint32_t positions() const = 0;
  // Sets out[i] to the move of rank first + i at `position`, for i below
  // `count`; a void slot is a move with neither peer and no local work. A
  // batch a call: the simulator asks for every rank at every position.
  virtual void moves_at(std::uint32_t position, int first, int count, StepMove* out) const = 0;
  // A schedule whose positions each hold the steps of a few ranks (a tree's
  // exchanges level by level) names them: every rank that may have a step
  // at `position`, each once, in any order. The simulator then asks
  // moves_of for those ranks alone, and a position costs its steps rather
  // than p. Null (the default): any rank may.
  virtual const std::vector<std::int32_t>* ranks_at(std::uint32_t) const { return nullptr; }
  // Sets out[i] to the move of rank ranks[i] at `position`, for i below `count`.
  virtual void moves_of(std::uint32_t position, const std::int32_t* ranks, int count, StepMove* out) const {
    for (int i = 0; i < count; ++i) moves_at(position, ranks[i], 1, out + i);
  }
  // A schedule may number the ranks its own way for the run -- places, 0 to
  // p-1 -- so that a position's ranks lie together in the simulator's
  // records (a tree's levels): then moves_at, ranks_at, moves_of and every
  // move's peers speak of places, and this names each place's rank. Null
  // (the default): places are ranks.
  virtual const std::vector<std::int32_t>* rank_of_place() const { return nullptr; }
};

class StepCursor {
 public:
  virtual ~StepCursor() = default;
  // Moves `position` forward to rank's first non-empty step at or after it
  // and sets `step` to it; false if the schedule has none left. Positions
  // are the cursor's own numbering: consecutive steps need not have
  // consecutive positions.
  virtual bool seek(int rank, std::uint32_t& position, Step& step) const = 0;
  // seek() reporting move_of(step) alone: what the simulator calls per step.
  virtual bool seek_move(int rank, std::uint32_t& position, StepMove& move) const = 0;
  // The step at a position seek() stopped at.
  virtual Step at(int rank, std::uint32_t position) const = 0;
  // Starts fetching what seek() reads of rank's own (the simulator calls it
  // for a batch of ranks before seeking any: their cache misses overlap).
  virtual void prefetch(int rank) const { static_cast<void>(rank); }
  // The same steps in lockstep, if the schedule keeps that promise; null if
  // not.
  virtual const LockstepMoves* lockstep() const { return nullptr; }
};

struct CursorPlan {
  SchedulePlan coroutines;
  std::shared_ptr<const StepCursor> cursor;
  RankSchedule operator()(int rank) const { return coroutines(rank); }
};

// The cursor behind a plan, or null if it has none.
inline const StepCursor* cursor_of(const SchedulePlan& plan) {
  const auto* c = plan.target<CursorPlan>();
  return c ? c->cursor.get() : nullptr;
}

// The cursors below are null for a block count too large for their 32-bit
// positions (2^25 blocks and more): such a plan runs on its coroutines.
//
// Träff's doubly pipelined allreduce over the dual-root pair of post-order
// binary trees (builders/dual_root.cpp), cut into `part`.
std::shared_ptr<const StepCursor> dual_root_cursor(int ranks, BlockPartition part);

// A binomial tree's pipelined reduce to rank 0 then broadcast from it
// (builders/binomial.cpp's allreduce).
std::shared_ptr<const StepCursor> binomial_allreduce_cursor(int ranks, BlockPartition part);

}  // namespace copse
