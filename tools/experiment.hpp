#pragma once
// One emulated run, from a description of the cluster to a checked answer:
// the cluster is laid out (flat, or planned into a hierarchy over each node's
// machine), the algorithm's schedule is built for it, the block count is
// autotuned under the cost model unless one is requested, the schedule runs
// on the emulator, and its virtual time is checked against the simulator's.
// `copse emulate` and `copse demo` are this plus printing; studies and the
// C++ API call it directly.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/cost_model.hpp"
#include "common/reduce_op.hpp"
#include "emulator/emulator.hpp"
#include "plan/planner.hpp"
#include "plan/selection.hpp"
#include "topology/plan.hpp"

namespace copse {

// ---- Arrival patterns (Proficz 2018, §5.1's benchmark modes) -------------------
//
// Per-rank start offsets in virtual time: rank r's clock starts at offsets[r],
// as if it had computed until then, so studies of imbalanced arrival are
// deterministic. Written as
//   none                  every rank at 0
//   one-late:DELAY        rank 1 arrives DELAY after the others (the paper's "one-late")
//   rand-late:MAX[:SEED]  every rank at a uniform time in [0, MAX] ("rand-late"),
//                         the same for the same seed (default 1) on every machine
//   file:PATH             one TIME per line, rank 0 first ('#' starts a comment)
struct ArrivalPattern {
  std::string text = "none";   // as written
  std::vector<Picos> offsets;  // one per rank; empty for none
  bool none() const { return offsets.empty(); }
};
// UsageError for a malformed pattern, one naming PATH:LINE for a bad file.
ArrivalPattern parse_arrival(const std::string& text, int ranks);

// How wrong the arrival predictions an arrival-aware schedule is planned
// from are (studying bad predictions). Written as
//   0                     exact: the predictions are the pattern's offsets
//   E%[:SEED]             relative: each offset times (1 + u), u uniform in [-E/100, E/100]
//   TIME[:SEED]           absolute: each offset plus u, u uniform in [-TIME, TIME], at least 0
// with a seed (default 1) making the perturbation reproducible.
struct ArrivalError {
  std::string text = "0";
  bool relative = false;
  double amount = 0;  // a fraction (relative) or seconds (absolute)
  std::uint64_t seed = 1;
};
ArrivalError parse_arrival_error(const std::string& text);  // UsageError for a malformed one
// The predicted arrivals for `actual` offsets under `error` (empty for empty).
std::vector<Picos> predict_arrivals(const std::vector<Picos>& actual, const ArrivalError& error);

// Proficz's measures of a run with arrival offsets (his §3): finish f_i and
// arrival a_i per rank.
struct ArrivalMeasures {
  Picos after_last_arrival = 0;  // max f_i - max a_i: how long the collective lasts once everyone is there
  Picos mean_elapsed = 0;        // the average elapsed time (1/P) sum (f_i - a_i), rounded down
};
ArrivalMeasures arrival_measures(const std::vector<Picos>& finish, const std::vector<Picos>& offsets);

struct ClusterSpec {
  std::vector<int> ranks_per_node{4, 4, 4, 4, 4, 4, 4, 4};  // one entry per node
  // How the algorithm runs (plan/planner.hpp): flat over all ranks (nodes
  // then only decide which links are inter-node); under one node leader or
  // many (each node's ranks form groups on `machine`, the algorithm runs
  // among the off-node ranks); in lanes (plan_lanes: nodes of equal size;
  // `machine` and `grouping` only plan the nodes); or auto, the form the
  // planner finds fastest for the algorithm.
  Form form = Form::flat;
  std::optional<Machine> machine;  // each node's machine; unset: this one (hwloc)
  Grouping grouping;
  CostModel model;
  int repetitions = 1;
  std::chrono::milliseconds wait_timeout = EmulatorConfig().wait_timeout;
  // Each rank's arrival (start offset), and what arrival-aware schedules are
  // planned from (empty: the arrival itself, a perfect prediction).
  ArrivalPattern arrival;
  std::vector<Picos> predicted_arrival;
};

class EmulatedCluster {
 public:
  // Throws UsageError for no nodes, an empty node, too many ranks, or a
  // hierarchy that cannot be planned.
  explicit EmulatedCluster(ClusterSpec spec);

  int ranks() const { return ranks_; }
  int nodes() const { return static_cast<int>(spec_.ranks_per_node.size()); }
  const ClusterSpec& spec() const { return spec_; }
  // The hierarchy of the cluster's form (auto: the one-leader one); null: flat.
  std::shared_ptr<const HierarchyPlan> hierarchy() const;
  const EmulatorConfig& emulator_config() const { return config_; }
  const Planner& planner() const { return planner_; }
  // The simulator's options for the same layout, model and arrival.
  SimulationOptions simulation(std::size_t element_bytes) const;
  // What schedules are planned from: the model, and the predicted arrivals.
  std::shared_ptr<const PlanHints> hints(std::size_t element_bytes) const;

  // The planner's key for `algorithm` (a registry name or "auto") on this
  // cluster, in its form, with its hints.
  CallKey key(Collective collective, std::string_view algorithm, std::size_t element_bytes, bool commutative,
              std::uint64_t count, int root, std::optional<int> requested_blocks) const;
  // `algorithm`'s schedule on this cluster, in its form (auto: the form the
  // planner chooses for the algorithm at these blocks).
  SchedulePlan plan(const AlgorithmInfo& algorithm, const Shape& shape) const;
  // Whether the hierarchy runs the algorithm as one tree pipelined across levels.
  bool pipelined_across_levels(const AlgorithmInfo& algorithm) const;

