#pragma once
// One node's hardware, read through hwloc: the real machine, or a synthetic
// description in hwloc's syntax. A Machine keeps only the facts the planner
// needs (which object of each level holds each PU, and a printable tree), so
// it is a plain value that copies cheaply and outlives hwloc.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace copse {

// One node's hardware: the real machine (hwloc) or hwloc's synthetic syntax.
class Machine {
 public:
  static Machine detect();                          // this machine, via hwloc
  static Machine synthetic(std::string_view desc);  // e.g. "package:2 l3:1 core:4 pu:1"; UsageError if invalid
                                                    // or over 4096 PUs (hwloc loads wide levels slowly)

  int pus() const { return static_cast<int>(pu_count_); }
  // The levels the planner knows, finest first: core, l2, l3, numa, package.
  static const std::vector<std::string>& level_names();
  static bool is_level_name(std::string_view level);
  bool has_level(std::string_view level) const;
  // The levels this machine has, in level_names() order; and the same from
  // finest to coarsest by object count (a synthetic topology without a numa
  // level has one NUMA node for the whole machine, coarser than its packages,
  // while elsewhere NUMA nodes sit under the package; ties keep the order).
  std::vector<std::string> levels() const;
  std::vector<std::string> levels_finest_first() const;
  // Logical index of the object at `level` that contains `pu` (a PU's logical
  // index); -1 if no such level. For numa, hwloc 2 hangs NUMA nodes off the
  // tree as memory children: a PU's NUMA node is the first one attached to its
  // nearest ancestor that has any.
  int container(std::string_view level, int pu) const;
  // The operating system's number of `pu` (a logical index), as CPU affinity
  // masks name it (a synthetic topology: as hwloc numbers them, in logical
  // order unless the description gives indexes).
  int os_index(int pu) const;
  // Number of objects at `level` that contain PUs; 0 if the level is absent.
  int objects(std::string_view level) const;
  std::string source() const { return source_; }  // "this machine (hwloc)" or the synthetic text
  std::string describe() const;                   // indented tree, one object per line

 private:
  std::string source_;
  std::string tree_;
  std::size_t pu_count_ = 0;
  // container_[level index in level_names()][pu]; empty vector: level absent.
  std::vector<std::vector<int>> container_;
  std::vector<int> os_index_;  // per PU (logical index)
};

}  // namespace copse
