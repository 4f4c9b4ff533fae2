#pragma once
// Allgather, reduce-scatter and reduce to a root of small vectors among the
// ranks of one node (issue 18, item 3), through the direct reduce's slots
// (transport/direct_reduce.hpp): every rank copies its contribution into its
// own slot and posts it (DirectReduce::exchange), waits once -- for the
// last rank to post -- and then reads from the slots what it needs:
//  - allgather: every rank's block, into its place in the receive vector;
//  - reduce-scatter: its own block of every rank's vector, reduced in rank
//    order (x_0 ⊙ x_1 ⊙ ... ⊙ x_{T-1}, as the direct reduce and the
//    sequential reference compute it: any operator, commutative or not, and
//    the same bits whichever path and rank computed a block);
//  - reduce: the root, every element of every rank's vector in rank order;
//    the others read nothing and return once posted (a gather's others
//    and a scatter's root likewise): their next call first sees every post
//    of this one (the slots' reuse rule, DirectReduce).
//
// Why, beside the schedules: a schedule's exchanges are pairwise rounds,
// each a wait for one particular peer (on an oversubscribed node a trip
// through the scheduler) and a rendezvous; here one wait for the last
// arrival, and no rendezvous at all -- a post never waits for readers (the
// slots' two buffers per rank, see DirectReduce). Measured under mpirun
// (scripts/bench-mpi.sh --quick, COPSE_MPI_TABLE=none, 2 cores at load
// 14-21, three alternated runs each, copse's median over all of them): at
// np 4 (oversubscribed) 8 B-2 KiB per rank 11-12 us against the schedules'
// 24-26 us, allgather and reduce_scatter_block alike (Open MPI's tuned
// 10-16 us); at np 2 8 B-2 KiB 0.8-1.5 us against 0.9-2.2 us. Up to 8 KiB
// see DirectReduce::kPostBytes.
//
// The calls share the slots and their count with the direct reduce's
// allreduces and barriers, in any order; each rank posts at most
// DirectReduce::kPostBytes (allgather: its block; reduce-scatter: its whole
// vector), so the callers choose this path only where that fits
// (DirectReduce::holds). A call of 0 bytes still posts, so a mismatched call
// is reported, not skipped.

#include <cstddef>
#include <span>

#include "common/reduce_op.hpp"
#include "common/wait.hpp"
#include "transport/direct_reduce.hpp"