 private:
  ClusterSpec spec_;
  int ranks_ = 0;
  Planner planner_;
  EmulatorConfig config_;
};

struct CheckedEmulation {
  Shape shape;     // as run: blocks is the count the schedule was planned with
  int blocks = 1;  // blocks_used of that shape
  EmulationResult emulation;
  Picos simulated_time = 0;  // the simulator's time for the same schedule
  bool matches_simulator = false;
  bool ok = false;      // verified and matching the simulator
  std::string failure;  // one line when !ok
};

// Runs `algorithm` for `count` elements of `op` per rank on `cluster`, with
// `requested_blocks` or, if unset, the block count that minimises simulated
// time. Throws UsageError for bad input (an operator the algorithm cannot
// serve, a root out of range); a wrong result or a virtual time that differs
// from the simulator's is reported in the result, not thrown.
// With `timeline`, the emulator records the last repetition's sends,
// receives and local work into it (EmulatorConfig::record_timeline).
CheckedEmulation run_checked_emulation(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm,
                                       const ReduceOp& op, std::uint64_t count, int root,
                                       std::optional<int> requested_blocks, Timeline* timeline = nullptr);

// The same problem on the simulator alone: the shape as planned (blocks
// requested, or autotuned), and the simulated time. With `timeline`, the
// simulator records every rank's sends, receives and local work into it.
struct SimulatedRun {
  Shape shape;
  int blocks = 1;  // blocks_used of that shape
  SimulationResult result;
};
SimulatedRun run_simulated(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm, std::size_t element_bytes,
                           std::uint64_t count, int root, std::optional<int> requested_blocks,
                           Timeline* timeline = nullptr);

// ---- Flat versus hierarchical (study_flat_hier, `copse demo`) -------------------
//
// The forms an allreduce takes on a cluster of equal nodes: flat over all
// ranks; one node leader above groups of `group` ranks; every group leader
// talking off-node (Bjørndalen's multi-leader); lanes (Träff and Hunold
// 2020). Each node is a machine of one core per rank, so groups are by size.
struct HierarchyForm {
  Form shape = Form::flat;  // not automatic
  std::string algorithm;    // the allreduce: over all ranks, among the off-node ranks, or within each lane
  int group = 4;            // leaders: ranks per level-0 group (0: the whole node is one group)
  // "flat ring", "1 leader, groups of 4, dual-root", "multi-leader, groups of 4, ring", "lanes, ring"
  std::string label() const;
  std::string_view shape_name() const;  // "flat", "single-leader", "multi-leader", "lanes"
};
// `spec` (nodes of equal size) with `form`'s hierarchy. UsageError for unequal nodes.
ClusterSpec with_form(ClusterSpec spec, const HierarchyForm& form);

// The selection (plan/selection.hpp) for `collective` on `cluster`,
// `count` elements of `op` per rank: every candidate planned as the cluster
// plans it (flat, or composed with its hierarchy) under its model.
Selection select_for_cluster(const EmulatedCluster& cluster, Collective collective, const ReduceOp& op,
                             std::uint64_t count, int root);

// ---- Proficz 2018's benchmark on the emulator (`copse study proficz`) -----------
//
// Allreduce of float sums on `ranks` emulated nodes of one rank each (his
// one process per node), every algorithm at its best block count for the
// arrival pattern (autotuned under it), in virtual time:
//  - "delay" (his Fig. 10 and Table 3): one rank late (one-late) by each of
//    `delays` times the ring's balanced time at `bytes`;
//  - "size" (Fig. 11): each of `sizes`, one rank late by `size_delay` times
//    the ring's balanced time at `bytes`;
//  - "error": the delay part at `size_delay`, the arrival-aware algorithms
//    planned from predictions wrong by each of `errors` (absolute, in units
//    of that delay, seed 1).
// Every run is verified and its virtual time checked against the
// simulator's; a row says whether it was.
struct ProficzStudyOptions {
  int ranks = 16;
  std::uint64_t bytes = std::uint64_t{4} << 20;  // 1M floats, his Table 3
  std::vector<double> delays = {0, 0.1, 0.25, 0.5, 1, 2, 5, 15};
  std::vector<std::uint64_t> sizes = {std::uint64_t{64} << 10, std::uint64_t{256} << 10, std::uint64_t{1} << 20,
                                      std::uint64_t{4} << 20, std::uint64_t{16} << 20};
  double size_delay = 2;
  std::vector<double> errors = {0, 0.25, 1, 4};
  std::vector<std::string> algorithms = {"ring", "rabenseifner", "slt", "prr"};
  CostModel model;  // one level between nodes
};
struct ProficzRow {
  std::string part;  // "delay", "size" or "error"
  std::string algorithm;
  std::uint64_t bytes = 0;
  Picos delay = 0;
  double error = 0;  // prediction error, in units of the delay
  int blocks = 1;
  ArrivalMeasures measures;
  ArrivalMeasures ring;  // the ring's, for the same bytes and delay
  bool ok = false;       // verified, and equal to the simulator's time
};
struct ProficzStudy {
  Picos balanced_ring = 0;  // the ring at `bytes`, everyone on time: the delays' unit
  std::vector<ProficzRow> rows;
};
ProficzStudy run_proficz_study(const ProficzStudyOptions& options);

}  // namespace copse
