#include "plan/hierarchical.hpp"

#include <algorithm>

#include "algorithms/patterns.hpp"
#include "common/error.hpp"

namespace copse {

namespace {

// The intranode part alone: leaders of the top intranode level are roots.
struct IntranodeTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
  std::vector<int> offnode_index;  // -1 for ranks that stay on their node
};

IntranodeTree intranode_tree(const HierarchyPlan& plan) {
  const auto p = static_cast<std::size_t>(plan.ranks);
  IntranodeTree t{std::vector<int>(p, -1), std::vector<std::vector<int>>(p), std::vector<int>(p, -1)};
  for (const auto& node_levels : plan.levels)
    for (const auto& level : node_levels)
      for (const auto& group : level)
        for (int m : group.members) {
          if (m == group.leader()) continue;
          t.parent[static_cast<std::size_t>(m)] = group.leader();
          t.children[static_cast<std::size_t>(group.leader())].push_back(m);  // levels ascend: nearest first
        }
  for (std::size_t i = 0; i < plan.offnode.size(); ++i)
    t.offnode_index[static_cast<std::size_t>(plan.offnode[i])] = static_cast<int>(i);
  for (std::size_t r = 0; r < p; ++r)
    if ((t.parent[r] < 0) != (t.offnode_index[r] >= 0))
      throw UsageError("hierarchy plan: rank " + std::to_string(r) +
                       (t.parent[r] < 0 ? " has no leader but does not talk off-node"
                                        : " talks off-node but also has an intranode leader"));
  return t;
}

void fill_depths(std::vector<trees::Node>& nodes) {
  std::vector<int> chain;
  std::vector<bool> done(nodes.size(), false);
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    chain.clear();
    int at = static_cast<int>(r);
    while (at >= 0 && !done[static_cast<std::size_t>(at)]) {
      chain.push_back(at);
      at = nodes[static_cast<std::size_t>(at)].parent;
    }
    int depth = at >= 0 ? nodes[static_cast<std::size_t>(at)].depth : -1;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      nodes[static_cast<std::size_t>(*it)].depth = ++depth;
      done[static_cast<std::size_t>(*it)] = true;
    }
  }
}

// One intranode group as the phased path runs it: its members (global ranks,
// ascending, leader first) and the group-local schedules.
struct GroupPhase {
  std::shared_ptr<const std::vector<int>> members;
  SchedulePlan reduce;     // to the leader, every member reducing its own share (Rabenseifner)
  SchedulePlan bcast;      // from the leader (binomial, pipelined)
  SchedulePlan allreduce;  // the top group of a single-node team: Rabenseifner allreduce
};

struct Phased {
  std::vector<std::vector<std::pair<int, std::shared_ptr<const GroupPhase>>>>
      groups_of;  // rank -> (its index, group), levels ascending
  std::shared_ptr<const std::vector<int>> offnode;
  SchedulePlan inter;  // over the off-node ranks, numbered 0..q-1; empty when q == 1
};

RankSchedule phased_allreduce(std::shared_ptr<const Phased> ph, int rank) {
  const auto& mine = ph->groups_of[static_cast<std::size_t>(rank)];
  for (const auto& [index, group] : mine) {
    const bool top_of_single_node = static_cast<bool>(group->allreduce);
    const SchedulePlan& up = top_of_single_node ? group->allreduce : group->reduce;
    for (auto g = patterns::on_ranks(up(index), group->members); g.next();) co_yield g.value();
    if (top_of_single_node) break;
  }
  if (ph->inter)
    if (auto it = std::find(ph->offnode->begin(), ph->offnode->end(), rank); it != ph->offnode->end())
      for (auto g = patterns::on_ranks(ph->inter(static_cast<int>(it - ph->offnode->begin())), ph->offnode); g.next();)
        co_yield g.value();
  for (auto level = mine.rbegin(); level != mine.rend(); ++level) {
    const auto& [index, group] = *level;
    if (group->allreduce) continue;  // already holds the result
    for (auto g = patterns::on_ranks(group->bcast(index), group->members); g.next();) co_yield g.value();
  }
}

