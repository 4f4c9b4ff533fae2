// The selection (plan/selection.hpp): issue 8's acceptance for one node
// of 16, 32 and 64 ranks, the candidates it weighs, the edge shapes, and the
// one-node team choice and configuration that consult it.
#include <bit>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "config/config.hpp"
#include "plan/autotune.hpp"
#include "plan/planner.hpp"
#include "plan/selection.hpp"
#include "tools/experiment.hpp"

using namespace copse;

namespace {

// `copse sim --ranks T --ranks-per-node T` without --intra-*: the same link
// costs on and off the node (1.5 us, 0.1 ns/B), gamma 0.025 ns/B; one element per byte.
SimulationOptions sim_defaults(int ranks) {
  const LinkCost link{1.5e-6, 1e-10};
  SimulationOptions o;
  o.model = CostModel({link, link}, 2.5e-11, Ports::bidirectional);
  o.layout = RankMap::uniform(ranks, ranks);
  return o;
}

// The documented default model (same node 0.2 us + 0.05 ns/B), one node.
SimulationOptions one_node_default_model(int ranks) {
  SimulationOptions o;
  o.layout = RankMap::uniform(ranks, ranks);
  return o;
}

std::set<std::string> names(const Selection& s) {
  std::set<std::string> out;
  for (const auto& c : s.candidates) out.insert(std::string(c.algorithm->name));
  return out;
}

}  // namespace

TEST_CASE("one node of 16, 32, 64 ranks: near the traffic bound at 1 MiB and up, few steps at 8 B") {
  for (int t : {16, 32, 64}) {
    for (const auto& [model_name, options] :
         {std::pair{"copse sim's defaults", sim_defaults(t)}, {"the default model", one_node_default_model(t)}}) {
      for (std::uint64_t m : {std::uint64_t{1} << 20, std::uint64_t{16} << 20}) {
        const Selection s = select_algorithm(Collective::allreduce, Shape{t, m}, options, true);
        const double bound = 2.0 * (t - 1) / t * static_cast<double>(m);
        INFO(model_name << ", T=" << t << ", m=" << m << ": " << s.chosen.algorithm->name << " moves "
                        << s.chosen.max_received);
        CHECK(static_cast<double>(s.chosen.max_received) <= 1.25 * bound);
      }
      const Selection small = select_algorithm(Collective::allreduce, Shape{t, 8}, options, true);
      INFO(model_name << ", T=" << t << ", 8 B: " << small.chosen.algorithm->name << " takes " << small.chosen.steps
                      << " steps");
      CHECK(small.chosen.steps <= static_cast<std::uint64_t>(std::bit_width(static_cast<unsigned>(t - 1))) + 1);
    }
  }
}

TEST_CASE("the chosen algorithm is never slower than any candidate at its tuned block count") {
  for (Collective c : all_collectives())
    for (int p : {3, 8, 12})
      for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{1} << 18})
        for (bool commutative : {true, false}) {
          SimulationOptions options;
          options.layout = RankMap::uniform(p, 4);
          options.element_bytes = 4;
          const Shape shape{p, count, 1, p - 1, planning_hints(options)};
          const Selection s = select_algorithm(c, shape, options, commutative);
          INFO(to_string(c) << " p=" << p << " count=" << count << (commutative ? "" : " non-commutative") << ": "
                            << s.chosen.algorithm->name);
          // Every selectable registered algorithm was weighed ...
          std::set<std::string> expected;
          for (const auto& a : algorithms())
            if (a.collective == c && selectable(a, commutative)) expected.insert(std::string(a.name));
          CHECK(names(s) == expected);
          // ... and, simulated here on its own at its best block count, none is faster.
          for (const auto& a : algorithms()) {
            if (a.collective != c || !selectable(a, commutative)) continue;
            Shape tuned = shape;
            tuned.blocks = best_blocks(a, shape, options);
            const Picos time = simulate(a.plan(tuned), p, options).time;
            INFO(a.name << " at " << tuned.blocks << " blocks: " << time << " ps");
            CHECK(s.chosen.time <= time);
          }
        }
}

TEST_CASE("a non-commutative operator never gets a commutative-only algorithm, arrival-aware and flat ones are out") {
  const SimulationOptions options = one_node_default_model(16);
  for (Collective c : all_collectives())
    for (std::uint64_t m : {std::uint64_t{8}, std::uint64_t{1} << 20}) {
      const Selection s = select_algorithm(c, Shape{16, m}, options, false);
      INFO(to_string(c) << " " << m);
      CHECK_FALSE(s.chosen.algorithm->needs_commutative);
      for (const auto& candidate : s.candidates) {
        CHECK_FALSE(candidate.algorithm->needs_commutative);
        CHECK_FALSE(candidate.algorithm->arrival_aware);
        CHECK(candidate.algorithm->name != "flat");
      }
    }
  // The ring is a candidate only for a commutative operator.
  const auto with = names(select_algorithm(Collective::allreduce, Shape{16, 1 << 20}, options, true));
  const auto without = names(select_algorithm(Collective::allreduce, Shape{16, 1 << 20}, options, false));
  CHECK(with.count("ring") == 1);
  CHECK(without.count("ring") == 0);
  CHECK(without.count("slt") == 0);
}

