// The lane decomposition of every collective (plan/hierarchical.hpp,
// plan_lanes; Träff and Hunold 2020): the k ranks of a node split the work
// so that k inter-node collectives, one per local index (a lane), run side
// by side, each on a k-th of the data.
#include <algorithm>

#include "algorithms/patterns.hpp"
#include "common/error.hpp"
#include "plan/hierarchical.hpp"

namespace copse {

namespace {

struct Lanes {
  Collective collective = Collective::allreduce;  // barrier planned as a one-element allreduce
  int k = 1;                                      // ranks per node
  int nodes = 1;
  int root_node = 0, root_local = 0;                          // reduce and bcast
  std::uint64_t count = 0;                                    // elements each rank's schedule works on
  std::vector<int> first;                                     // node -> first rank
  std::vector<std::shared_ptr<const std::vector<int>>> node;  // node -> its ranks
  std::vector<std::shared_ptr<const std::vector<int>>> lane;  // local index -> its ranks, by node
  // Allreduce, reduce, bcast: local index -> its share of the vector and the
  // lane's collective on it (empty when the share or the lane is).
  std::vector<patterns::Share> share;
  std::vector<SchedulePlan> inter;
  // Allgather, reduce_scatter: every lane's collective among the nodes on
  // blocks of `count`, and the node's among its k ranks on their lanes'
  // q * count results (see patterns::Placement for where these lie).
  SchedulePlan lane_blocks, node_columns;
};

// Every share of the root's node moves to (`to_root`) or from its local rank
// `root`, one message each in local-rank order; from local rank 0 a reduce
// retraces the halvings instead (log2 k messages).
RankSchedule shares_with_root(std::shared_ptr<const Lanes> l, int i, bool to_root) {
  if (to_root && l->root_local == 0) {
    for (auto g = patterns::doubling_gather_to_zero(i, l->k, l->count); g.next();) co_yield g.value();
    co_return;
  }
  const auto transfer = [&](int peer, int j) {
    const patterns::Share& s = l->share[static_cast<std::size_t>(j)];
    return Transfer{peer, s.lo, s.hi - s.lo};
  };
  for (int j = 0; j < l->k; ++j) {
    if (l->share[static_cast<std::size_t>(j)].hi == l->share[static_cast<std::size_t>(j)].lo) continue;
    if (j == l->root_local || (i != l->root_local && i != j)) continue;
    Step s;
    const bool receives = (i == l->root_local) == to_root;
    (receives ? s.recv : s.send) = transfer(i == l->root_local ? j : l->root_local, j);
    co_yield s;
  }
}

// Allreduce, reduce, bcast (and barrier): the node splits the vector into
// the recursive-halving shares, lane i works on share i among the nodes.
RankSchedule shared_rank(std::shared_ptr<const Lanes> l, int node, int i) {
  const auto& ranks = l->node[static_cast<std::size_t>(node)];
  const bool reduces = l->collective != Collective::bcast;
  if (reduces)  // local rank i ends with its share reduced over the node, in rank order
    for (auto g = patterns::on_ranks(patterns::halving_reduce_scatter(i, l->k, l->count), ranks); g.next();)
      co_yield g.value();
  else if (node == l->root_node)  // the root hands each local rank its share
    for (auto g = patterns::on_ranks(shares_with_root(l, i, false), ranks); g.next();) co_yield g.value();
  if (const auto& inter = l->inter[static_cast<std::size_t>(i)])
    for (auto g = patterns::on_ranks(inter(node), l->lane[static_cast<std::size_t>(i)],
                                     l->share[static_cast<std::size_t>(i)].lo);
         g.next();)
      co_yield g.value();
  if (l->collective != Collective::reduce)  // every local rank gathers every share
    for (auto g = patterns::on_ranks(patterns::doubling_allgather(i, l->k, l->count), ranks); g.next();)
      co_yield g.value();
  else if (node == l->root_node)
    for (auto g = patterns::on_ranks(shares_with_root(l, i, true), ranks); g.next();) co_yield g.value();
}

// Allgather: lane i gathers the blocks of the ranks of local index i (one
// per node), then the node gathers its k lanes' results. Reduce_scatter: the
// reverse, the node reducing first so that its rank i holds, reduced over
// the node in rank order, the blocks lane i delivers; the lanes then reduce
// across the nodes in node order, which together is global rank order.
RankSchedule blocks_rank(std::shared_ptr<const Lanes> l, int node, int i) {
  const auto q = static_cast<std::uint64_t>(l->nodes), k = static_cast<std::uint64_t>(l->k);
  const patterns::Placement lane_place{static_cast<std::uint64_t>(i) * l->count, l->count, q, k};
  const patterns::Placement node_place{0, l->count, q, k};
  const bool gather = l->collective == Collective::allgather;
  if (!gather && l->node_columns)
    for (auto g = patterns::placed(l->node_columns(i), l->node[static_cast<std::size_t>(node)], node_place); g.next();)
      co_yield g.value();
  if (l->lane_blocks)
    for (auto g = patterns::placed(l->lane_blocks(node), l->lane[static_cast<std::size_t>(i)], lane_place); g.next();)
      co_yield g.value();
  if (gather && l->node_columns)
    for (auto g = patterns::placed(l->node_columns(i), l->node[static_cast<std::size_t>(node)], node_place); g.next();)
      co_yield g.value();
}

// Nodes, their ranks and lanes; UsageError unless every node holds k ranks.
std::shared_ptr<Lanes> lanes_of(const HierarchyPlan& plan) {
  auto l = std::make_shared<Lanes>();
  l->first = plan.first_rank;
  l->nodes = static_cast<int>(l->first.size());
  l->k = plan.ranks / std::max(l->nodes, 1);
  for (int n = 0; n < l->nodes; ++n) {
    const int next = n + 1 < l->nodes ? l->first[static_cast<std::size_t>(n + 1)] : plan.ranks;
    if (next - l->first[static_cast<std::size_t>(n)] != l->k)
      throw UsageError("lanes need the same number of ranks on every node (node " + std::to_string(n) + " has " +
                       std::to_string(next - l->first[static_cast<std::size_t>(n)]) + ", node 0 " +
                       std::to_string(l->k) + ")");
  }
  for (int n = 0; n < l->nodes; ++n) {
    std::vector<int> ranks(static_cast<std::size_t>(l->k));
    for (int i = 0; i < l->k; ++i) ranks[static_cast<std::size_t>(i)] = l->first[static_cast<std::size_t>(n)] + i;
    l->node.push_back(std::make_shared<const std::vector<int>>(std::move(ranks)));
  }
  for (int i = 0; i < l->k; ++i) {
    std::vector<int> ranks;
    for (int n = 0; n < l->nodes; ++n) ranks.push_back(l->first[static_cast<std::size_t>(n)] + i);
    l->lane.push_back(std::make_shared<const std::vector<int>>(std::move(ranks)));
  }
  return l;
}

}  // namespace

SchedulePlan plan_lanes(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter, const Shape& shape) {
  if (!plan || plan->ranks != shape.ranks)
    throw UsageError("the hierarchy plan has " + std::to_string(plan ? plan->ranks : 0) + " ranks, the shape " +
                     std::to_string(shape.ranks));
  check_form(inter, Form::lanes);
  validate_shape(inter, shape);
  auto l = lanes_of(*plan);
  const bool barrier = inter.collective == Collective::barrier;
  l->collective = barrier ? Collective::allreduce : inter.collective;
  l->count = barrier ? 1 : shape.count;
  const int blocks = barrier ? 1 : shape.blocks;
  if (l->collective == Collective::allgather || l->collective == Collective::reduce_scatter) {
    if (l->nodes > 1) l->lane_blocks = inter.plan(Shape{l->nodes, l->count, blocks, 0});
    if (l->k > 1) l->node_columns = inter.plan(Shape{l->k, l->count * static_cast<std::uint64_t>(l->nodes), blocks, 0});
    return [l, node_of = plan->node_of](int rank) {
      const int node = node_of[static_cast<std::size_t>(rank)];
      return blocks_rank(l, node, rank - l->first[static_cast<std::size_t>(node)]);
    };
  }
  l->root_node = plan->node_of[static_cast<std::size_t>(shape.root)];
  l->root_local = shape.root - l->first[static_cast<std::size_t>(l->root_node)];
  for (int i = 0; i < l->k; ++i) {
    l->share.push_back(patterns::halving_share(i, l->k, l->count));
    const std::uint64_t size = l->share.back().hi - l->share.back().lo;
    const bool rooted = l->collective == Collective::reduce || l->collective == Collective::bcast;
    l->inter.push_back(l->nodes > 1 && size > 0 ? inter.plan(Shape{l->nodes, size, blocks, rooted ? l->root_node : 0})
                                                : SchedulePlan{});
  }
  return [l, node_of = plan->node_of](int rank) {
    const int node = node_of[static_cast<std::size_t>(rank)];
    return shared_rank(l, node, rank - l->first[static_cast<std::size_t>(node)]);
  };
}

}  // namespace copse
