#pragma once
// Hierarchical collectives as schedules: intranode groups -> inter-node
// algorithm among the off-node ranks -> intranode groups, planned from a
// HierarchyPlan. Being schedules, they are proven by the verifier, costed by
// the simulator (intranode phases at link level 0) and run by the emulator.
//
// For inter-node algorithms built on a tree (those whose registry row has a
// tree trait, algorithms/registry.hpp: binomial, binary-tree, chain, flat,
// dual-root) the hierarchy and the tree become one tree: every intranode
// group hangs flat under its leader (Bjørndalen et al.'s scripted trees),
// and the off-node ranks are joined by the algorithm's tree. The algorithm's
// own pipelining then runs across the levels at block granularity: a leader
// sends block j off-node while its group is still delivering block j+1.
// Example: 2 nodes of 4 ranks, groups of two, dual-root among node leaders
// 0 and 4: rank 1 is a child of 0, rank 3 of 2, rank 2 of 0 (level 1), and
// 0 and 4 are each other's dual roots.
//
// Other inter-node algorithms (ring, rabenseifner, recursive-doubling,
// two-tree) run as three phases per rank: up the levels, each group reduces
// to its leader with every member reducing its own share (Rabenseifner's
// reduce-scatter, then the shares gathered); the algorithm among the
// off-node ranks; down the levels, a pipelined binomial broadcast per group.
// A team on a single node under one leader runs its top group as a
// Rabenseifner allreduce instead, and always runs phased: there is no
// inter-node phase to pipeline with.
//
// Barrier is a one-element allreduce over the barrier row's own tree (or,
// without one, phased around its own builder).
// Allgather gathers every block up the combined tree and broadcasts the whole
// vector down; reduce_scatter reduces the whole vector up and scatters each
// rank its block down. Both, like reduce and bcast, need an algorithm whose row
// has a tree trait; a tree algorithm added with one file and one registry row
// serves them all (tests/test_registry_traits.cpp).
//
// Groups are contiguous rank ranges led by their lowest rank, so every
// composition keeps rank order for non-commutative operators.

#include <memory>
#include <string>

#include "algorithms/registry.hpp"
#include "topology/plan.hpp"
#include "topology/trees.hpp"

namespace copse {

// The combined tree of `plan` with `inter_tree` over its off-node ranks
// (`inter_tree(q, i)` gives off-node rank i's node in a tree of q). Children
// are in reduction receive order: intranode groups (above the rank) first,
// then the inter-node children; `lo`/`hi` give each subtree's rank range.
class HierarchicalTree {
 public:
  using TreeOf = trees::Node (*)(int p, int rank);
  HierarchicalTree(std::shared_ptr<const HierarchyPlan> plan, TreeOf inter_tree, bool dual_roots);
  trees::Node node(int rank) const;
  int dual(int rank) const;           // the other root of a dual-root pair, else -1
  int root() const { return root_; }  // the root (the lower root of a dual-root pair)

 private:
  std::shared_ptr<const HierarchyPlan> plan_;
  std::vector<trees::Node> nodes_;
  std::vector<int> dual_;
  int root_ = 0;
};

// Plans `collective` over the hierarchy with `inter` (an algorithm of that
// collective) among the off-node ranks. `shape.ranks` must equal plan.ranks.
// With pipeline_across_levels false, an allreduce runs as three phases even
// for tree algorithms (for comparison). Throws UsageError for a mismatch.
SchedulePlan plan_hierarchical(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter,
                               const Shape& shape, bool pipeline_across_levels = true);

// The lane decomposition (Träff and Hunold 2020, "Decomposing collectives
// for exploiting multi-lane communication"; plan/lanes.cpp) of any
// collective over the nodes of `plan`, which must all hold the same number k
// of ranks. Lane i is the ranks of local index i, one per node; `inter` (an
// algorithm of the collective whose row takes the lanes form) runs in every
// lane at once, each lane on a k-th of the data:
//  - allreduce: (1) a node reduce-scatter by recursive halving
//    (patterns::halving_reduce_scatter: log2 k exchanges of m/2, m/4, ...
//    elements, adjacent rank ranges joined lower on the left, so
//    non-commutative operators are served) leaves local rank i with its
//    share reduced over the node; (2) lane i allreduces that share (a share
//    depends on i alone, so every node's rank i holds the same one); (3)
//    recursive doubling inside each node gathers the shares back. For k not
//    a power of two the halving folds k onto one first, and the folded
//    ranks' lanes carry nothing.
//  - reduce: (1) as allreduce; (2) lane i reduces its share to the root
//    node's rank i; (3) the root's node gathers the shares to the root.
//  - bcast: (1) the root hands each rank of its node its share; (2) lane i
//    broadcasts it from the root node; (3) as allreduce.
//  - barrier: a one-element allreduce with the barrier's algorithm; the one
//    element is one rank's share, so one lane carries it.
//  - allgather: (1) lane i gathers the blocks of its ranks, which lie k
//    blocks apart (patterns::placed cuts its messages into contiguous runs);
//    (2) the node gathers its lanes' results with the same algorithm.
//  - reduce_scatter: the reverse: the node first reduces, with the same
//    algorithm, every rank's k-strided column of blocks to the rank of that
//    lane, then lane i reduce-scatters it among the nodes (node order, so
//    rank order overall).
// Example: 2 nodes of 2 ranks, allreduce of 10 elements: ranks 0 and 1 swap
// halves, rank 0 keeping [0,5) and rank 1 [5,10), each reduced x0.x1; ranks
// 0 and 2 allreduce elements 0-4, ranks 1 and 3 elements 5-9; then 0 and 1
// (and 2 and 3) swap their halves back. The hierarchy's groups and leaders
// are not used. UsageError for unequal nodes or an algorithm whose row
// refuses the lanes form.
SchedulePlan plan_lanes(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter, const Shape& shape);

// True when `inter` runs as one combined tree with the hierarchy (pipelined
// across levels), false when it runs as three phases.
bool runs_as_combined_tree(const AlgorithmInfo& inter);

}  // namespace copse
