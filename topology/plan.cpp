// The hierarchy planner (the rules are in plan.hpp).

#include "topology/plan.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

// ---------------------------------------------------------------- Grouping

namespace {

std::string accepted_groupings() { return "auto, " + join(Machine::level_names(), ", ") + ", size:K (K >= 1)"; }

}  // namespace

Grouping Grouping::parse(std::string_view text, int max_group) {
  if (max_group < 1) throw UsageError("the maximum group size must be at least 1, got " + std::to_string(max_group));
  Grouping grouping;
  grouping.max_group = max_group;
  if (text == "auto") return grouping;
  if (Machine::is_level_name(text)) {
    grouping.kind = Kind::level;
    grouping.level = std::string(text);
    return grouping;
  }
  constexpr std::string_view size_prefix = "size:";
  if (text.substr(0, size_prefix.size()) == size_prefix) {
    const std::string_view number = text.substr(size_prefix.size());
    int size = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), size);
    if (number.empty() || error != std::errc{} || end != number.data() + number.size() || size < 1)
      throw UsageError("grouping \"" + std::string(text) + "\": K in size:K must be a whole number >= 1");
    grouping.kind = Kind::size;
    grouping.size = size;
    return grouping;
  }
  throw UsageError("unknown grouping \"" + std::string(text) + "\" (accepted: " + accepted_groupings() + ")");
}

std::string Grouping::to_string() const {
  switch (kind) {
    case Kind::automatic: return "auto";
    case Kind::level: return level;
    case Kind::size: return "size:" + std::to_string(size);
  }
  return "auto";
}

// ---------------------------------------------------------------- planner

namespace {

// Consecutive global ranks [first, last] standing for one member of a level:
// a rank at level 0, the ranks under a leader above. The leader is `first`.
struct Span {
  int first = 0;
  int last = 0;
};

using SpanGroups = std::vector<std::vector<Span>>;

struct PlannedLevel {
  std::string name;
  SpanGroups groups;
};

struct NodeContext {
  int index = 0;
  const Machine* machine = nullptr;
  int first_rank = 0;
  std::vector<int> pu_of_local;  // rank on node -> PU

  int pu(int global_rank) const { return pu_of_local[static_cast<std::size_t>(global_rank - first_rank)]; }
  std::string where() const { return "node " + std::to_string(index) + " (" + machine->source() + ")"; }
};

bool merges_anything(const SpanGroups& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.size() > 1; });
}

std::size_t largest_rank_count(const SpanGroups& groups) {
  std::size_t largest = 0;
  for (const auto& g : groups)
    largest = std::max(largest, static_cast<std::size_t>(g.back().last - g.front().first + 1));
  return largest;
}

// The members of the next level: one span per group, led by its leader.
std::vector<Span> spans_of(const SpanGroups& groups) {
  std::vector<Span> spans;
  spans.reserve(groups.size());
  for (const auto& g : groups) spans.push_back({g.front().first, g.back().last});
  return spans;
}

SpanGroups chunks_of(const std::vector<Span>& spans, int size) {
  SpanGroups groups;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i % static_cast<std::size_t>(size) == 0) groups.emplace_back();
    groups.back().push_back(spans[i]);
  }
  return groups;
}

// The object of `level` that holds every rank of the span, or nullopt when
// they sit in different objects (the level is not coarser than the grouping
// that made the span). A rank outside every object of the level (possible on
// odd real machines) gets a key of its own, so it stands alone.
std::optional<long long> shared_container(const NodeContext& node, std::string_view level, Span span) {
  const int container = node.machine->container(level, node.pu(span.first));
  for (int rank = span.first + 1; rank <= span.last; ++rank)
    if (node.machine->container(level, node.pu(rank)) != container) return std::nullopt;
  if (container < 0) return -1LL - span.first;
  return container;
}

