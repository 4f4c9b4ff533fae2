#pragma once
// Hierarchical collectives as schedules: intranode groups -> inter-node
// algorithm among the off-node ranks -> intranode groups, planned from a
// HierarchyPlan. Being schedules, they are proven by the verifier, costed by
// the simulator (intranode phases at link level 0) and run by the emulator.
//
// For inter-node algorithms built on a tree (binomial, binary-tree, chain,
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
// Barrier is a one-element allreduce with the same-named algorithm.
// Allgather gathers every block up the combined tree and broadcasts the whole
// vector down; reduce_scatter reduces the whole vector up and scatters each
// rank its block down. Both need a tree algorithm (binomial, binary-tree).
//
// Groups are contiguous rank ranges led by their lowest rank, so every
// composition keeps rank order for non-commutative operators.

#include <memory>
#include <string>

#include "internode/registry.hpp"
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
// for exploiting multi-lane communication") of an allreduce over the nodes of
// `plan`, which must all hold the same number k of ranks: (1) a node
// reduce-scatter by recursive halving (patterns::halving_reduce_scatter:
// log2 k exchanges of m/2, m/4, ... elements, adjacent rank ranges joined
// lower on the left, so non-commutative operators are served) leaves local
// rank i with its share of the vector reduced over the node; (2) k concurrent
// inter-node allreduces with `inter`, lane i among the ranks of local index i
// (a share depends on i alone, so every node's rank i holds the same one),
// each on its share; (3) recursive doubling inside each node gathers the
// shares back. For k not a power of two the halving folds k onto one first,
// and the folded ranks' lanes carry nothing. The hierarchy's groups and
// leaders are not used. Example: 2 nodes of 2 ranks, 10 elements: ranks 0
// and 1 swap halves, rank 0 keeping [0,5) and rank 1 [5,10), each reduced
// x0.x1; ranks 0 and 2 allreduce elements 0-4, ranks 1 and 3 elements 5-9;
// then 0 and 1 (and 2 and 3) swap their halves back.
// UsageError for unequal nodes or an `inter` that is not an allreduce.
SchedulePlan plan_lanes(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter, const Shape& shape);

// True when `inter` runs as one combined tree with the hierarchy (pipelined
// across levels), false when it runs as three phases.
bool runs_as_combined_tree(const AlgorithmInfo& inter);

}  // namespace copse
