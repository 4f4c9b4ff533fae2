#include "node/experiment.hpp"

#include <limits>
#include <utility>

#include "common/error.hpp"
#include "internode/autotune.hpp"
#include "node/hierarchical.hpp"

namespace copse {

EmulatedCluster::EmulatedCluster(ClusterSpec spec) : spec_(std::move(spec)) {
  if (spec_.ranks_per_node.empty()) throw UsageError("an emulated cluster needs at least one node");
  long long ranks = 0;
  for (int k : spec_.ranks_per_node) {
    if (k < 1) throw UsageError("a node must hold at least one rank, got " + std::to_string(k));
    ranks += k;
  }
  if (ranks > std::numeric_limits<int>::max())
    throw UsageError("too many ranks for one emulated cluster (" + std::to_string(ranks) + ")");
  ranks_ = static_cast<int>(ranks);

  config_.layout = RankMap::from_node_sizes(spec_.ranks_per_node);
  if (spec_.hierarchical) {
    const Machine machine = spec_.machine ? *spec_.machine : Machine::detect();
    std::vector<NodeSpec> nodes;
    for (int k : spec_.ranks_per_node) nodes.push_back(NodeSpec{machine, k, {}});
    hierarchy_ = std::make_shared<const HierarchyPlan>(plan_hierarchy(nodes, spec_.grouping, spec_.multi_leader));
  }
  config_.model = spec_.model;
  config_.repetitions = spec_.repetitions;
  config_.wait_timeout = spec_.wait_timeout;
}

SimulationOptions EmulatedCluster::simulation(std::size_t element_bytes) const {
  SimulationOptions options;
  options.model = spec_.model;
  options.layout = config_.layout;
  options.element_bytes = element_bytes;
  return options;
}

SchedulePlan EmulatedCluster::plan(const AlgorithmInfo& algorithm, const Shape& shape) const {
  return hierarchy_ ? plan_hierarchical(hierarchy_, algorithm, shape) : algorithm.plan(shape);
}

bool EmulatedCluster::pipelined_across_levels(const AlgorithmInfo& algorithm) const {
  return hierarchy_ && runs_as_combined_tree(algorithm) && hierarchy_->offnode.size() > 1;
}

CheckedEmulation run_checked_emulation(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm,
                                       const ReduceOp& op, std::uint64_t count, int root,
                                       std::optional<int> requested_blocks) {
  check_operator(algorithm, op.name, op.commutative);
  const SimulationOptions sim = cluster.simulation(op.element_bytes);
  CheckedEmulation out;
  out.shape = Shape{cluster.ranks(), count, 1, root, planning_hints(sim)};
  out.shape.blocks = resolve_blocks([&](const Shape& s) { return cluster.plan(algorithm, s); }, algorithm, out.shape,
                                    requested_blocks, sim);
  out.blocks = blocks_used(algorithm, out.shape);

  const SchedulePlan schedule = cluster.plan(algorithm, out.shape);
  out.emulation = emulate(algorithm, schedule, out.shape, op, cluster.emulator_config());
  out.simulated_time = simulate(schedule, out.shape.ranks, sim).time;
  out.matches_simulator = out.simulated_time == out.emulation.virtual_time;
  out.ok = out.emulation.verified && out.matches_simulator;
  if (!out.emulation.verified) {
    out.failure =
        "wrong result: " + (out.emulation.failure.empty() ? std::string("(no detail given)") : out.emulation.failure);
  } else if (!out.matches_simulator) {
    out.failure = "virtual time " + std::to_string(out.emulation.virtual_time) + " ps differs from the simulator's " +
                  std::to_string(out.simulated_time) + " ps";
  }
  return out;
}

}  // namespace copse
