// Allgather, reduce_scatter and barrier.
//
// Over a tree (binomial, post-order binary): allgather gathers every block up
// the tree to its root, then broadcasts the whole vector down, pipelined in
// blocks; reduce_scatter reduces the whole vector to the root, pipelined, then
// scatters each rank its block. Trees are order-preserving, so every subtree's
// blocks are one contiguous range and non-commutative operators stay right.
// Around a ring: the classic p-1 step allgather, and a reduce_scatter whose
// chunks accumulate cyclically (commutative operators only).
// A barrier is an allreduce of one element: when it ends, every rank has
// heard (transitively) from every rank.
#include "algorithms/block_layout.hpp"
#include "algorithms/builders/tree_helpers.hpp"

namespace copse::builders {

SchedulePlan binomial_allreduce(const Shape&);
SchedulePlan dual_root_allreduce(const Shape&);
SchedulePlan recursive_doubling_allreduce(const Shape&);

namespace {

std::vector<trees::Node> children_of(TreeOf tree, int p, const trees::Node& node) {
  std::vector<trees::Node> kids;
  for (int c : node.children) kids.push_back(tree(p, c));
  return kids;
}

RankSchedule tree_allgather(TreeOf tree, Shape shape, int rank) {
  const auto node = tree(shape.ranks, rank);
  for (auto g = patterns::tree_gather(rank, node, children_of(tree, shape.ranks, node), shape.count); g.next();)
    co_yield g.value();
  const BlockPartition whole(shape.count * static_cast<std::uint64_t>(shape.ranks), shape.blocks);
  for (auto g = patterns::tree_bcast(rank, node, whole); g.next();) co_yield g.value();
}

RankSchedule tree_reduce_scatter(TreeOf tree, Shape shape, int rank) {
  const auto node = tree(shape.ranks, rank);
  const BlockPartition whole(shape.count * static_cast<std::uint64_t>(shape.ranks), shape.blocks);
  for (auto g = patterns::tree_reduce(rank, node, whole); g.next();) co_yield g.value();
  for (auto g = patterns::tree_scatter(rank, node, children_of(tree, shape.ranks, node), shape.count); g.next();)
    co_yield g.value();
}

// Around the ring, rank r's block b sits at b * count. In allgather step s a
// rank forwards the block it got in step s-1 (its own first); in
// reduce_scatter step s it passes on the partial block r-s-1, so after p-1
// steps it holds its own block r, accumulated over all ranks. Unequal
// blocks (allgatherv, reduce_scatter with counts: Shape::counts) travel the
// same way at their own sizes; a step moving only empty blocks is left out.
RankSchedule ring_rank(Shape shape, int rank, bool reduce) {
  const long p = shape.ranks;
  const BlockLayout layout(shape);
  if (p == 1 || layout.total() == 0) co_return;
  const int right = static_cast<int>((rank + 1) % p), left = static_cast<int>((rank + p - 1) % p);
  auto block = [&](int peer, long b) {
    const auto k = static_cast<int>(((b % p) + p) % p);
    return layout.range(peer, k, k + 1);
  };
  for (long s = 0; s < p - 1; ++s) {
    Step step;
    step.send = block(right, reduce ? rank - s - 1 : rank - s);
    step.recv = block(left, reduce ? rank - s - 2 : rank - s - 1);
    step.combine = reduce ? Combine::left : Combine::replace;
    if (!step.empty()) co_yield step;
  }
}

SchedulePlan as_barrier(SchedulePlan (*allreduce)(const Shape&), Shape shape) {
  shape.count = 1;
  shape.blocks = 1;
  return allreduce(shape);
}

}  // namespace

SchedulePlan binomial_allgather(const Shape& shape) {
  return [shape](int rank) { return tree_allgather(trees::binomial, shape, rank); };
}
SchedulePlan binary_tree_allgather(const Shape& shape) {
  return [shape](int rank) { return tree_allgather(trees::post_order_binary, shape, rank); };
}
SchedulePlan ring_allgather(const Shape& shape) {
  return [shape](int rank) { return ring_rank(shape, rank, false); };
}
SchedulePlan binomial_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return tree_reduce_scatter(trees::binomial, shape, rank); };
}
SchedulePlan binary_tree_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return tree_reduce_scatter(trees::post_order_binary, shape, rank); };
}
SchedulePlan ring_reduce_scatter(const Shape& shape) {
  return [shape](int rank) { return ring_rank(shape, rank, true); };
}
SchedulePlan binomial_barrier(const Shape& shape) { return as_barrier(binomial_allreduce, shape); }
SchedulePlan dual_root_barrier(const Shape& shape) { return as_barrier(dual_root_allreduce, shape); }
SchedulePlan recursive_doubling_barrier(const Shape& shape) { return as_barrier(recursive_doubling_allreduce, shape); }

}  // namespace copse::builders
