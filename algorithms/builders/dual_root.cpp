// Träff 2021, Algorithm 1: two post-order binary trees of ceil(p/2) and
// floor(p/2) ranks whose roots exchange, doubly pipelined. Each round is three
// bidirectional steps (child 0, child 1, parent or dual), so the beta term
// tends to 3*beta*m.
#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor.hpp"

namespace copse::builders {

SchedulePlan dual_root_allreduce(const Shape& shape) {
  const BlockPartition part(shape.count, shape.blocks);
  auto coroutines = [shape, part](int rank) {
    const auto pair = trees::dual_root(shape.ranks, rank);
    return patterns::doubly_pipelined_allreduce(rank, pair.node, pair.dual, part);
  };
  return CursorPlan{coroutines, dual_root_cursor(shape.ranks, part)};
}

}  // namespace copse::builders
