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

#include "common/cost_model.hpp"
#include "common/reduce_op.hpp"
#include "internode/registry.hpp"
#include "internode/simulator.hpp"
#include "node/emulator.hpp"
#include "topology/plan.hpp"

namespace copse {

struct ClusterSpec {
  std::vector<int> ranks_per_node{4, 4, 4, 4, 4, 4, 4, 4};  // one entry per node
  // With a hierarchy, each node's ranks form groups on `machine` and the
  // algorithm runs among the off-node ranks; without one it runs flat over
  // all ranks (nodes then only decide which links are inter-node).
  bool hierarchical = false;
  std::optional<Machine> machine;  // hierarchical: each node's machine; unset: this one (hwloc)
  Grouping grouping;
  bool multi_leader = false;
  CostModel model;
  int repetitions = 1;
  std::chrono::milliseconds wait_timeout = EmulatorConfig().wait_timeout;
};

class EmulatedCluster {
 public:
  // Throws UsageError for no nodes, an empty node, too many ranks, or a
  // hierarchy that cannot be planned.
  explicit EmulatedCluster(ClusterSpec spec);

  int ranks() const { return ranks_; }
  int nodes() const { return static_cast<int>(spec_.ranks_per_node.size()); }
  const ClusterSpec& spec() const { return spec_; }
  const std::shared_ptr<const HierarchyPlan>& hierarchy() const { return hierarchy_; }  // null: flat
  const EmulatorConfig& emulator_config() const { return config_; }
  // The simulator's options for the same layout and model.
  SimulationOptions simulation(std::size_t element_bytes) const;

  // `algorithm`'s schedule on this cluster: hierarchical or flat.
  SchedulePlan plan(const AlgorithmInfo& algorithm, const Shape& shape) const;
  // Whether the hierarchy runs the algorithm as one tree pipelined across levels.
  bool pipelined_across_levels(const AlgorithmInfo& algorithm) const;

 private:
  ClusterSpec spec_;
  int ranks_ = 0;
  std::shared_ptr<const HierarchyPlan> hierarchy_;
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
CheckedEmulation run_checked_emulation(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm,
                                       const ReduceOp& op, std::uint64_t count, int root,
                                       std::optional<int> requested_blocks);

}  // namespace copse