namespace copse {

// Rank me.rank's part of an allgather of `count` elements of
// `element_bytes` per rank: recv (T blocks of count elements, rank q's at
// q * count) holds every rank's `mine` on return; mine may be recv's own
// block (in place). Every rank must make the same calls (a different size
// is a ScheduleError); waits under `policy`.
void direct_allgather(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv, std::size_t count,
                      std::size_t element_bytes, const WaitPolicy& policy);

// Rank me.rank's part of a reduce-scatter: every rank's `send` has `total`
// elements; this rank's `recv` gets elements [from, from + count) of their
// rank-order reduction. Reduce_scatter_block is from = rank * count, total =
// T * count; recv may be send (in place: the input is posted before recv is
// written). Every rank must pass the same `total`; waits under `policy`;
// throws what the operator throws.
void direct_reduce_scatter(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                           std::size_t total, std::size_t from, std::size_t count, const ReduceOp& op,
                           const WaitPolicy& policy);

// Rank me.rank's part of a reduce of `count` elements to `root`: the root's
// recv gets the rank-order reduction of every rank's `send` (recv may be
// send); the others' recv is not touched. Every rank must pass the same
// count and root (else ScheduleError); waits under `policy`; throws what
// the operator throws.
void direct_reduce(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                   int root, const ReduceOp& op, const WaitPolicy& policy);

// The collectives that only move blocks (of `count` elements of
// `element_bytes`; rank q's block at q * count), through the same slots:
//  - gather: every rank posts its block (`mine`: recv's own at the root in
//    place), the root copies them into their places;
//  - scatter: the root posts its whole `send` (the others post its size
//    and nothing else), every rank copies its block from that post (in
//    place at the root, recv == send: its block stays there);
//  - alltoall: every rank posts its whole `send` and copies its block of
//    every post into recv (send may be recv: in place, the post is a copy).
// What a rank posts must fit a slot (DirectReduce::kPostBytes: a scatter's
// and an alltoall's T blocks). Waits under `policy`; a peer's different
// call, size or root is a ScheduleError.
void direct_gather(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv, std::size_t count,
                   std::size_t element_bytes, int root, const WaitPolicy& policy);
void direct_scatter(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                    std::size_t element_bytes, int root, const WaitPolicy& policy);
void direct_alltoall(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                     std::size_t element_bytes, const WaitPolicy& policy);

// The calls above (and the slots' allreduce and barrier) in the two halves a
// nonblocking or persistent call runs apart (runtime/request.cpp): a start
// that posts and waits for nobody, and a finish that reads once the posts
// it needs are in; the blocking calls are the two in a row (run_slot_call).
// A broadcast among them: the root posts its buffer and reads nothing, the
// others read the root's post -- the blocking broadcast takes the ring
// (DirectBcast), which a root could not leave before its readers. Beyond
// the slots a broadcast may go by address (`by_address`): the root shares
// its buffer's address and is done once every peer has read it; the others
// read it where it lies (DirectReduce::read_shared) and release it.
struct SlotCall {
  Collective collective = Collective::allreduce;  // barrier: an allreduce of nothing
  const std::byte* send = nullptr;  // allgather, gather: this rank's block (in place: recv's own); bcast: the buffer
  std::byte* recv = nullptr;        // not touched at a gather's or reduce's other ranks, nor a bcast's root
  std::size_t count = 0;  // elements: per block; of the vector (allreduce, reduce, bcast); reduce-scatter: of ours
  std::size_t element_bytes = 0;
  int root = -1;                    // reduce, gather, scatter, bcast
  const ReduceOp* op = nullptr;     // allreduce, reduce, reduce-scatter
  std::size_t total = 0, from = 0;  // reduce-scatter: every rank's elements, the first of this rank's block
  bool by_address = false;          // bcast: read where the root's buffer lies (above)
  // What this rank posts (DirectReduce::kPostBytes at most) and whose posts it reads.
  std::size_t posts(int ranks) const;
  DirectReduce::Reads reads(int rank) const;
};
// Posts me's part (waiting only to settle a one-sided call before it: a
// start that must not wait asks DirectReduce::ready_to_post first) and
// returns the call's number.
std::uint32_t start_slot_call(DirectReduce& slots, DirectRank& me, const SlotCall& c, const WaitPolicy& policy);
// Whether the posts me reads are in (finish_slot_call waits for nobody then).
bool slot_call_ready(const DirectReduce& slots, const DirectRank& me, std::uint32_t call, const SlotCall& c);
// Waits for the posts me reads, checks them (ScheduleError for a peer's
// other call, size or root) and reads them (a root by address: waits until
// its readers are done); throws what the operator throws. Returns the bytes
// read from other processes.
std::size_t finish_slot_call(DirectReduce& slots, DirectRank& me, std::uint32_t call, const SlotCall& c,
                             const WaitPolicy& policy);
inline std::size_t run_slot_call(DirectReduce& slots, DirectRank& me, const SlotCall& c, const WaitPolicy& policy) {
  return finish_slot_call(slots, me, start_slot_call(slots, me, c, policy), c, policy);
}

// The same three by address, for vectors too large for the slots
// (DirectReduce::share): each rank reads the peers' vectors where they lie,
// one copy per byte moved, and waits once for every post and once for its
// readers. Each returns the bytes read from other processes.
//  - allgather: every rank reads every peer's block into its place (the
//    peers in turn from its right neighbour on, so that the ranks do not all
//    read rank 0 first);
//  - reduce: the root alone reads, a chunk of every rank's vector after
//    another (among processes through `bounce`: two halves, each holding
//    a chunk read and, for a root in place other than rank 0, the chunk's
//    sum), and combines them in rank order as the slots' reduce does, the
//    others waiting only until the root has read them. Its work grows with
//    T: the caller keeps it to small teams (RankCore);
//  - reduce-scatter: every rank reads its own block of every peer's vector,
//    a chunk after another through `bounce` as the reduce's root does, and
//    combines them in rank order -- each element read once, by the rank
//    that keeps it, where a schedule moves every block through halving or
//    ring rounds -- then waits for its readers. recv must not overlap send:
//    in place, the caller reduces into other memory and copies after.
std::size_t direct_allgather_by_address(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv,
                                        std::size_t count, std::size_t element_bytes, const WaitPolicy& policy);
std::size_t direct_reduce_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                     std::size_t count, int root, const ReduceOp& op, std::span<std::byte> bounce,
                                     const WaitPolicy& policy);
std::size_t direct_reduce_scatter_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send,
                                             std::byte* recv, std::size_t total, std::size_t from, std::size_t count,
                                             const ReduceOp& op, std::span<std::byte> bounce, const WaitPolicy& policy);

// The collectives that only move blocks, by address likewise:
//  - gather: the root reads every peer's `mine` into its place in recv
//    (mine may be recv's own block: in place); the others wait only until
//    the root has read them, and their recv is not touched;
//  - scatter: every rank but the root reads its block of the root's `send`
//    into recv; the root copies its own (in place, recv == send: it stays
//    there) and returns once every peer has read;
//  - alltoall: every rank reads its block of every peer's `send` into the
//    peer's place in recv (from its right neighbour on). send must not
//    overlap recv: in place, the caller shares a copy.
// Each returns the bytes read from other processes.
std::size_t direct_gather_by_address(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv,
                                     std::size_t count, std::size_t element_bytes, int root, const WaitPolicy& policy);
std::size_t direct_scatter_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                      std::size_t count, std::size_t element_bytes, int root, const WaitPolicy& policy);
std::size_t direct_alltoall_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                       std::size_t count, std::size_t element_bytes, const WaitPolicy& policy);

}  // namespace copse
