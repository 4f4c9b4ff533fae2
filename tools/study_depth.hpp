#pragma once
// Depth versus fan-out (`copse study depth`, bench/study_depth.cpp):
// allreduce (int32 sum) on nodes of equal size through the simulator, at each
// size, every form at its best block count:
//   flat trees over all ranks: binomial (fan-out and depth log p),
//     binary-tree (fan-out 2), chain (fan-out 1, depth p), dual-root,
//     flat (fan-out p-1, depth 1);
//   hierarchies: groups of K ranks inside a node (nested where K is below
//     the node's size: a deep narrow tree), the node leaders joined by a
//     binomial tree, and the same with every group leader off-node
//     (multi-leader);
//   lanes (Träff and Hunold 2020) with recursive doubling between nodes.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/cost_model.hpp"
#include "common/progress.hpp"
#include "tools/study_support.hpp"

namespace copse {

struct DepthForm {
  std::string name;       // as --forms names it: binomial, chain, groups-4, multi-leader-2, lanes, ...
  std::string algorithm;  // flat: the algorithm; otherwise the one between nodes
  int group = 0;          // 0: flat; K: groups of K; -1: lanes
  bool multi_leader = false;
  // "flat binomial", "groups of 2 (3 levels), binomial", "lanes, recursive-doubling"
  std::string label(int ranks_per_node) const;
  bool linear() const;  // grows linearly in p (chain, flat): stopped at DepthStudyOptions::linear_limit
};
// The study's forms, in the order of its tables.
std::vector<DepthForm> default_depth_forms();
// A form by its name: a flat allreduce's name, groups-K, multi-leader-K or
// lanes. UsageError naming the known ones otherwise.
DepthForm parse_depth_form(std::string_view name);

struct DepthStudyOptions {
  std::vector<int> nodes = {2, 8, 32, 128, 512};
  int ranks_per_node = 8;
  std::vector<std::uint64_t> bytes = {8, std::uint64_t{1} << 20};  // per rank
  std::vector<DepthForm> forms = default_depth_forms();
  CostModel model = CostModel::cluster();
  int linear_limit = 1024;  // ranks beyond which the linear forms are not run
};
struct DepthPoint {
  std::size_t form = 0;  // into options.forms
  int nodes = 0;
  std::uint64_t bytes = 0;
  int blocks = 1;
  Picos time = 0;
};
struct DepthStudy {
  DepthStudyOptions options;
  std::vector<DepthPoint> points;                                                  // only the points run
  const DepthPoint* find(std::size_t form, int nodes, std::uint64_t bytes) const;  // null: not run
};
// UsageError for no nodes, sizes or forms, a size not a whole number of
// int32, or a group the node's size cannot hold.
DepthStudy run_depth_study(const DepthStudyOptions& options, const ProgressCallback& progress = {});

// A table per size (us, * marks the fastest per p), as text.
std::string depth_tables(const DepthStudy& study);
// dir/depth.dat (a block per size), dir/depth.gp and, with gnuplot, dir/depth.svg.
StudyPlot write_depth_plot(const std::filesystem::path& dir, const DepthStudy& study);

}  // namespace copse
