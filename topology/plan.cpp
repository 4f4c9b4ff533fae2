// A node's hardware through hwloc, and the hierarchy planner (the rules are in
// plan.hpp).

#include "topology/plan.hpp"

#include <hwloc.h>

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

namespace copse {
namespace {

// ---------------------------------------------------------------- hwloc

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

TopologyHandle new_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    throw std::runtime_error(std::string("hwloc: cannot create a topology: ") + std::strerror(errno));
  return TopologyHandle(raw);
}

// hwloc's object type for each of Machine::level_names(), in the same order.
constexpr hwloc_obj_type_t kLevelTypes[] = {HWLOC_OBJ_CORE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_NUMANODE,
                                            HWLOC_OBJ_PACKAGE};

// The first NUMA node among `memory_child` and its siblings, looking through
// memory-side caches, which hwloc places between an object and its NUMA node.
hwloc_obj_t first_numa_node(hwloc_obj_t memory_child) {
  for (hwloc_obj_t m = memory_child; m != nullptr; m = m->next_sibling) {
    if (m->type == HWLOC_OBJ_NUMANODE) return m;
    if (hwloc_obj_t below = first_numa_node(m->memory_first_child)) return below;
  }
  return nullptr;
}

// In hwloc 2 NUMA nodes are not ancestors of PUs but memory children of some
// ancestor (the package, a group, the machine...). The nearest ancestor that
// has memory attached holds the PU's local NUMA node; when it holds several
// (DRAM and HBM, say), the first is the ordinary one.
hwloc_obj_t local_numa_node(hwloc_obj_t pu) {
  for (hwloc_obj_t o = pu; o != nullptr; o = o->parent)
    if (o->memory_arity > 0)
      if (hwloc_obj_t node = first_numa_node(o->memory_first_child)) return node;
  return nullptr;
}

hwloc_obj_t container_object(hwloc_topology_t topology, hwloc_obj_type_t type, hwloc_obj_t pu) {
  if (type == HWLOC_OBJ_NUMANODE) return local_numa_node(pu);
  return hwloc_get_ancestor_obj_by_type(topology, type, pu);
}

std::string byte_size_text(hwloc_uint64_t bytes) {
  constexpr hwloc_uint64_t kib = 1024, mib = 1024 * 1024;
  if (bytes >= mib && bytes % mib == 0) return std::to_string(bytes / mib) + "MiB";
  if (bytes >= kib && bytes % kib == 0) return std::to_string(bytes / kib) + "KiB";
  return std::to_string(bytes) + "B";
}

std::string object_label(hwloc_obj_t object) {
  char type[64];
  hwloc_obj_type_snprintf(type, sizeof type, object, 0);
  std::string label = type;
  if (object->type == HWLOC_OBJ_MACHINE) return label;
  label += " L#" + std::to_string(object->logical_index);
  // The OS index matters for binding, but only say it when it differs.
  if ((object->type == HWLOC_OBJ_PU || object->type == HWLOC_OBJ_NUMANODE) && object->os_index != object->logical_index)
    label += " (P#" + std::to_string(object->os_index) + ")";
  if (hwloc_obj_type_is_cache(object->type) && object->attr != nullptr && object->attr->cache.size > 0)
    label += " (" + byte_size_text(object->attr->cache.size) + ")";
  return label;
}

bool is_bare_pu(hwloc_obj_t object) {
  return object->type == HWLOC_OBJ_PU && object->arity == 0 && object->memory_arity == 0;
}

// One object per line, indented by depth. As lstopo does, an object with a
// single child and no memory shares its line with that child ("L2 L#0 + Core
// L#0 + PU L#0"), and a core's hardware threads share the core's line, so a
// 64-PU machine stays near 64 lines.
void describe_object(hwloc_obj_t object, int depth, std::string& out) {
  std::string line = object_label(object);
  while (object->arity == 1 && object->memory_arity == 0) {
    object = object->first_child;
    line += " + " + object_label(object);
  }
  bool children_are_bare_pus = object->arity > 1;
  for (hwloc_obj_t child = object->first_child; child != nullptr; child = child->next_sibling)
    children_are_bare_pus = children_are_bare_pus && is_bare_pu(child);
  if (children_are_bare_pus) {
    const char* separator = ": ";
    for (hwloc_obj_t child = object->first_child; child != nullptr; child = child->next_sibling) {
      line += separator + object_label(child);
      separator = ", ";
    }
  }
  out += std::string(2 * static_cast<std::size_t>(depth), ' ') + line + "\n";
  for (hwloc_obj_t memory = object->memory_first_child; memory != nullptr; memory = memory->next_sibling)
    describe_object(memory, depth + 1, out);
  if (children_are_bare_pus) return;
  for (hwloc_obj_t child = object->first_child; child != nullptr; child = child->next_sibling)
    describe_object(child, depth + 1, out);
}

// What a Machine keeps of a loaded topology; the topology itself is freed, so
// a Machine is a plain value that copies cheaply and outlives hwloc.
struct TopologyFacts {
  std::string tree;
  std::size_t pu_count = 0;
  std::vector<std::vector<int>> containers;  // as Machine::container_
};

TopologyFacts read_topology(hwloc_topology_t topology) {
  TopologyFacts facts;
  const int pu_count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  if (pu_count <= 0) throw std::runtime_error("hwloc: the topology has no PUs");
  facts.pu_count = static_cast<std::size_t>(pu_count);
  for (hwloc_obj_type_t type : kLevelTypes) {
    std::vector<int> containers;
    if (hwloc_get_nbobjs_by_type(topology, type) != 0) {
      containers.resize(facts.pu_count);
      for (int pu = 0; pu < pu_count; ++pu) {
        hwloc_obj_t pu_object = hwloc_get_obj_by_type(topology, HWLOC_OBJ_PU, static_cast<unsigned>(pu));
        hwloc_obj_t container = container_object(topology, type, pu_object);
        containers[static_cast<std::size_t>(pu)] = container ? static_cast<int>(container->logical_index) : -1;
      }
    }
    facts.containers.push_back(std::move(containers));
  }
  describe_object(hwloc_get_root_obj(topology), 0, facts.tree);
  return facts;
}

int level_index(std::string_view level) {
  const auto& names = Machine::level_names();
  const auto found = std::find(names.begin(), names.end(), level);
  return found == names.end() ? -1 : static_cast<int>(found - names.begin());
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

// The machine's levels, in the fixed order of level_names().
std::vector<std::string> present_levels(const Machine& machine) {
  std::vector<std::string> present;
  for (const auto& name : Machine::level_names())
    if (machine.has_level(name)) present.push_back(name);
  return present;
}

// The machine's levels from finest to coarsest. The fixed order of
// level_names() is not enough: a synthetic topology without a numa level has
// one NUMA node for the whole machine, coarser than its packages, while on
// other machines NUMA nodes sit under the package. More objects = finer;
// ties keep the fixed order.
std::vector<std::string> levels_finest_first(const Machine& machine) {
  std::vector<std::string> present = present_levels(machine);
  std::stable_sort(present.begin(), present.end(),
                   [&](const std::string& a, const std::string& b) { return machine.objects(a) > machine.objects(b); });
  return present;
}

// hwloc's synthetic backend slows down sharply with wide levels (a flat
// "pu:16384" takes minutes to load), so a description is refused before
// loading if the product of its counts exceeds this. Attributes in
// parentheses are skipped; a count the scan cannot read is left to hwloc.
constexpr long long kMaxSyntheticPus = 4096;

long long synthetic_pu_estimate(const std::string& text) {
  std::string outside_parentheses;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (depth == 0) outside_parentheses += c;
    if (c == ')' && depth > 0) --depth;
  }
  long long product = 1;
  std::istringstream tokens(outside_parentheses);
  for (std::string token; tokens >> token;) {
    const std::size_t colon = token.find(':');
    if (colon == std::string::npos) continue;
    long long count = 0;
    const char* begin = token.data() + colon + 1;
    const auto [end, error] = std::from_chars(begin, token.data() + token.size(), count);
    if (error == std::errc::result_out_of_range) return kMaxSyntheticPus + 1;
    if (error != std::errc{} || end == begin || count < 1) continue;
    product = std::min(product * std::min(count, kMaxSyntheticPus + 1), kMaxSyntheticPus + 1);
  }
  return product;
}

}  // namespace