// The hints for the inter-node phase among the off-node ranks, when there
// are predictions: the same model, and each off-node rank's predicted
// arrival at that phase -- the latest prediction among its node's ranks,
// since the node's groups reduce to it first (conservative for a
// multi-leader node, whose leaders each wait only for their own groups).
// Proficz's ordering then sorts nodes.
std::shared_ptr<const PlanHints> offnode_hints(const HierarchyPlan& plan,
                                               const std::shared_ptr<const PlanHints>& hints) {
  if (!hints || hints->arrival.empty()) return nullptr;  // as before predictions: the builders' defaults
  if (hints->arrival.size() != static_cast<std::size_t>(plan.ranks))
    throw UsageError("predicted arrivals: " + std::to_string(hints->arrival.size()) + " given for " +
                     std::to_string(plan.ranks) + " ranks");
  auto out = std::make_shared<PlanHints>(*hints);
  out->arrival.clear();
  for (int o : plan.offnode) {
    std::int64_t latest = hints->arrival[static_cast<std::size_t>(o)];
    for (int r = 0; r < plan.ranks; ++r)
      if (plan.node_of[static_cast<std::size_t>(r)] == plan.node_of[static_cast<std::size_t>(o)])
        latest = std::max(latest, hints->arrival[static_cast<std::size_t>(r)]);
    out->arrival.push_back(latest);
  }
  return out;
}

// A group's schedules, over its members 0..g-1 with the leader 0: every
// member reduces its own share (recursive halving, then the shares gathered
// to the leader, or to every member for the top group of a single node), and
// a pipelined binomial broadcast from the leader.
RankSchedule group_reduce_rank(Shape local, bool to_everyone, int rank) {
  for (auto g = patterns::halving_reduce_scatter(rank, local.ranks, local.count); g.next();) co_yield g.value();
  auto gather = to_everyone ? patterns::doubling_allgather(rank, local.ranks, local.count)
                            : patterns::doubling_gather_to_zero(rank, local.ranks, local.count);
  while (gather.next()) co_yield gather.value();
}
SchedulePlan group_reduce(Shape local, bool to_everyone) {
  return [local, to_everyone](int rank) { return group_reduce_rank(local, to_everyone, rank); };
}
SchedulePlan group_bcast(Shape local) {
  return [local](int rank) {
    return patterns::tree_bcast(rank, trees::binomial(local.ranks, rank), BlockPartition(local.count, local.blocks));
  };
}

std::shared_ptr<const Phased> plan_phased(const HierarchyPlan& plan, const AlgorithmInfo& inter, const Shape& shape) {
  auto ph = std::make_shared<Phased>();
  ph->groups_of.resize(static_cast<std::size_t>(plan.ranks));
  ph->offnode = std::make_shared<const std::vector<int>>(plan.offnode);
  const bool single_node = plan.offnode.size() == 1;
  for (const auto& node_levels : plan.levels)
    for (std::size_t l = 0; l < node_levels.size(); ++l)
      for (const auto& group : node_levels[l]) {
        auto phase = std::make_shared<GroupPhase>();
        phase->members = std::make_shared<const std::vector<int>>(group.members);
        const Shape local{static_cast<int>(group.members.size()), shape.count, shape.blocks, 0};
        phase->reduce = group_reduce(local, false);
        phase->bcast = group_bcast(local);
        if (single_node && l + 1 == node_levels.size()) phase->allreduce = group_reduce(local, true);
        for (std::size_t i = 0; i < group.members.size(); ++i)
          ph->groups_of[static_cast<std::size_t>(group.members[i])].emplace_back(static_cast<int>(i), phase);
      }
  if (!single_node)
    ph->inter = inter.plan(
        Shape{static_cast<int>(plan.offnode.size()), shape.count, shape.blocks, 0, offnode_hints(plan, shape.hints)});
  return ph;
}

std::vector<trees::Node> children_of(const HierarchicalTree& tree, const trees::Node& node) {
  std::vector<trees::Node> kids;
  for (int c : node.children) kids.push_back(tree.node(c));
  return kids;
}

RankSchedule combined_tree_rank(std::shared_ptr<const HierarchicalTree> tree, TreeUse use, Collective collective,
                                Shape shape, int rank) {
  const BlockPartition part(shape.count, shape.blocks);
  const BlockPartition whole(vector_elements(collective, shape), shape.blocks);
  const trees::Node node = tree->node(rank);
  switch (collective) {
    case Collective::barrier:  // plan_hierarchical plans a barrier as a one-element allreduce
    case Collective::scatter:  // the data-movement collectives take the flat form only (check_form)
    case Collective::gather:
    case Collective::alltoall: break;
    case Collective::allgather:
      for (auto g = patterns::tree_gather(rank, node, children_of(*tree, node), shape.count); g.next();)
        co_yield g.value();
      for (auto g = patterns::tree_bcast(rank, node, whole); g.next();) co_yield g.value();
      break;
    case Collective::reduce_scatter:
      for (auto g = patterns::tree_reduce(rank, node, whole); g.next();) co_yield g.value();
      for (auto g = patterns::tree_scatter(rank, node, children_of(*tree, node), shape.count); g.next();)
        co_yield g.value();
      break;
    case Collective::allreduce:
      if (use == TreeUse::doubly_pipelined) {
        for (auto g = patterns::doubly_pipelined_allreduce(rank, node, tree->dual(rank), part); g.next();)
          co_yield g.value();
      } else {
        for (auto g = patterns::tree_reduce(rank, node, part); g.next();) co_yield g.value();
        for (auto g = patterns::tree_bcast(rank, node, part); g.next();) co_yield g.value();
      }
      break;
    case Collective::reduce:
      for (auto g = patterns::tree_reduce(rank, node, part); g.next();) co_yield g.value();
      for (auto g = patterns::forward(rank, tree->root(), shape.root, part); g.next();) co_yield g.value();
      break;
    case Collective::bcast:
      for (auto g = patterns::forward(rank, shape.root, tree->root(), part); g.next();) co_yield g.value();
      for (auto g = patterns::tree_bcast(rank, node, part); g.next();) co_yield g.value();
      break;
  }
}

}  // namespace

