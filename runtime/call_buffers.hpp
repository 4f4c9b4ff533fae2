#pragma once
// A collective call's buffers, piece by piece (issue 19): where a piece's
// working vector y is, what its run reads from the user's input instead of a
// copy up front (RunInput), and what goes back to the user's buffers after
// the run -- the blocking calls' rules (runtime/communicator.hpp: in place,
// roots, blocks of unequal counts) written once over a call's arguments
// (CallArgs, runtime/pending.hpp), whether the call then runs waiting or a
// step at a time. The thread Comm runs every schedule through it
// (runtime/comm.cpp, ThreadCall), and the MPI Comm its nonblocking and
// persistent calls (MpiCall in runtime/mpi_pending.cpp), over its work
// vector and its plans' numbering (`slot_of` below); the MPI Comm's blocking
// calls (runtime/mpi_comm.cpp) still load and store their pieces themselves.

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "runtime/pending.hpp"
#include "runtime/rank_core.hpp"

namespace copse {

// One piece of a call: the elements [at, at + n) of every block (of the whole
// vector for the collectives without blocks), and where it runs.
struct CallPiece {
  std::uint64_t at = 0, n = 0;
  std::byte* y = nullptr;
  RunInput input{};
  bool into_recv = false;  // allgather: y is the user's receive buffer
};

class CallBuffers {
 public:
  // `args` as the Comm's call takes them (reduce_scatter with a count per
  // rank: args.blocks; null, blocks of args.count, which then run in one
  // piece in rank order); this rank of `ranks`.
  CallBuffers(const CallArgs& args, int ranks, int rank);

  const CallArgs& args() const { return a_; }
  Collective collective() const { return a_.collective; }
  // Bytes per element (a barrier's one element has none: its messages carry
  // no data).
  std::size_t element_bytes() const { return eb_; }
  // Elements per block, or of the vector: reduce_scatter's largest count
  // (the others padded), a barrier's one.
  std::uint64_t count() const { return count_; }
  // The reduction operator, or the data operator of the collectives that
  // only move data (replace never combines).
  const ReduceOp& op() const { return a_.op ? *a_.op : data_; }

  // `slot_of`: the working vector's block of rank v is block slot_of[v]
  // (a plan over another numbering than the ranks'); empty: block v.
  // Private working memory a piece of n needs, in bytes (0: none).
  std::size_t work_bytes(std::uint64_t n, std::span<const int> slot_of = {}) const;
  // The piece [at, at + n): its working vector (`work`: at least
  // work_bytes(n) of private memory) with this rank's input in it, or to be
  // read from the piece's RunInput where y is not yet written.
  CallPiece load(std::uint64_t at, std::uint64_t n, std::byte* work, std::span<const int> slot_of = {}) const;
  // After the piece's run: this rank's result out of y into the user's buffers.
  void store(const CallPiece& piece, std::span<const int> slot_of = {}) const;

 private:
  std::size_t block_at(int v, std::uint64_t n, std::span<const int> slot_of) const {
    const auto slot = static_cast<std::size_t>(slot_of.empty() ? v : slot_of[static_cast<std::size_t>(v)]);
    return slot * n * eb_;
  }
  // allgather: the piece runs in the user's receive buffer (its blocks in
  // rank order, and the call in one piece).
  bool into_recv(std::uint64_t n, std::span<const int> slot_of) const { return n == count_ && slot_of.empty(); }
  // reduce_scatter: the run reads its input where it is instead of packing it
  // (equal blocks, in rank order, one piece).
  bool reads_in_place(std::uint64_t n, std::span<const int> slot_of) const {
    return (!a_.blocks || a_.blocks->equal) && n == count_ && slot_of.empty();
  }
  MovedBlocks moved() const { return {a_.collective, ranks_, rank_, a_.root, count_, eb_}; }

  CallArgs a_;
  int ranks_ = 1, rank_ = 0;
  std::size_t eb_ = 0;
  std::uint64_t count_ = 0;
  ReduceOp data_;  // without a reduction operator: the data operator
};

}  // namespace copse
