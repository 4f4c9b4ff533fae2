// Binomial tree rooted at rank 0: reduce, broadcast, and allreduce as reduce
// then broadcast. With blocks > 1 the tree is pipelined; with one block the
// reduce takes ceil(log2 p)(alpha + beta m + gamma m) (Lowery–Langou Table III).
#include "algorithms/builders/tree_helpers.hpp"
#include "algorithms/step_cursor.hpp"

namespace copse::builders {

SchedulePlan binomial_allreduce(const Shape& shape) {
  auto coroutines = [shape](int rank) { return reduce_then_bcast(trees::binomial, shape, rank); };
  return CursorPlan{coroutines, binomial_allreduce_cursor(shape.ranks, BlockPartition(shape.count, shape.blocks))};
}
SchedulePlan binomial_reduce(const Shape& shape) {
  return [shape](int rank) { return reduce_to_root(trees::binomial, 0, shape, rank); };
}
SchedulePlan binomial_bcast(const Shape& shape) {
  return [shape](int rank) { return bcast_from_root(trees::binomial, 0, shape, rank); };
}

}  // namespace copse::builders