// Consecutive spans in one object of `level` form a group; nullopt if some
// span is not inside one object. An object whose ranks come back after
// another object's means the binding scattered it: its group would not be a
// contiguous range, and a reduction over it could not keep rank order.
std::optional<SpanGroups> group_by_level(const NodeContext& node, std::string_view level,
                                         const std::vector<Span>& spans) {
  SpanGroups groups;
  std::map<long long, int> first_rank_of_object;
  std::optional<long long> previous;
  for (const Span& span : spans) {
    const std::optional<long long> key = shared_container(node, level, span);
    if (!key) return std::nullopt;
    if (previous && *previous == *key) {
      groups.back().push_back(span);
      continue;
    }
    const auto [seen, inserted] = first_rank_of_object.emplace(*key, span.first);
    if (!inserted)
      throw UsageError(node.where() + ": the binding puts ranks " + std::to_string(seen->second) + " and " +
                       std::to_string(span.first) + " in " + std::string(level) + " L#" + std::to_string(*key) +
                       " but rank " + std::to_string(groups.back().front().first) +
                       ", between them, elsewhere; groups must be contiguous rank ranges so that reductions keep "
                       "rank order for non-commutative operators (bind ranks to PUs in ascending order)");
    groups.push_back({span});
    previous = key;
  }
  return groups;
}

// "auto": the finest of l2, l3 and numa that puts two of the node's ranks
// together; "" if its groups exceed max_group or no level does (the caller
// then groups by size:max_group).
std::string automatic_level(const NodeContext& node, const std::vector<Span>& ranks, int max_group) {
  for (const std::string& level : node.machine->levels_finest_first()) {
    if (level != "l2" && level != "l3" && level != "numa") continue;
    const std::optional<SpanGroups> groups = group_by_level(node, level, ranks);
    if (!groups || !merges_anything(*groups)) continue;
    return largest_rank_count(*groups) <= static_cast<std::size_t>(max_group) ? level : "";
  }
  return "";
}

std::vector<PlannedLevel> plan_node(const NodeContext& node, const Grouping& grouping, bool multi_leader) {
  std::vector<Span> current;
  for (std::size_t i = 0; i < node.pu_of_local.size(); ++i) {
    const int rank = node.first_rank + static_cast<int>(i);
    current.push_back({rank, rank});
  }
  if (current.size() == 1) return {{"node", {current}}};

  // This node's policy: a hwloc level, or (level empty) a group size.
  std::string level;
  int size = 0;
  switch (grouping.kind) {
    case Grouping::Kind::level:
      if (!node.machine->has_level(grouping.level))
        throw UsageError("grouping " + grouping.level + ": " + node.where() + " has no " + grouping.level +
                         " objects (it has " + join(node.machine->levels(), ", ") + ")");
      level = grouping.level;
      break;
    case Grouping::Kind::size: size = grouping.size; break;
    case Grouping::Kind::automatic:
      level = automatic_level(node, current, grouping.max_group);
      if (level.empty()) size = grouping.max_group;
      break;
  }
  const std::string size_name = "size:" + std::to_string(size);

  // A level-0 object spans single ranks, so grouping by it never fails to nest.
  PlannedLevel level0 = level.empty() ? PlannedLevel{size_name, chunks_of(current, size)}
                                      : PlannedLevel{level, *group_by_level(node, level, current)};
  if (multi_leader) return {std::move(level0)};

  std::vector<PlannedLevel> levels;
  const auto adopt = [&](PlannedLevel planned) {
    current = spans_of(planned.groups);
    levels.push_back(std::move(planned));
  };
  if (merges_anything(level0.groups)) adopt(std::move(level0));
  if (level.empty()) {
    while (size >= 2 && current.size() > 1) adopt({size_name, chunks_of(current, size)});
  } else {
    const std::vector<std::string> order = node.machine->levels_finest_first();
    for (auto coarser = std::find(order.begin(), order.end(), level) + 1; coarser != order.end(); ++coarser) {
      if (current.size() == 1) break;
      // One object for the whole machine is what the "node" level says.
      if (node.machine->objects(*coarser) < 2) continue;
      std::optional<SpanGroups> groups = group_by_level(node, *coarser, current);
      if (groups && merges_anything(*groups)) adopt({*coarser, std::move(*groups)});
    }
  }
  if (current.size() > 1) adopt({"node", {current}});
  return levels;
}

void validate(const Grouping& grouping) {
  if (grouping.kind == Grouping::Kind::level && !Machine::is_level_name(grouping.level))
    throw UsageError("unknown grouping level \"" + grouping.level + "\" (accepted: " + accepted_groupings() + ")");
  if (grouping.kind == Grouping::Kind::size && grouping.size < 1)
    throw UsageError("grouping size:" + std::to_string(grouping.size) + ": K must be at least 1");
  if (grouping.kind == Grouping::Kind::automatic && grouping.max_group < 1)
    throw UsageError("the maximum group size must be at least 1, got " + std::to_string(grouping.max_group));
}

