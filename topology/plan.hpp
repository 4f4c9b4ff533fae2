#pragma once
// The hierarchy planned over nodes' hardware (topology/machine.hpp).
//
// The planner turns nodes, their topologies and the ranks' bindings into
// levels of groups with leaders. Ranks are numbered node by node; on a node,
// rank i is bound to a PU by block distribution (rank i of n on PU
// floor(i * pus / n)) unless a binding is given. Every group is a contiguous
// range of ranks and its leader is the group's lowest rank, so a hierarchical
// reduction can keep rank order for non-commutative operators. (A binding that
// would make a group non-contiguous is refused with a UsageError.)
//
// Level 0 holds the finest groups; the leaders of level l form the groups of
// level l+1; the last level on a node is one group whose leader is the node
// leader. With multi-leader (Bjørndalen et al.'s fastest 8-way scheme) only
// level 0 is formed and every level-0 leader talks off-node directly.
//
// At level 0 a group's members are consecutive ranks. At level l > 0 they are
// consecutive leaders of level l-1, so the ranks a group stands for still
// form one contiguous range (members {0, 4} at level 1 stand for ranks 0-7).
//
// How levels are chosen (see plan_hierarchy for the details):
//   - hwloc level ("core", "l2", "l3", "numa", "package"): level 0 groups the
//     ranks whose PUs share an object of that level; upper levels group the
//     leaders by the next coarser level that merges groups, and finally the
//     whole node ("node").
//   - "size:K": K consecutive ranks, then K consecutive leaders, and so on
//     until one group is left (size:1 leaves nothing to merge: one "node"
//     group of all ranks).
//   - "auto": among l2, l3 and numa, finest first, the first level that puts
//     at least two of the node's ranks together (a private per-core L2 shares
//     nothing; cores are never a shared-cache level). If its groups hold at
//     most max_group ranks it is level 0, as for the hwloc-level policy;
//     otherwise, or if no such level exists, the node falls back to
//     size:max_group. The choice is per node (nodes may differ).
// Without multi-leader, a level where every group has one member adds
// nothing and is omitted; a hwloc level whose objects cover the whole machine
// is the "node" level. A node with a single rank gets one level holding one
// group, that rank, named "node" (it still talks off-node). With
// multi-leader, level 0 is kept even when its groups are single ranks (then
// every rank talks off-node).

#include <string>
#include <string_view>
#include <vector>

#include "topology/machine.hpp"

namespace copse {

struct Grouping {
  enum class Kind { automatic, level, size } kind = Kind::automatic;
  std::string level;  // kind == level: one of Machine::level_names()
  int size = 0;       // kind == size
  int max_group = 4;  // automatic: the deepest (finest) shared-cache or NUMA level
                      // whose groups hold at most this many ranks
  static Grouping parse(std::string_view text, int max_group = 4);  // "auto", "l3", "size:4"; UsageError
  std::string to_string() const;
};

struct NodeSpec {
  Machine machine;
  int ranks = 1;
  std::vector<int> binding;  // rank on node -> PU; empty: block distribution
};

struct Group {
  int node = 0;
  int level = 0;
  std::vector<int> members;  // global ranks, ascending, contiguous (level > 0: consecutive leaders of the level below)
  int leader() const { return members.front(); }
};

struct HierarchyPlan {
  int ranks = 0;
  bool multi_leader = false;
  std::string grouping;                                 // Grouping::to_string() of the policy used
  std::vector<int> node_of;                             // global rank -> node
  std::vector<int> first_rank;                          // node -> its first global rank
  std::vector<std::vector<std::vector<Group>>> levels;  // [node][level][group]
  std::vector<std::string> level_names;                 // [node] names of its levels, e.g. "l3,package,node"
  std::vector<int> offnode;                             // ranks that talk off-node, ascending
  std::vector<std::string> machine;                     // [node] Machine::source() of its topology
  std::vector<int> pu_of;                               // global rank -> the PU it is bound to on its node

  std::string describe() const;  // which rank is in which group, who leads, who talks off-node
  std::string dot() const;       // Graphviz
};

// Levels are ordered per machine from finest to coarsest by how many objects
// each has (ties: core, l2, l3, numa, package); an upper level is used only if
// every group below lies inside one of its objects and it merges some groups.
// UsageError for: no nodes, a node with no ranks, a binding of the wrong
// length or naming a PU the machine lacks, a grouping level the machine lacks,
// or a binding that would make a group non-contiguous.
HierarchyPlan plan_hierarchy(const std::vector<NodeSpec>& nodes, const Grouping& grouping, bool multi_leader);

}  // namespace copse
