#pragma once
// Schedule patterns shared by several algorithms: pipelined reduce up a tree,
// pipelined broadcast down a tree, Träff's doubly pipelined allreduce over a
// tree (with an optional dual root), and forwarding a whole result. Each is a
// lazy generator over one rank's steps; algorithms chain them.

#include <memory>
#include <vector>

#include "common/schedule.hpp"
#include "topology/trees.hpp"

namespace copse::patterns {

// Which side a child's partial result goes on: trees are order-preserving, so
// a child whose subtree lies below the rank contributes on the left.
inline Combine side_of(int child, int rank) { return child < rank ? Combine::left : Combine::right; }

// Pipelined reduction of `part` up the tree to its root. Per block an interior
// rank receives from each child in listed order (combining), and sends the
// previous block to its parent while receiving the first child's block, so
// with bidirectional ports a chain moves one block per step (Lowery–Langou
// Table III: (p+q-2) rounds).
RankSchedule tree_reduce(int rank, trees::Node node, BlockPartition part);

// Pipelined broadcast of `part` from the root down the tree. Children are
// served largest subtree first; a rank forwards block j-1 to its last child
// while receiving block j from its parent.
RankSchedule tree_bcast(int rank, trees::Node node, BlockPartition part);

// Träff 2021, Algorithm 1, over any order-preserving tree whose children all
// lie below their parent (post-order binary trees, chains). `dual` is the
// other root of a dual-root pair, or -1 for a single tree.
RankSchedule doubly_pipelined_allreduce(int rank, trees::Node node, int dual, BlockPartition part);

// Gathers every rank's block of `block` elements (rank r's at r * block) up
// the tree: a rank receives each child's subtree range, then sends its own
// subtree range [lo, hi] to its parent. Trees are order-preserving, so a
// subtree's blocks are contiguous. `children` are the children's nodes (for
// their ranges), in node.children order.
RankSchedule tree_gather(int rank, trees::Node node, std::vector<trees::Node> children, std::uint64_t block);

// The reverse: a rank receives its subtree's range from its parent, then sends
// each child the child's range.
RankSchedule tree_scatter(int rank, trees::Node node, std::vector<trees::Node> children, std::uint64_t block);

// A data-movement schedule run backwards: the steps in reverse order, each
// receiving what it sent and sending what it received. Reversing every rank
// keeps each pair's transfers in matching order, so a deadlock-free schedule
// stays deadlock-free, and a scatter becomes the gather that undoes it (the
// gather's time is the scatter's, step for step, under Hockney). Steps must
// not combine or copy (ScheduleError otherwise): neither runs backwards.
RankSchedule reversed(RankSchedule inner);
// Every rank's schedule of `plan` reversed: e.g. a gather from the scatter
// it undoes.
SchedulePlan reversed(SchedulePlan plan);

// Moves the whole of `part` from rank `from` to rank `to`, one block per step
// (used to deliver a reduction to a root other than the tree's own).
RankSchedule forward(int rank, int from, int to, BlockPartition part);

// Rabenseifner's two halves over ranks 0..p-1 (internode/algorithms/
// rabenseifner.cpp has the worked example): any p is folded onto a power of
// two (power_of_two_fold.hpp), then the vector is halved at distance 1, 2, 4,
// ... -- each exchange joins two adjacent rank ranges, lower on the left, so
// non-commutative operators stay right. After halving_reduce_scatter a rank
// holds the reduced halving_share(rank, p, count) (empty for a folded rank);
// doubling_allgather retraces the halvings and leaves every rank with the
// whole vector. A share depends only on (rank, p, count), so equal-sized
// groups of ranks (the lanes of plan/hierarchical.cpp) own equal shares.
struct Share {
  std::uint64_t lo = 0, hi = 0;
};
Share halving_share(int rank, int p, std::uint64_t count);
RankSchedule halving_reduce_scatter(int rank, int p, std::uint64_t count);
RankSchedule doubling_allgather(int rank, int p, std::uint64_t count);
// The allgather's variant for a reduce: the shares are gathered to rank 0
// only (a rank whose bit is set hands its region to its partner and is done).
RankSchedule doubling_gather_to_zero(int rank, int p, std::uint64_t count);
// The same schedules one step at a time, for a step cursor (step_cursor.hpp):
// each half is halving_positions(p) steps, some of them empty (the
// generators above skip those). halving_reduce_scatter's position 0 is the
// fold-in and 1 + k the halving at distance 2^k; the doubling's position i <
// log2 p2 retraces the halving at distance p2 / 2^(i+1), its last the fold-out.
// Offsets::none leaves the halvings' offsets wrong (a loop over the levels
// below) and their counts right: what the simulator reads.
enum class Offsets { computed, none };
int halving_positions(int p);
Step halving_step(int rank, int p, std::uint64_t count, int position, Offsets offsets = Offsets::computed);
Step doubling_step(int rank, int p, std::uint64_t count, int position, bool to_zero,
                   Offsets offsets = Offsets::computed);

// Runs a schedule planned for participants 0..q-1 as the ranks `global`
// (participant i is global rank global[i]) on elements starting at `base`.
RankSchedule on_ranks(RankSchedule inner, std::shared_ptr<const std::vector<int>> global, std::uint64_t base = 0);

// Where the vector of a schedule planned for q participants lies in the
// whole vector when it is not one contiguous slice: it is cut into units of
// `unit` elements, and unit u = a * minors + b (b < minors) lands at
//   base + (b * stride + a) * unit.
// Example (plan/lanes.cpp): an allgather of k ranks per node, blocks of c
// elements, rank n*k+i's at (n*k+i)*c: lane i's allgather among the q nodes
// works on q units, its unit n being block n*k+i: {base i*c, unit c, minors q,
// stride k}. The node's allgather of its k lanes' results works on k*q units,
// lane i's unit i*q+n again block n*k+i: {base 0, unit c, minors q, stride k}.
struct Placement {
  std::uint64_t base = 0;
  std::uint64_t unit = 0;  // 0: no elements
  std::uint64_t minors = 1;
  std::uint64_t stride = 1;
  std::uint64_t at(std::uint64_t element) const {
    const std::uint64_t u = element / unit;
    return base + ((u % minors) * stride + u / minors) * unit + element % unit;
  }
};
// The same schedule as `on_ranks`, its elements placed by `where`. A
// transfer that spans units landing apart becomes one transfer per
// contiguous run, the step becoming that many steps (their k-th transfers
// paired, so both ends cut a message alike and match in order); a copy is
// cut the same way into steps of its own after them.
RankSchedule placed(RankSchedule inner, std::shared_ptr<const std::vector<int>> global, Placement where);

// A tree built for ranks relabelled so that `shift` is added (mod p) to every
// rank: lets a broadcast tree rooted at r0 serve any root.
trees::Node relabel(trees::Node node, int shift, int p);

}  // namespace copse::patterns
