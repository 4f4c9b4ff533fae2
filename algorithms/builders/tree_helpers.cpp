#include "algorithms/builders/tree_helpers.hpp"

namespace copse::builders {

RankSchedule reduce_to_root(TreeOf tree, int tree_root, Shape shape, int rank) {
  const BlockPartition part(shape.count, shape.blocks);
  for (auto g = patterns::tree_reduce(rank, tree(shape.ranks, rank), part); g.next();) co_yield g.value();
  for (auto g = patterns::forward(rank, tree_root, shape.root, part); g.next();) co_yield g.value();
}

RankSchedule bcast_from_root(TreeOf tree, int tree_root, Shape shape, int rank) {
  const int p = shape.ranks;
  const int shift = ((shape.root - tree_root) % p + p) % p;
  const int virtual_rank = ((rank - shift) % p + p) % p;
  const auto node = patterns::relabel(tree(p, virtual_rank), shift, p);
  for (auto g = patterns::tree_bcast(rank, node, BlockPartition(shape.count, shape.blocks)); g.next();)
    co_yield g.value();
}

RankSchedule reduce_then_bcast(TreeOf tree, Shape shape, int rank) {
  const BlockPartition part(shape.count, shape.blocks);
  const auto node = tree(shape.ranks, rank);
  for (auto g = patterns::tree_reduce(rank, node, part); g.next();) co_yield g.value();
  for (auto g = patterns::tree_bcast(rank, node, part); g.next();) co_yield g.value();
}

}  // namespace copse::builders
