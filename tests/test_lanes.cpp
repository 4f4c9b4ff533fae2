// The lane decomposition (node/hierarchical.hpp, plan_lanes): proven by the
// verifier for every inter-node allreduce on equal nodes, run on real data
// (the non-commutative affine included) with the emulator's virtual times
// equal to the simulator's, and refused for unequal nodes.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "internode/simulator.hpp"
#include "internode/verifier.hpp"
#include "node/emulator.hpp"
#include "node/hierarchical.hpp"

using namespace copse;

namespace {

std::shared_ptr<const HierarchyPlan> equal_nodes(int nodes, int k) {
  std::vector<NodeSpec> specs(static_cast<std::size_t>(nodes),
                              NodeSpec{Machine::synthetic("core:" + std::to_string(k) + " pu:1"), k, {}});
  return std::make_shared<const HierarchyPlan>(plan_hierarchy(specs, Grouping::parse("size:2"), false));
}

}  // namespace

TEST_CASE("lanes are proven for every inter-node allreduce", "[lanes]") {
  int proven = 0;
  for (auto [nodes, k] : {std::pair{4, 8}, std::pair{2, 16}, std::pair{3, 3}, std::pair{1, 5}, std::pair{5, 1}}) {
    const auto plan = equal_nodes(nodes, k);
    for (const AlgorithmInfo& inter : algorithms()) {
      if (inter.collective != Collective::allreduce) continue;
      for (int blocks : {1, 3})
        for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{100}}) {
          const Shape shape{plan->ranks, count, blocks, 0};
          const auto result = verify(inter, plan_lanes(plan, inter, shape), shape);
          INFO(inter.name << " " << nodes << "x" << k << " blocks " << blocks << " count " << count << ": "
                          << result.message);
          REQUIRE(result.proven);
          ++proven;
        }
    }
  }
  CHECK(proven > 200);
}

TEST_CASE("lanes refuse unequal nodes and other collectives", "[lanes]") {
  std::vector<NodeSpec> specs{NodeSpec{Machine::synthetic("core:4 pu:1"), 4, {}},
                              NodeSpec{Machine::synthetic("core:4 pu:1"), 3, {}}};
  const auto plan = std::make_shared<const HierarchyPlan>(plan_hierarchy(specs, Grouping::parse("size:2"), false));
  CHECK_THROWS_AS(plan_lanes(plan, find_algorithm(Collective::allreduce, "ring"), Shape{7, 10, 1, 0}), UsageError);
  CHECK_THROWS_AS(plan_lanes(equal_nodes(2, 2), find_algorithm(Collective::reduce, "binomial"), Shape{4, 10, 1, 0}),
                  UsageError);
}

TEST_CASE("concurrency: lanes on real data, emulator = simulator under a shared interface", "[lanes]") {
  const auto plan = equal_nodes(3, 4);
  CostModel model({LinkCost{2e-7, 5e-11, 5e-8, 0}, LinkCost{1.5e-6, 1e-10, 5e-7, 0}}, 2.5e-11, Ports::bidirectional);
  model.with_timing(Timing::loggp).with_nic(NicCost{4e-11, 1});
  for (const char* name : {"ring", "rabenseifner", "dual-root", "two-tree"}) {
    const AlgorithmInfo& inter = find_algorithm(Collective::allreduce, name);
    const ReduceOp op = builtin_op(inter.needs_commutative ? "sum" : "affine", DType::int32);
    const Shape shape{plan->ranks, 1001, 3, 0};
    const SchedulePlan schedule = plan_lanes(plan, inter, shape);
    EmulatorConfig c;
    c.layout = RankMap::from_nodes(plan->node_of);
    c.model = model;
    SimulationOptions o;
    o.model = model;
    o.layout = c.layout;
    o.element_bytes = op.element_bytes;
    const EmulationResult e = emulate(inter, schedule, shape, op, c);
    INFO(name << ": " << e.failure);
    CHECK(e.verified);
    CHECK(e.virtual_finish == simulate(schedule, plan->ranks, o).finish);
  }
}