std::vector<int> block_binding(int ranks, int pus) {
  std::vector<int> binding(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank)
    binding[static_cast<std::size_t>(rank)] = static_cast<int>(static_cast<long long>(rank) * pus / ranks);
  return binding;
}

}  // namespace

HierarchyPlan plan_hierarchy(const std::vector<NodeSpec>& nodes, const Grouping& grouping, bool multi_leader) {
  if (nodes.empty()) throw UsageError("a hierarchy plan needs at least one node");
  validate(grouping);
  long long total = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].ranks < 1)
      throw UsageError("node " + std::to_string(i) + " must hold at least 1 rank, got " +
                       std::to_string(nodes[i].ranks));
    total += nodes[i].ranks;
    if (total > INT_MAX) throw UsageError("too many ranks in total (more than " + std::to_string(INT_MAX) + ")");
  }

  HierarchyPlan plan;
  plan.ranks = static_cast<int>(total);
  plan.multi_leader = multi_leader;
  plan.grouping = grouping.to_string();
  int first_rank = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeSpec& spec = nodes[i];
    NodeContext node;
    node.index = static_cast<int>(i);
    node.machine = &spec.machine;
    node.first_rank = first_rank;
    if (spec.binding.empty()) {
      node.pu_of_local = block_binding(spec.ranks, spec.machine.pus());
    } else {
      if (spec.binding.size() != static_cast<std::size_t>(spec.ranks))
        throw UsageError(node.where() + ": the binding names " + std::to_string(spec.binding.size()) + " PUs for " +
                         std::to_string(spec.ranks) + " ranks");
      for (std::size_t r = 0; r < spec.binding.size(); ++r)
        if (spec.binding[r] < 0 || spec.binding[r] >= spec.machine.pus())
          throw UsageError(node.where() + ": rank " + std::to_string(r) + " on the node is bound to PU " +
                           std::to_string(spec.binding[r]) + ", but the machine has PUs 0-" +
                           std::to_string(spec.machine.pus() - 1));
      node.pu_of_local = spec.binding;
    }

    const std::vector<PlannedLevel> levels = plan_node(node, grouping, multi_leader);
    std::vector<std::vector<Group>> node_levels;
    std::vector<std::string> names;
    for (std::size_t l = 0; l < levels.size(); ++l) {
      std::vector<Group> groups;
      for (const auto& spans : levels[l].groups) {
        Group group;
        group.node = node.index;
        group.level = static_cast<int>(l);
        for (const Span& span : spans) group.members.push_back(span.first);
        groups.push_back(std::move(group));
      }
      node_levels.push_back(std::move(groups));
      names.push_back(levels[l].name);
    }
    if (multi_leader) {
      for (const Group& group : node_levels.front()) plan.offnode.push_back(group.leader());
    } else {
      plan.offnode.push_back(first_rank);
    }
    plan.levels.push_back(std::move(node_levels));
    plan.level_names.push_back(join(names, ","));
    plan.first_rank.push_back(first_rank);
    plan.machine.push_back(spec.machine.source());
    for (int pu : node.pu_of_local) {
      plan.node_of.push_back(node.index);
      plan.pu_of.push_back(pu);
    }
    first_rank += spec.ranks;
  }
  return plan;
}

// ---------------------------------------------------------------- describe

namespace {

std::string rank_range(int first, int last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int rank : ranks) out += (out.empty() ? "" : ",") + std::to_string(rank);
  return out;
}

int node_rank_count(const HierarchyPlan& plan, std::size_t node) {
  const int end = node + 1 < plan.first_rank.size() ? plan.first_rank[node + 1] : plan.ranks;
  return end - plan.first_rank[node];
}

std::vector<std::string> split_names(const std::string& joined) {
  std::vector<std::string> names;
  std::stringstream stream(joined);
  for (std::string name; std::getline(stream, name, ',');) names.push_back(name);
  return names;
}

}  // namespace

