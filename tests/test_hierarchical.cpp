// Hierarchical collectives: proven by the verifier for every inter-node
// algorithm, grouping policy, multi-leader or not, uneven nodes; run on real
// data by the emulator, including the non-commutative `affine`.
#include <catch2/catch.hpp>

#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "emulator/emulator.hpp"
#include "plan/hierarchical.hpp"

using namespace copse;

namespace {

std::shared_ptr<const HierarchyPlan> make_plan(const std::vector<int>& ranks_per_node, std::string_view machine,
                                               std::string_view grouping, bool multi_leader) {
  std::vector<NodeSpec> nodes;
  for (int k : ranks_per_node) nodes.push_back(NodeSpec{Machine::synthetic(machine), k, {}});
  return std::make_shared<const HierarchyPlan>(plan_hierarchy(nodes, Grouping::parse(grouping), multi_leader));
}

struct Layout {
  std::vector<int> ranks_per_node;
  const char* machine;
};

const Layout kLayouts[] = {
    {{8, 8, 8, 8}, "package:2 l3:2 core:2 pu:1"},  // Bjørndalen's 8W shape
    {{5, 8, 1}, "package:2 l3:2 core:2 pu:1"},     // uneven nodes
    {{16, 16}, "package:2 l3:2 core:4 pu:1"},     {{3, 3, 3}, "numa:2 core:2 pu:1"}, {{1}, "core:2 pu:1"},
    {{7}, "package:1 l3:1 l2:4 core:1 pu:1"},  // oversubscribed
};
const char* const kGroupings[] = {"auto", "l3", "package", "core", "numa", "size:2", "size:4", "size:3"};

}  // namespace

TEST_CASE("hierarchical schedules are proven for every inter-node algorithm, grouping and layout", "[exhaustive]") {
  int proven = 0;
  for (const Layout& layout : kLayouts)
    for (const char* grouping : kGroupings)
      for (bool multi_leader : {false, true}) {
        std::shared_ptr<const HierarchyPlan> plan;
        try {
          plan = make_plan(layout.ranks_per_node, layout.machine, grouping, multi_leader);
        } catch (const UsageError&) {
          continue;  // a level the synthetic machine does not have
        }
        for (const AlgorithmInfo& inter : algorithms()) {
          if (!takes_form(inter, Form::leader)) continue;
          for (int blocks : {1, 3})
            for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{100}}) {
              const Shape shape{plan->ranks, count, blocks, plan->ranks / 2};
              const auto result = verify(inter, plan_hierarchical(plan, inter, shape), shape);
              INFO(to_string(inter.collective)
                   << ":" << inter.name << " nodes " << layout.ranks_per_node.size() << " " << layout.machine
                   << " grouping " << grouping << (multi_leader ? " multi-leader" : "") << " blocks " << blocks
                   << " count " << count << ": " << result.message);
              REQUIRE(result.proven);
              ++proven;
            }
        }
      }
  CHECK(proven > 1000);
}

TEST_CASE("tree-based inter-node algorithms pipeline across levels") {
  // One combined tree: each round a rank exchanges one block with each child
  // and one with its parent or dual (Träff 2021, Alg. 1), so with many blocks
  // the time per byte tends to the largest (children + 1) -- here 4, at the
  // root node's leader with two group members, one inter-node child and its
  // dual. The phased composition pays for each level in turn: 2 (the leader
  // receives from two group children per block) + 2 (dual-root over four
  // leaders: each root has one child and its dual) + 2 (it sends to two) = 6.
  const auto plan = make_plan({4, 4, 4, 4}, "package:1 l3:2 core:2 pu:1", "size:2", false);
  SimulationOptions o;
  o.model = CostModel({LinkCost{0, 1e-9}, LinkCost{0, 1e-9}}, 0, Ports::bidirectional);
  o.layout = RankMap::from_nodes(plan->node_of);
  const std::uint64_t m = 1 << 20;
  const Shape shape{plan->ranks, m, 512, 0};
  const auto& dual_root = find_algorithm(Collective::allreduce, "dual-root");
  REQUIRE(runs_as_combined_tree(dual_root));
  auto per_byte = [&](bool pipelined) {
    return to_seconds(simulate(plan_hierarchical(plan, dual_root, shape, pipelined), plan->ranks, o).time) / (1e-9 * m);
  };
  const double pipelined = per_byte(true), phased = per_byte(false);
  INFO("pipelined " << pipelined << " beta m, phased " << phased << " beta m");
  CHECK(pipelined == Approx(4.0).epsilon(0.02));
  CHECK(phased == Approx(6.0).epsilon(0.02));
}

TEST_CASE("concurrency: hierarchical allreduce, reduce and bcast on real data, uneven nodes, affine") {
  for (bool multi_leader : {false, true})
    for (const char* grouping : {"auto", "size:2", "size:4"}) {
      const auto plan = make_plan({5, 8, 1}, "package:2 l3:2 core:2 pu:1", grouping, multi_leader);
      EmulatorConfig config;
      config.layout = RankMap::from_nodes(plan->node_of);
      config.repetitions = 2;
      config.wait_timeout = std::chrono::milliseconds(20000);
      SimulationOptions sim;
      sim.model = config.model;
      sim.layout = RankMap::from_nodes(plan->node_of);
      for (const AlgorithmInfo& inter : algorithms()) {
        if (!takes_form(inter, Form::leader)) continue;
        const ReduceOp op = builtin_op(inter.needs_commutative ? "sum" : "affine", DType::int64);
        sim.element_bytes = op.element_bytes;
        for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1000}}) {
          const Shape shape{plan->ranks, count, 4, 3};
          const SchedulePlan schedule = plan_hierarchical(plan, inter, shape);
          const EmulationResult r = emulate(inter, schedule, shape, op, config);
          INFO(to_string(inter.collective)
               << ":" << inter.name << " " << grouping << (multi_leader ? " multi-leader" : "") << " count " << count
               << ": " << r.failure);
          REQUIRE(r.verified);
          CHECK(r.virtual_time == simulate(schedule, plan->ranks, sim).time);
        }
      }
    }
}

TEST_CASE("a plan and a shape of different sizes are refused") {
  const auto plan = make_plan({4}, "core:4 pu:1", "auto", false);
  CHECK_THROWS_AS(plan_hierarchical(plan, find_algorithm(Collective::allreduce, "ring"), Shape{5, 10, 1, 0}),
                  UsageError);
}