TEST_CASE("one rank, and no data: the selection still answers, in no time") {
  for (Collective c : all_collectives()) {
    SimulationOptions options;
    const Selection one = select_algorithm(c, Shape{1, 1000}, options, true);
    INFO(to_string(c));
    if (c != Collective::alltoall) CHECK(one.chosen.time == 0);  // one rank still copies its block across
    CHECK(one.chosen.max_received == 0);
    options.layout = RankMap::uniform(8, 4);
    const Selection empty = select_algorithm(c, Shape{8, 0}, options, true);
    if (c != Collective::barrier) CHECK(empty.chosen.max_received == 0);  // a barrier moves its one element
    for (const auto& candidate : empty.candidates) CHECK(empty.chosen.time <= candidate.time);
  }
}

TEST_CASE("a bad shape, and a planner that refuses every candidate, are usage errors") {
  const SimulationOptions options;
  CHECK_THROWS_AS(select_algorithm(Collective::allreduce, Shape{0, 8}, options, true), UsageError);
  CHECK_THROWS_AS(select_algorithm(Collective::reduce, Shape{4, 8, 1, 4}, SimulationOptions{}, true), UsageError);
  // A planner that composes only one algorithm: that one is chosen.
  const auto only_binomial = [](const AlgorithmInfo& a, const Shape& s) {
    if (a.name != "binomial") throw UsageError("not composed");
    return a.plan(s);
  };
  SimulationOptions four;
  four.layout = RankMap::uniform(4, 4);
  const Selection s = select_algorithm(Collective::allgather, Shape{4, 100}, four, true, only_binomial);
  CHECK(s.chosen.algorithm->name == "binomial");
  CHECK(s.candidates.size() == 1);
  const auto none = [](const AlgorithmInfo&, const Shape&) -> SchedulePlan { throw UsageError("not composed"); };
  CHECK_THROWS_AS(select_algorithm(Collective::allgather, Shape{4, 100}, four, true, none), UsageError);
}

TEST_CASE("an emulated hierarchy: only what it composes is weighed, and the choice runs verified") {
  ClusterSpec spec;
  spec.ranks_per_node = {4, 4};
  spec.form = Form::leader;
  spec.machine = Machine::synthetic("core:4 pu:1");
  spec.grouping = Grouping::parse("size:2");
  const EmulatedCluster cluster(spec);
  const ReduceOp sum = builtin_op("sum", DType::int32);
  const ReduceOp affine = builtin_op("affine", DType::int32);
  for (Collective c : {Collective::allreduce, Collective::allgather, Collective::reduce_scatter})
    for (const ReduceOp* op : {&sum, &affine}) {
      const Selection s = select_for_cluster(cluster, c, *op, 1000, 0);
      INFO(to_string(c) << " " << op->name << ": " << s.chosen.algorithm->name);
      for (const auto& candidate : s.candidates) {
        // Each candidate is costed as the hierarchy composes it.
        Shape shape{8, 1000, candidate.blocks, 0, cluster.hints(op->element_bytes)};
        CHECK(simulate(cluster.plan(*candidate.algorithm, shape), 8, cluster.simulation(op->element_bytes)).time ==
              candidate.time);
        if (!op->commutative) CHECK_FALSE(candidate.algorithm->needs_commutative);
      }
      if (c != Collective::allreduce)  // the hierarchy composes only trees for these
        for (const auto& candidate : s.candidates) CHECK(candidate.algorithm->name != "ring");
      const CheckedEmulation run = run_checked_emulation(cluster, s.algorithm(), *op, 1000, 0, std::nullopt);
      CHECK(run.ok);
      CHECK(run.simulated_time == s.chosen.time);
    }
}

TEST_CASE("one-node team: the selection unless an algorithm is configured, auto is a configured value") {
  auto planner_for = [](const RankMap& layout) {
    PlanContext context;
    context.layout = layout;
    context.node_specs = [layout] {
      return std::vector<NodeSpec>(static_cast<std::size_t>(layout.nodes()),
                                   NodeSpec{Machine::synthetic("core:16 pu:1"), layout.ranks() / layout.nodes(), {}});
    };
    return Planner(std::move(context));
  };
  const RankMap node = RankMap::uniform(16, 16);
  const Planner one_node = planner_for(node);
  PlanOptions options;
  // The default (or auto) gets the selection's choice, flat.
  for (const char* configured : {team_defaults::allreduce.data(), "auto"})
    for (std::uint64_t count : {std::uint64_t{2}, std::uint64_t{1} << 18}) {
      options.allreduce = configured;
      SimulationOptions sim;
      sim.layout = node;
      sim.element_bytes = 4;
      const CompiledPlan plan = one_node.plan(options.call_key(Collective::allreduce, count, 4, true, 0));
      CHECK(plan.form == Form::flat);
      CHECK(plan.algorithm == select_algorithm(Collective::allreduce, Shape{16, count}, sim, true).chosen.algorithm);
    }
  // A configured algorithm is obeyed; more than one node keeps the hierarchy
  // (auto: the selection among what it composes).
  options.allreduce = "ring";
  const CompiledPlan ring = one_node.plan(options.call_key(Collective::allreduce, 2, 4, true, 0));
  CHECK(ring.form == Form::leader);
  CHECK(ring.algorithm->name == "ring");
  options.allreduce = "auto";
  CHECK(planner_for(RankMap::uniform(16, 8)).plan(options.call_key(Collective::allreduce, 2, 4, true, 0)).form ==
        Form::leader);

  // Configuration: "auto" is accepted and names the team default for planning.
  Config config;  // defaults only
  config.set("collectives.allreduce", "auto");
  CHECK(config.options().collectives.allreduce == "auto");
  CHECK(algorithm_name(config.options().collectives, Collective::allreduce) ==
        default_algorithm_name(Collective::allreduce));
  CHECK(config.options().collectives.algorithm(Collective::allreduce).name ==
        default_algorithm_name(Collective::allreduce));
}
