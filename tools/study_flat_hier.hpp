#pragma once
// Flat versus hierarchical allreduce (`copse study flat-hier`,
// bench/study_flat_hier.cpp): int32 sums on clusters of equal nodes, at each
// size, every form (tools/experiment.hpp's HierarchyForm: flat, one node
// leader, multi-leader, lanes) at its best block count under the model. The
// clusters of at most `emulate_up_to` ranks run on the emulator (verified,
// virtual time checked equal to the simulator's), the larger ones on the
// simulator alone.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cost_model.hpp"
#include "common/progress.hpp"
#include "tools/experiment.hpp"
#include "tools/study_support.hpp"

namespace copse {

// The study's forms, in the order of its tables.
std::vector<HierarchyForm> default_flat_hier_forms();
// A form written SHAPE:ALGORITHM[:GROUP] (flat:ring, leader:rabenseifner:4,
// leader:rabenseifner -- one group per node --, multi-leader:dual-root:4,
// lanes:ring); its name, the inverse. UsageError for a malformed one or an
// algorithm that cannot take the form.
HierarchyForm parse_flat_hier_form(std::string_view text);
std::string flat_hier_form_name(const HierarchyForm& form);

struct FlatHierStudyOptions {
  std::vector<std::pair<int, int>> clusters = {{4, 8}, {16, 16}, {64, 32}};  // nodes x ranks per node
  std::vector<std::uint64_t> bytes = {std::uint64_t{1} << 20, 8};            // per rank
  std::vector<HierarchyForm> forms = default_flat_hier_forms();
  CostModel model = CostModel::cluster();
  int emulate_up_to = 32;  // ranks
};
struct FlatHierPoint {
  int nodes = 0, per_node = 0;
  std::uint64_t bytes = 0;
  std::size_t form = 0;  // into options.forms
  Picos time = 0;
  int blocks = 1;
  bool emulated = false, ok = true;
};
struct FlatHierStudy {
  FlatHierStudyOptions options;
  std::vector<FlatHierPoint> points;  // cluster by cluster, size by size, form by form
  bool ok() const;                    // every emulated point verified and equal to the simulator
};
// UsageError for no clusters, sizes or forms, an empty cluster, or a size
// not a whole number of int32.
FlatHierStudy run_flat_hier_study(const FlatHierStudyOptions& options, const ProgressCallback& progress = {});

// A table per cluster and size, with the best flat and hierarchical form, as text.
std::string flat_hier_tables(const FlatHierStudy& study);
// dir/flat_hier.dat (best flat and hierarchical per case), dir/flat_hier.gp
// and, with gnuplot, dir/flat_hier.svg.
StudyPlot write_flat_hier_plot(const std::filesystem::path& dir, const FlatHierStudy& study);

}  // namespace copse
