// One post-order binary tree (root p-1), pipelined: Träff 2021's
// User-Allreduce1, a pipelined reduce followed by a pipelined broadcast. Per
// block an interior rank receives twice going up and sends twice coming down,
// so the beta term tends to 4*beta*m (Träff 2021 §1.2).
#include "algorithms/builders/tree_helpers.hpp"

namespace copse::builders {

SchedulePlan binary_tree_allreduce(const Shape& shape) {
  return [shape](int rank) { return reduce_then_bcast(trees::post_order_binary, shape, rank); };
}
SchedulePlan binary_tree_reduce(const Shape& shape) {
  return [shape](int rank) { return reduce_to_root(trees::post_order_binary, shape.ranks - 1, shape, rank); };
}
SchedulePlan binary_tree_bcast(const Shape& shape) {
  return [shape](int rank) { return bcast_from_root(trees::post_order_binary, shape.ranks - 1, shape, rank); };
}

}  // namespace copse::builders
