#pragma once
// The v-variants -- allgatherv, gatherv, scatterv, alltoallv: blocks of a
// size per rank -- among the ranks of one node, by address (issue 19), as
// transport/direct_gather.hpp moves equal blocks: each rank posts the
// address of its input and, in its slot, where its blocks lie in it (their
// counts and displacements); each reader copies the blocks meant for it
// straight into their places -- memcpy among threads, process_vm_readv
// among processes -- and nobody returns while a peer may still read its
// input. No padding to the largest block, no agreement on it first, and
// one copy per byte moved: the Comm's other way, the equal-block
// collective over padded private vectors (runtime/vector_collectives.cpp),
// costs an allreduce and two more copies.
//
// Worked for an alltoallv at T = 3, rank 1 receiving: rank 0's slot says
// its block for rank 1 is 5 bytes at 2 of its send vector, rank 2's says 0
// bytes; rank 1's own receive counts say 5 from rank 0 and 0 from rank 2
// (else a ScheduleError naming both ranks), so rank 1 reads bytes [2, 7) of
// rank 0's vector into recv + recv_displs[0] and copies its own block for
// itself from its own send vector.

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/schedule.hpp"
#include "common/wait.hpp"
#include "transport/direct_reduce.hpp"

namespace copse {

// Blocks in a vector, in bytes: block i is counts[i] bytes at displs[i].
struct VectorLayout {
  std::span<const std::uint64_t> counts, displs;
};

// Rank me.rank's part of v-variant `c` (allgather, gather, scatter or
// alltoall with a count per rank; `root` a gather's or scatter's, else
// ignored):
//  - `input` holds what this rank sends, where `sent` says: one block for
//    every receiver (allgather, gather) or block q for rank q (scatter's
//    root, alltoall); empty where this rank sends nothing (a scatter's
//    other ranks);
//  - `recv` gets from each rank q the block q sends it, at
//    received.displs[q] (received.counts[q] bytes, which must be what q
//    sends: else a ScheduleError, thrown once the call is over, as peers
//    may read this rank's input until then); `received` is ignored where this rank
//    receives nothing (a gather's other ranks). A block whose place is
//    where it lies already (in place) is not copied.
// Blocks must not overlap where they are written (MPI's rule); an
// alltoall's input must not be recv (in place, the caller shares a copy).
// Returns the bytes read from other processes.
std::size_t direct_vector_by_address(DirectReduce& slots, DirectRank& me, Collective c, int root,
                                     const std::byte* input, VectorLayout sent, std::byte* recv, VectorLayout received,
                                     const WaitPolicy& policy);

}  // namespace copse
