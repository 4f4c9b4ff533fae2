#include "node/hierarchical.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "internode/patterns.hpp"

namespace copse {

namespace {

trees::Node post_order(int p, int rank) { return trees::post_order_binary(p, rank); }
trees::Node dual_root_tree(int p, int rank) { return trees::dual_root(p, rank).node; }

// The trees the tree-based algorithm files build on, and how they use them.
enum class TreeUse { reduce_then_bcast, doubly_pipelined };
struct TreeAlgorithm {
  std::string_view name;
  HierarchicalTree::TreeOf tree;
  bool dual_roots;
  TreeUse use;
};
constexpr TreeAlgorithm kTreeAlgorithms[] = {
    {"binomial", trees::binomial, false, TreeUse::reduce_then_bcast},
    {"flat", trees::flat, false, TreeUse::reduce_then_bcast},
    {"binary-tree", post_order, false, TreeUse::reduce_then_bcast},
    {"chain", trees::chain, false, TreeUse::doubly_pipelined},  // allreduce; reduce/bcast use it plainly
    {"dual-root", dual_root_tree, true, TreeUse::doubly_pipelined},
};

const TreeAlgorithm* tree_algorithm(const AlgorithmInfo& inter) {
  for (const auto& t : kTreeAlgorithms)
    if (t.name == inter.name) return &t;
  return nullptr;
}

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

// Renames a schedule planned for participants 0..q-1 to global ranks.
RankSchedule on_ranks(RankSchedule inner, std::shared_ptr<const std::vector<int>> global) {
  while (inner.next()) {
    Step s = inner.value();
    if (s.send) s.send.peer = (*global)[static_cast<std::size_t>(s.send.peer)];
    if (s.recv) s.recv.peer = (*global)[static_cast<std::size_t>(s.recv.peer)];
    co_yield s;
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
    for (auto g = on_ranks(up(index), group->members); g.next();) co_yield g.value();
    if (top_of_single_node) break;
  }
  if (ph->inter)
    if (auto it = std::find(ph->offnode->begin(), ph->offnode->end(), rank); it != ph->offnode->end())
      for (auto g = on_ranks(ph->inter(static_cast<int>(it - ph->offnode->begin())), ph->offnode); g.next();)
        co_yield g.value();
  for (auto level = mine.rbegin(); level != mine.rend(); ++level) {
    const auto& [index, group] = *level;
    if (group->allreduce) continue;  // already holds the result
    for (auto g = on_ranks(group->bcast(index), group->members); g.next();) co_yield g.value();
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

std::shared_ptr<const Phased> plan_phased(const HierarchyPlan& plan, const AlgorithmInfo& inter, const Shape& shape) {
  auto ph = std::make_shared<Phased>();
  ph->groups_of.resize(static_cast<std::size_t>(plan.ranks));
  ph->offnode = std::make_shared<const std::vector<int>>(plan.offnode);
  const bool single_node = plan.offnode.size() == 1;
  const auto& rabenseifner_reduce = find_algorithm(Collective::reduce, "rabenseifner");
  const auto& rabenseifner_allreduce = find_algorithm(Collective::allreduce, "rabenseifner");
  const auto& binomial_bcast = find_algorithm(Collective::bcast, "binomial");
  for (const auto& node_levels : plan.levels)
    for (std::size_t l = 0; l < node_levels.size(); ++l)
      for (const auto& group : node_levels[l]) {
        auto phase = std::make_shared<GroupPhase>();
        phase->members = std::make_shared<const std::vector<int>>(group.members);
        const Shape local{static_cast<int>(group.members.size()), shape.count, shape.blocks, 0};
        phase->reduce = rabenseifner_reduce.plan(local);
        phase->bcast = binomial_bcast.plan(local);
        if (single_node && l + 1 == node_levels.size()) phase->allreduce = rabenseifner_allreduce.plan(local);
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
    case Collective::barrier:  // plan_hierarchical turns a barrier into a one-element allreduce
      break;
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

// Lanes (plan_lanes): a schedule over `global` ranks on elements [base, ...).
RankSchedule on_slice(RankSchedule inner, std::shared_ptr<const std::vector<int>> global, std::uint64_t base) {
  for (auto g = on_ranks(std::move(inner), std::move(global)); g.next();) {
    Step s = g.value();
    s.send.offset += base;
    s.recv.offset += base;
    s.copy.from += base;
    s.copy.to += base;
    co_yield s;
  }
}

struct Lanes {
  int k = 1;                                                  // ranks per node
  std::vector<int> first;                                     // node -> first rank
  std::vector<std::shared_ptr<const std::vector<int>>> node;  // node -> its ranks
  std::vector<std::shared_ptr<const std::vector<int>>> lane;  // local index -> its ranks, by node
  std::vector<SchedulePlan> inter;                            // local index -> allreduce of its share
  std::vector<patterns::Share> share;                         // local index -> its share of the vector
  std::uint64_t count = 0;
};

RankSchedule lanes_rank(std::shared_ptr<const Lanes> l, int node, int i) {
  const auto& ranks = l->node[static_cast<std::size_t>(node)];
  // (1) Recursive halving inside the node: local rank i ends with its share reduced over the node.
  for (auto g = on_ranks(patterns::halving_reduce_scatter(i, l->k, l->count), ranks); g.next();) co_yield g.value();
  // (2) The lane's inter-node allreduce on that share.
  if (const auto& inter = l->inter[static_cast<std::size_t>(i)])
    for (auto g = on_slice(inter(node), l->lane[static_cast<std::size_t>(i)], l->share[static_cast<std::size_t>(i)].lo);
         g.next();)
      co_yield g.value();
  // (3) Recursive doubling inside the node gathers the shares back.
  for (auto g = on_ranks(patterns::doubling_allgather(i, l->k, l->count), ranks); g.next();) co_yield g.value();
}

}  // namespace

SchedulePlan plan_lanes(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter, const Shape& shape) {
  if (!plan || plan->ranks != shape.ranks)
    throw UsageError("the hierarchy plan has " + std::to_string(plan ? plan->ranks : 0) + " ranks, the shape " +
                     std::to_string(shape.ranks));
  if (inter.collective != Collective::allreduce)
    throw UsageError("lanes decompose an allreduce, not a " + std::string(to_string(inter.collective)));
  auto l = std::make_shared<Lanes>();
  l->first = plan->first_rank;
  const int nodes = static_cast<int>(l->first.size());
  l->k = plan->ranks / std::max(nodes, 1);
  for (int n = 0; n < nodes; ++n) {
    const int next = n + 1 < nodes ? l->first[static_cast<std::size_t>(n + 1)] : plan->ranks;
    if (next - l->first[static_cast<std::size_t>(n)] != l->k)
      throw UsageError("lanes need the same number of ranks on every node");
  }
  l->count = shape.count;
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> ranks(static_cast<std::size_t>(l->k));
    for (int i = 0; i < l->k; ++i) ranks[static_cast<std::size_t>(i)] = l->first[static_cast<std::size_t>(n)] + i;
    l->node.push_back(std::make_shared<const std::vector<int>>(std::move(ranks)));
  }
  for (int i = 0; i < l->k; ++i) {
    std::vector<int> ranks;
    for (int n = 0; n < nodes; ++n) ranks.push_back(l->first[static_cast<std::size_t>(n)] + i);
    l->lane.push_back(std::make_shared<const std::vector<int>>(std::move(ranks)));
    l->share.push_back(patterns::halving_share(i, l->k, shape.count));
    const std::uint64_t size = l->share.back().hi - l->share.back().lo;
    l->inter.push_back(nodes > 1 && size > 0 ? inter.plan(Shape{nodes, size, shape.blocks, 0}) : SchedulePlan{});
  }
  return [l, node_of = plan->node_of](int rank) {
    const int node = node_of[static_cast<std::size_t>(rank)];
    return lanes_rank(l, node, rank - l->first[static_cast<std::size_t>(node)]);
  };
}

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

bool runs_as_combined_tree(const AlgorithmInfo& inter) { return tree_algorithm(inter) != nullptr; }

SchedulePlan plan_hierarchical(std::shared_ptr<const HierarchyPlan> plan, const AlgorithmInfo& inter,
                               const Shape& shape, bool pipeline_across_levels) {
  if (!plan || plan->ranks != shape.ranks)
    throw UsageError("the hierarchy plan has " + std::to_string(plan ? plan->ranks : 0) + " ranks, the shape " +
                     std::to_string(shape.ranks));
  if (inter.collective == Collective::barrier) {  // a one-element allreduce with the same-named algorithm
    Shape one = shape;
    one.count = 1;
    one.blocks = 1;
    return plan_hierarchical(plan, find_algorithm(Collective::allreduce, inter.name), one, pipeline_across_levels);
  }
  // A team on one node under one leader has no inter-node phase to overlap
  // with, so its allreduce always runs phased, where every rank reduces its
  // share of the vector.
  const bool single_node = plan->offnode.size() == 1;
  const TreeAlgorithm* t = tree_algorithm(inter);
  if (t && ((pipeline_across_levels && !single_node) || inter.collective != Collective::allreduce)) {
    auto tree = std::make_shared<const HierarchicalTree>(plan, t->tree, t->dual_roots);
    const TreeUse use = inter.collective == Collective::allreduce ? t->use : TreeUse::reduce_then_bcast;
    return [tree, use, collective = inter.collective, shape](int rank) {
      return combined_tree_rank(tree, use, collective, shape, rank);
    };
  }
  if (inter.collective != Collective::allreduce)
    throw UsageError("hierarchical " + std::string(to_string(inter.collective)) + " needs a tree algorithm, not '" +
                     std::string(inter.name) + "'");
  (void)intranode_tree(*plan);  // validates the plan's leaders against its off-node ranks
  auto phased = plan_phased(*plan, inter, shape);
  return [phased](int rank) { return phased_allreduce(phased, rank); };
}

}  // namespace copse