std::string HierarchyPlan::describe() const {
  std::ostringstream out;
  out << "plan: " << ranks << (ranks == 1 ? " rank" : " ranks") << " on " << levels.size()
      << (levels.size() == 1 ? " node" : " nodes") << ", grouping " << grouping << ", "
      << (multi_leader ? "multi-leader (every level-0 leader talks off-node)"
                       : "single leader (each node's leader talks off-node)")
      << "\n";
  for (std::size_t node = 0; node < levels.size(); ++node) {
    const int first = first_rank[node];
    const int count = node_rank_count(*this, node);
    out << "node " << node << ": " << (count == 1 ? "rank " : "ranks ") << rank_range(first, first + count - 1)
        << " on " << machine[node] << "\n";
    const std::vector<std::string> names = split_names(level_names[node]);
    for (std::size_t l = 0; l < levels[node].size(); ++l) {
      out << "  level " << l << " (" << (l < names.size() ? names[l] : "?") << "):";
      const char* separator = " ";
      for (const Group& group : levels[node][l]) {
        // Level 0 members are a rank range; above, list the leaders merged.
        out << separator;
        if (l == 0)
          out << '[' << rank_range(group.members.front(), group.members.back()) << ']';
        else
          out << '{' << rank_list(group.members) << '}';
        out << " leader " << group.leader();
        separator = ", ";
      }
      out << "\n";
    }
  }
  out << "off-node ranks (" << offnode.size() << "): " << rank_list(offnode) << "\n";
  return out.str();
}

namespace {

// Text inside a double-quoted Graphviz string.
std::string dot_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

constexpr const char* kLevelColours[] = {"blue", "darkgreen", "darkorange", "purple", "brown", "deeppink"};

const char* level_colour(std::size_t level) {
  return kLevelColours[level % (sizeof kLevelColours / sizeof kLevelColours[0])];
}

}  // namespace

std::string HierarchyPlan::dot() const {
  std::ostringstream out;
  std::vector<bool> talks_offnode(static_cast<std::size_t>(ranks), false);
  for (int rank : offnode) talks_offnode[static_cast<std::size_t>(rank)] = true;

  out << "digraph copse_plan {\n"
      << "  graph [rankdir=BT, fontname=\"Helvetica\", labelloc=t, label=\"copse plan: " << ranks << " ranks, grouping "
      << dot_escape(grouping) << (multi_leader ? ", multi-leader" : ", single leader")
      << "\\nedges: member -> group leader; gold: talks off-node\"];\n"
      << "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [arrowsize=0.6];\n";
  for (std::size_t node = 0; node < levels.size(); ++node) {
    const std::vector<std::string> names = split_names(level_names[node]);
    std::string legend;
    for (std::size_t l = 0; l < names.size(); ++l)
      legend += "\\nlevel " + std::to_string(l) + " " + dot_escape(names[l]) + ": " + level_colour(l);
    out << "  subgraph cluster_node" << node << " {\n"
        << "    label=\"node " << node << ": " << dot_escape(machine[node]) << legend << "\";\n"
        << "    style=rounded; color=gray;\n";
    const int first = first_rank[node];
    for (int rank = first; rank < first + node_rank_count(*this, node); ++rank) {
      out << "    r" << rank << " [label=\"rank " << rank << "\\nPU " << pu_of[static_cast<std::size_t>(rank)] << "\"";
      if (talks_offnode[static_cast<std::size_t>(rank)]) out << ", style=\"rounded,filled,bold\", fillcolor=gold";
      out << "];\n";
    }
    for (std::size_t l = 0; l < levels[node].size(); ++l)
      for (const Group& group : levels[node][l])
        for (int member : group.members)
          if (member != group.leader())
            out << "    r" << member << " -> r" << group.leader() << " [color=" << level_colour(l) << "];\n";
    out << "  }\n";
  }
  out << "  internode [label=\"inter-node layer\\n(" << offnode.size() << (offnode.size() == 1 ? " rank" : " ranks")
      << ")\", shape=ellipse, style=dashed, color=red];\n"
      << "  subgraph inter_node {\n"
      << "    edge [style=dashed, color=red, dir=none];\n";
  for (int rank : offnode) out << "    r" << rank << " -> internode;\n";
  out << "  }\n}\n";
  return out.str();
}

}  // namespace copse
