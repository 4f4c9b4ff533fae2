// Flat tree rooted at rank 0: the root receives from every other rank in rank
// order, then sends to each. Linear in p, but the shallowest tree there is --
// the shape of Bjørndalen et al.'s scripted configurations in which group
// leaders send straight to the root.
#include "algorithms/builders/tree_helpers.hpp"

namespace copse::builders {

SchedulePlan flat_allreduce(const Shape& shape) {
  return [shape](int rank) { return reduce_then_bcast(trees::flat, shape, rank); };
}
SchedulePlan flat_reduce(const Shape& shape) {
  return [shape](int rank) { return reduce_to_root(trees::flat, 0, shape, rank); };
}
SchedulePlan flat_bcast(const Shape& shape) {
  return [shape](int rank) { return bcast_from_root(trees::flat, 0, shape, rank); };
}

}  // namespace copse::builders