HierarchicalTree::HierarchicalTree(std::shared_ptr<const HierarchyPlan> plan, TreeOf inter_tree, bool dual_roots)
    : plan_(std::move(plan)) {
  const IntranodeTree intra = intranode_tree(*plan_);
  const auto p = static_cast<std::size_t>(plan_->ranks);
  const int q = static_cast<int>(plan_->offnode.size());
  nodes_.resize(p);
  dual_.assign(p, -1);
  for (std::size_t r = 0; r < p; ++r) {
    nodes_[r].parent = intra.parent[r];
    nodes_[r].children = intra.children[r];
    const int i = intra.offnode_index[r];
    if (i < 0) continue;
    const auto global = [&](int j) { return j < 0 ? j : plan_->offnode[static_cast<std::size_t>(j)]; };
    const trees::Node t = inter_tree(q, i);
    nodes_[r].parent = global(t.parent);
    for (int c : t.children) nodes_[r].children.push_back(global(c));
    if (dual_roots) dual_[r] = global(trees::dual_root(q, i).dual);
  }
  fill_depths(nodes_);
  for (std::size_t r = 0; r < p; ++r)  // the root's rank: planned once, asked by every rank
    if (nodes_[r].parent < 0) {
      root_ = static_cast<int>(r);
      break;
    }
  // Subtree ranges, children before parents: deepest ranks first.
  std::vector<int> order(p);
  for (std::size_t r = 0; r < p; ++r) order[r] = static_cast<int>(r);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return nodes_[static_cast<std::size_t>(a)].depth > nodes_[static_cast<std::size_t>(b)].depth;
  });
  for (int r : order) {
    auto& n = nodes_[static_cast<std::size_t>(r)];
    n.lo = n.hi = r;
    for (int c : n.children) {
      n.lo = std::min(n.lo, nodes_[static_cast<std::size_t>(c)].lo);
      n.hi = std::max(n.hi, nodes_[static_cast<std::size_t>(c)].hi);
    }
  }
}

trees::Node HierarchicalTree::node(int rank) const { return nodes_.at(static_cast<std::size_t>(rank)); }
int HierarchicalTree::dual(int rank) const { return dual_.at(static_cast<std::size_t>(rank)); }

bool runs_as_combined_tree(const AlgorithmInfo& inter) { return static_cast<bool>(inter.tree); }

SchedulePlan plan_hierarchical(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter,
                               const Shape& shape, bool pipeline_across_levels) {
  if (!plan || plan->ranks != shape.ranks)
    throw UsageError("the hierarchy plan has " + std::to_string(plan ? plan->ranks : 0) + " ranks, the shape " +
                     std::to_string(shape.ranks));
  check_form(inter, plan->multi_leader ? Form::multi_leader : Form::leader);
  // A barrier is a one-element allreduce over the barrier's own tree and builder.
  const Collective collective = inter.collective == Collective::barrier ? Collective::allreduce : inter.collective;
  Shape planned = shape;
  if (inter.collective == Collective::barrier) planned.count = planned.blocks = 1;
  // A team on one node under one leader has no inter-node phase to overlap
  // with, so its allreduce always runs phased, where every rank reduces its
  // share of the vector.
  const bool single_node = plan->offnode.size() == 1;
  if (inter.tree && ((pipeline_across_levels && !single_node) || collective != Collective::allreduce)) {
    auto tree = std::make_shared<const HierarchicalTree>(plan, inter.tree.of, inter.tree.dual_roots);
    const TreeUse use = collective == Collective::allreduce ? inter.tree.use : TreeUse::reduce_then_bcast;
    return
        [tree, use, collective, planned](int rank) { return combined_tree_rank(tree, use, collective, planned, rank); };
  }
  (void)intranode_tree(*plan);  // validates the plan's leaders against its off-node ranks
  auto phased = plan_phased(*plan, inter, planned);
  return [phased](int rank) { return phased_allreduce(phased, rank); };
}

}  // namespace copse
