// The lane decomposition of every collective (plan/hierarchical.hpp,
// plan_lanes; plan/lanes.cpp): proven by the verifier for every algorithm
// whose row takes the lanes form, on every layout of 1..5 nodes of 1..6
// ranks, for counts {0, 1, 2, k-1, k+1, 37, 1000} and several roots; run on
// real data by the emulator (the non-commutative affine wherever the
// algorithm keeps rank order) against the sequential reference, with the
// emulator's virtual time equal to the simulator's; refused for unequal nodes
// and for rows that refuse the form.
#include <catch2/catch.hpp>
#include <optional>
#include <set>

#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "emulator/emulator.hpp"
#include "plan/hierarchical.hpp"

using namespace copse;

namespace {

std::shared_ptr<const HierarchyPlan> equal_nodes(int nodes, int k) {
  std::vector<NodeSpec> specs(static_cast<std::size_t>(nodes),
                              NodeSpec{Machine::synthetic("core:" + std::to_string(k) + " pu:1"), k, {}});
  return std::make_shared<const HierarchyPlan>(plan_hierarchy(specs, Grouping::parse("size:2"), false));
}

// The first rank, the last, and one inside a node other than the first's.
std::set<int> roots_of(Collective c, int p, int k) {
  if (c != Collective::reduce && c != Collective::bcast) return {0};
  return {0, p - 1, std::min(p - 1, k + k / 2)};
}

// Proves every lane plan of `collective` for nodes 1..5 x k 1..6.
int prove_every_layout(Collective collective) {
  int proven = 0;
  for (int nodes = 1; nodes <= 5; ++nodes)
    for (int k = 1; k <= 6; ++k) {
      const auto plan = equal_nodes(nodes, k);
      const auto uk = static_cast<std::uint64_t>(k);
      const std::set<std::uint64_t> counts{0, 1, 2, uk - 1, uk + 1, 37, 1000};
      for (const AlgorithmInfo& inter : algorithms()) {
        if (inter.collective != collective || !takes_form(inter, Form::lanes)) continue;
        for (std::uint64_t count : counts)
          for (int root : roots_of(collective, plan->ranks, k)) {
            const Shape shape{plan->ranks, count, count % 2 == 0 ? 3 : 1, root};
            const auto result = verify(inter, plan_lanes(plan, inter, shape), shape);
            INFO(to_string(collective) << ":" << inter.name << " " << nodes << "x" << k << " count " << count
                                       << " root " << root << ": " << result.message);
            REQUIRE(result.proven);
            ++proven;
          }
      }
    }
  return proven;
}

}  // namespace

TEST_CASE("lanes are proven for every collective, algorithm, layout and root", "[lanes][exhaustive]") {
  for (Collective c : all_collectives()) {
    if (!has_hierarchy(c)) continue;  // flat schedules only (issue 19)
    const int proven = prove_every_layout(c);
    INFO(to_string(c));
    // Every layout x every count (up to 7) x every root (up to 3) x the
    // collective's algorithms: at least the three of barrier, allgather and
    // reduce_scatter.
    CHECK(proven >= 30 * 3 * 4);
  }
}

TEST_CASE("lanes refuse unequal nodes for every collective", "[lanes]") {
  std::vector<NodeSpec> specs{NodeSpec{Machine::synthetic("core:4 pu:1"), 4, {}},
                              NodeSpec{Machine::synthetic("core:4 pu:1"), 3, {}}};
  const auto plan = std::make_shared<const HierarchyPlan>(plan_hierarchy(specs, Grouping::parse("size:2"), false));
  for (Collective c : all_collectives())
    if (has_hierarchy(c))
      CHECK_THROWS_WITH(plan_lanes(plan, find_algorithm(c, "binomial"), Shape{7, 10, 1, 0}),
                        Catch::Contains("same number of ranks on every node"));
}

TEST_CASE("concurrency: lanes on real data, emulator = simulator under a shared interface", "[lanes]") {
  CostModel model({LinkCost{2e-7, 5e-11, 5e-8, 0}, LinkCost{1.5e-6, 1e-10, 5e-7, 0}}, 2.5e-11, Ports::bidirectional);
  model.with_timing(Timing::loggp).with_nic(NicCost{4e-11, 1});
  RankThreads threads;
  for (auto [nodes, k] : {std::pair{3, 4}, std::pair{2, 3}, std::pair{4, 1}, std::pair{1, 5}}) {
    const auto plan = equal_nodes(nodes, k);
    EmulatorConfig c;
    c.layout = RankMap::from_nodes(plan->node_of);
    c.model = model;
    c.threads = &threads;
    SimulationOptions o;
    o.model = model;
    o.layout = c.layout;
    for (const AlgorithmInfo& inter : algorithms()) {
      if (!takes_form(inter, Form::lanes)) continue;
      const ReduceOp op = builtin_op(inter.needs_commutative ? "sum" : "affine", DType::int32);
      o.element_bytes = op.element_bytes;
      for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{37}, std::uint64_t{1001}}) {
        const Shape shape{plan->ranks, count, 3, plan->ranks - 1};
        const SchedulePlan schedule = plan_lanes(plan, inter, shape);
        const EmulationResult e = emulate(inter, schedule, shape, op, c);
        INFO(to_string(inter.collective) << ":" << inter.name << " " << nodes << "x" << k << " count " << count << ": "
                                         << e.failure);
        REQUIRE(e.verified);
        CHECK(e.virtual_finish == simulate(schedule, plan->ranks, o).finish);
      }
    }
  }
}

// The proofs above can fail: a lane schedule whose ranks 1 and 3 receive one
// element off where it belongs, or skip their last step, is not proven.
RankSchedule misplaced(RankSchedule inner, bool shift_receives, bool drop_last) {
  std::optional<Step> held;
  while (inner.next()) {
    if (held) co_yield *held;
    held = inner.value();
    if (shift_receives && held->recv) held->recv.offset = held->recv.offset > 0 ? held->recv.offset - 1 : 1;
  }
  if (held && !drop_last) co_yield *held;
}

TEST_CASE("a lane schedule moved by one element or cut short is not proven", "[lanes]") {
  const auto plan = equal_nodes(3, 2);
  for (Collective c : {Collective::allgather, Collective::reduce_scatter, Collective::reduce, Collective::bcast})
    for (bool shift : {true, false}) {
      const AlgorithmInfo& inter = find_algorithm(c, "binomial");
      const Shape shape{plan->ranks, 5, 1, 3};
      const SchedulePlan good = plan_lanes(plan, inter, shape);
      REQUIRE(verify(inter, good, shape).proven);
      const SchedulePlan bad = [good, shift](int rank) {
        return rank == 1 || rank == 3 ? misplaced(good(rank), shift, !shift) : good(rank);
      };
      INFO(to_string(c) << (shift ? " shifted" : " cut short"));
      CHECK_FALSE(verify(inter, bad, shape).proven);
    }
}
