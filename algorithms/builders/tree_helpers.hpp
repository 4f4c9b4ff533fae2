#pragma once
// Glue shared by the tree-based algorithm files: reduce to any root over an
// order-preserving tree, broadcast from any root, and allreduce as reduce
// followed by broadcast.

#include <functional>

#include "algorithms/patterns.hpp"

namespace copse::builders {

using TreeOf = trees::Node (*)(int p, int rank);

// Reduce over `tree` to its own root `tree_root`, then forward the result to
// shape.root if that is another rank (relabelling would break rank order).
RankSchedule reduce_to_root(TreeOf tree, int tree_root, Shape shape, int rank);

// Broadcast over `tree` relabelled so that its root `tree_root` lands on shape.root.
RankSchedule bcast_from_root(TreeOf tree, int tree_root, Shape shape, int rank);

// Pipelined reduce to `tree_root`, then pipelined broadcast from it.
RankSchedule reduce_then_bcast(TreeOf tree, Shape shape, int rank);

}  // namespace copse::builders
