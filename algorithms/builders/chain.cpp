// A chain 0 - 1 - ... - p-1 rooted at p-1. The allreduce is Träff's doubly
// pipelined scheme on the chain: partial blocks flow up while result blocks
// flow back down, both at once. Reduce and broadcast are the plain pipelines,
// (p+q-2)(alpha + beta s + gamma s) for the reduce (Lowery–Langou Table III).
#include "algorithms/builders/tree_helpers.hpp"

namespace copse::builders {

SchedulePlan chain_allreduce(const Shape& shape) {
  return [shape](int rank) {
    return patterns::doubly_pipelined_allreduce(rank, trees::chain(shape.ranks, rank), -1,
                                                BlockPartition(shape.count, shape.blocks));
  };
}
SchedulePlan chain_reduce(const Shape& shape) {
  return [shape](int rank) { return reduce_to_root(trees::chain, shape.ranks - 1, shape, rank); };
}
SchedulePlan chain_bcast(const Shape& shape) {
  return [shape](int rank) { return bcast_from_root(trees::chain, shape.ranks - 1, shape, rank); };
}

}  // namespace copse::builders
