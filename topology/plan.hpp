#pragma once
// A node's hardware and the hierarchy planned over it.
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

#include <string>
#include <string_view>
#include <vector>

namespace copse {

// One node's hardware: the real machine (hwloc) or hwloc's synthetic syntax.
class Machine {
 public:
  static Machine detect();                          // this machine, via hwloc
  static Machine synthetic(std::string_view desc);  // e.g. "package:2 l3:1 core:4 pu:1"; UsageError if invalid

  int pus() const { return static_cast<int>(pu_count_); }
  // The levels the planner knows, finest first: core, l2, l3, numa, package.
  static const std::vector<std::string>& level_names();
  bool has_level(std::string_view level) const;
  // Index of the object at `level` that contains `pu`; -1 if no such level.
  int container(std::string_view level, int pu) const;
  std::string source() const { return source_; }  // "this machine (hwloc)" or the synthetic text
  std::string describe() const;                    // indented tree, one object per line

 private:
  std::string source_;
  std::string tree_;
  std::size_t pu_count_ = 0;
  // container_[level index in level_names()][pu]; empty vector: level absent.
  std::vector<std::vector<int>> container_;
};

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
  std::vector<int> members;  // global ranks, ascending, contiguous
  int leader() const { return members.front(); }
};

struct HierarchyPlan {
  int ranks = 0;
  bool multi_leader = false;
  std::string grouping;                            // Grouping::to_string() of the policy used
  std::vector<int> node_of;                        // global rank -> node
  std::vector<int> first_rank;                     // node -> its first global rank
  std::vector<std::vector<std::vector<Group>>> levels;  // [node][level][group]
  std::vector<std::string> level_names;            // [node] names of its levels, e.g. "l3,package"
  std::vector<int> offnode;                        // ranks that talk off-node, ascending

  std::string describe() const;  // which rank is in which group, who leads, who talks off-node
  std::string dot() const;       // Graphviz
};

HierarchyPlan plan_hierarchy(const std::vector<NodeSpec>& nodes, const Grouping& grouping, bool multi_leader);

}  // namespace copse