// ---------------------------------------------------------------- Machine

const std::vector<std::string>& Machine::level_names() {
  static const std::vector<std::string> names{"core", "l2", "l3", "numa", "package"};
  return names;
}

Machine Machine::detect() {
  TopologyHandle topology = new_topology();
  if (hwloc_topology_load(topology.get()) != 0)
    throw std::runtime_error(std::string("hwloc: cannot read this machine's topology: ") + std::strerror(errno));
  TopologyFacts facts = read_topology(topology.get());
  Machine machine;
  machine.source_ = "this machine (hwloc)";
  machine.tree_ = std::move(facts.tree);
  machine.pu_count_ = facts.pu_count;
  machine.container_ = std::move(facts.containers);
  return machine;
}

Machine Machine::synthetic(std::string_view desc) {
  const std::string text(desc);
  const auto invalid = [&] {
    return UsageError("invalid synthetic topology \"" + text +
                      "\": expected hwloc's synthetic syntax, object counts from the top down ending with PUs, "
                      "e.g. \"package:2 l3:1 core:4 pu:1\" or \"numa:2 core:2 pu:2\"");
  };
  // hwloc reads an empty string as an error too, but says nothing about why.
  if (text.find_first_not_of(" \t\n") == std::string::npos) throw invalid();
  if (synthetic_pu_estimate(text) > kMaxSyntheticPus)
    throw UsageError("synthetic topology \"" + text + "\" has more than " + std::to_string(kMaxSyntheticPus) +
                     " PUs, more than copse plans for one node");
  TopologyHandle topology = new_topology();
  if (hwloc_topology_set_synthetic(topology.get(), text.c_str()) != 0) throw invalid();
  if (hwloc_topology_load(topology.get()) != 0)
    throw UsageError("synthetic topology \"" + text + "\": hwloc cannot build it: " + std::strerror(errno));
  TopologyFacts facts = read_topology(topology.get());
  Machine machine;
  machine.source_ = text;
  machine.tree_ = std::move(facts.tree);
  machine.pu_count_ = facts.pu_count;
  machine.container_ = std::move(facts.containers);
  return machine;
}

