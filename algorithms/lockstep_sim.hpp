#pragma once
// The simulator's run of a schedule in lockstep (LockstepMoves,
// algorithms/step_cursor.hpp): a position at a time -- over all ranks, or
// over the few a position names (ranks_at: a tree's level) -- from one
// compact record per rank, read as a stream, rather than rank by rank
// through records that partners far apart in rank order make cache misses
// (two-tree at p = 2^22: 256 MB of records, its partners 2^level ranks
// apart). A schedule may lay the records out in its own order (places:
// dual-root's level by level), so that a position's ranks lie together.
//
// Why it is exact: with bidirectional ports a rank's ports are free by the
// time its step starts (each transfer ends by its step's end, and the next
// step starts no earlier), so a transfer's two ready times are its two
// ranks' step starts; in lockstep both steps sit at one position, and so
// their starts are the clocks the ranks had after the position before. The
// arithmetic is the step-by-step run's own (PairCost::ends, then the step's
// local work), so every figure is the same bit for bit.
//
// It applies only where every pair of ranks costs the same and no DataHooks
// or Timeline watches (simulate() checks); arrival offsets are fine.

#include <optional>

#include "algorithms/simulator.hpp"
#include "algorithms/step_cursor.hpp"

namespace copse {

// The run, or nothing if the schedule breaks its promise: a send whose
// receive is not at the same position with the same count, a peer that is
// not a rank, a count past what the step-by-step run counts. simulate() then
// runs it step by step, which names the fault.
// What the run holds per rank at its peak: its record, and at the end the
// result's finish time.
std::size_t lockstep_bytes_per_rank();

std::optional<SimulationResult> simulate_lockstep(const LockstepMoves& moves, int ranks,
                                                  const SimulationOptions& options, const PairCost& pair);

}  // namespace copse
