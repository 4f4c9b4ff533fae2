// A node's hardware through hwloc (the rules are in machine.hpp).

#include "topology/machine.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <sstream>
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
    throw SystemError(std::string("hwloc: cannot create a topology: ") + std::strerror(errno));
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
  std::vector<int> os_index;                 // as Machine::os_index_
};

TopologyFacts read_topology(hwloc_topology_t topology) {
  TopologyFacts facts;
  const int pu_count = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  if (pu_count <= 0) throw SystemError("hwloc: the topology has no PUs");
  facts.pu_count = static_cast<std::size_t>(pu_count);
  for (int pu = 0; pu < pu_count; ++pu)
    facts.os_index.push_back(
        static_cast<int>(hwloc_get_obj_by_type(topology, HWLOC_OBJ_PU, static_cast<unsigned>(pu))->os_index));
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
    throw SystemError(std::string("hwloc: cannot read this machine's topology: ") + std::strerror(errno));
  TopologyFacts facts = read_topology(topology.get());
  Machine machine;
  machine.source_ = "this machine (hwloc)";
  machine.tree_ = std::move(facts.tree);
  machine.pu_count_ = facts.pu_count;
  machine.container_ = std::move(facts.containers);
  machine.os_index_ = std::move(facts.os_index);
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
  machine.os_index_ = std::move(facts.os_index);
  return machine;
}

bool Machine::has_level(std::string_view level) const {
  const int index = level_index(level);
  return index >= 0 && static_cast<std::size_t>(index) < container_.size() &&
         !container_[static_cast<std::size_t>(index)].empty();
}

int Machine::container(std::string_view level, int pu) const {
  if (pu < 0 || static_cast<std::size_t>(pu) >= pu_count_)
    throw UsageError("Machine::container: PU " + std::to_string(pu) + " of " + std::to_string(pu_count_));
  if (!has_level(level)) return -1;
  return container_[static_cast<std::size_t>(level_index(level))][static_cast<std::size_t>(pu)];
}

int Machine::os_index(int pu) const {
  if (pu < 0 || static_cast<std::size_t>(pu) >= pu_count_)
    throw UsageError("Machine::os_index: PU " + std::to_string(pu) + " of " + std::to_string(pu_count_));
  return os_index_[static_cast<std::size_t>(pu)];
}

int Machine::objects(std::string_view level) const {
  if (!has_level(level)) return 0;
  std::vector<int> seen = container_[static_cast<std::size_t>(level_index(level))];
  seen.erase(std::remove(seen.begin(), seen.end(), -1), seen.end());
  std::sort(seen.begin(), seen.end());
  return static_cast<int>(std::unique(seen.begin(), seen.end()) - seen.begin());
}

std::string Machine::describe() const { return tree_; }

bool Machine::is_level_name(std::string_view level) { return level_index(level) >= 0; }

std::vector<std::string> Machine::levels() const {
  std::vector<std::string> present;
  for (const auto& name : level_names())
    if (has_level(name)) present.push_back(name);
  return present;
}

std::vector<std::string> Machine::levels_finest_first() const {
  std::vector<std::string> present = levels();
  std::stable_sort(present.begin(), present.end(),
                   [&](const std::string& a, const std::string& b) { return objects(a) > objects(b); });
  return present;
}

}  // namespace copse