bool Machine::has_level(std::string_view level) const {
  const int index = level_index(level);
  return index >= 0 && static_cast<std::size_t>(index) < container_.size() &&
         !container_[static_cast<std::size_t>(index)].empty();
}

int Machine::container(std::string_view level, int pu) const {
  if (pu < 0 || static_cast<std::size_t>(pu) >= pu_count_)
    throw std::out_of_range("Machine::container: PU " + std::to_string(pu) + " of " + std::to_string(pu_count_));
  if (!has_level(level)) return -1;
  return container_[static_cast<std::size_t>(level_index(level))][static_cast<std::size_t>(pu)];
}

int Machine::objects(std::string_view level) const {
  if (!has_level(level)) return 0;
  std::vector<int> seen = container_[static_cast<std::size_t>(level_index(level))];
  seen.erase(std::remove(seen.begin(), seen.end(), -1), seen.end());
  std::sort(seen.begin(), seen.end());
  return static_cast<int>(std::unique(seen.begin(), seen.end()) - seen.begin());
}

std::string Machine::describe() const { return tree_; }

// ---------------------------------------------------------------- Grouping

namespace {

std::string accepted_groupings() { return "auto, " + join(Machine::level_names(), ", ") + ", size:K (K >= 1)"; }

}  // namespace

Grouping Grouping::parse(std::string_view text, int max_group) {
  if (max_group < 1) throw UsageError("the maximum group size must be at least 1, got " + std::to_string(max_group));
  Grouping grouping;
  grouping.max_group = max_group;
  if (text == "auto") return grouping;
  if (level_index(text) >= 0) {
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
    case Kind::automatic:
      return "auto";
    case Kind::level:
      return level;
    case Kind::size:
      return "size:" + std::to_string(size);
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
  for (const std::string& level : levels_finest_first(*node.machine)) {
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
                         " objects (it has " + join(present_levels(*node.machine), ", ") + ")");
      level = grouping.level;
      break;
    case Grouping::Kind::size:
      size = grouping.size;
      break;
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
    const std::vector<std::string> order = levels_finest_first(*node.machine);
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
  if (grouping.kind == Grouping::Kind::level && level_index(grouping.level) < 0)
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
        if (l == 0) out << '[' << rank_range(group.members.front(), group.members.back()) << ']';
        else out << '{' << rank_list(group.members) << '}';
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
