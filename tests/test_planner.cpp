// The one planner (plan/planner.hpp): the plan the emulator runs for a call
// key is, step by step, the plan the thread Comm runs; forms and the
// configuration's names for them.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "plan/plan_cache.hpp"
#include "plan/planner.hpp"
#include "runtime/comm.hpp"
#include "tests/plan_check.hpp"
#include "tools/experiment.hpp"

using namespace copse;

namespace {

constexpr const char* kNode = "core:4 pu:1";

}  // namespace

TEST_CASE("planner: forms parse and print, unknown forms are refused naming the choices", "[planner]") {
  for (Form f : {Form::flat, Form::leader, Form::multi_leader, Form::lanes, Form::automatic})
    CHECK(parse_form(to_string(f)) == f);
  CHECK(to_string(Form::multi_leader) == "multi-leader");
  CHECK(to_string(Form::automatic) == "auto");
  CHECK_THROWS_WITH(parse_form("hierarchical"), Catch::Contains("flat, leader, multi-leader, lanes or auto"));
  PlanOptions o;
  CHECK(o.form_in_effect() == Form::leader);
  o.multi_leader = true;  // the deprecated flag maps onto the form
  CHECK(o.form_in_effect() == Form::multi_leader);
  o.form = Form::lanes;
  CHECK(o.form_in_effect() == Form::lanes);
}

TEST_CASE("planner: the emulator's plan for a call key is the thread Comm's, step by step", "[planner]") {
  struct Call {
    Collective collective;
    const char* algorithm;
  };
  const std::vector<Call> calls{{Collective::allreduce, "rabenseifner"}, {Collective::allreduce, "dual-root"},
                                {Collective::allreduce, "auto"},         {Collective::reduce, "binary-tree"},
                                {Collective::bcast, "binomial"},         {Collective::allgather, "binary-tree"},
                                {Collective::reduce_scatter, "auto"},    {Collective::barrier, "dual-root"}};
  for (Form form : {Form::flat, Form::leader, Form::multi_leader, Form::lanes, Form::automatic}) {
    ClusterSpec spec;
    spec.ranks_per_node = {4, 4, 4, 4};
    spec.form = form;
    spec.machine = Machine::synthetic(kNode);
    spec.grouping = Grouping::parse("size:2");
    const EmulatedCluster cluster(spec);
    TeamOptions options;
    for (int i = 0; i < 4; ++i) options.nodes.push_back(NodeSpec{Machine::synthetic(kNode), 4, {}});
    options.grouping = spec.grouping;
    options.form = form;
    Team team(options);
    for (const Call& call : calls)
      for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1000}}) {
        const std::uint64_t n = call.collective == Collective::barrier ? 1 : count;
        const std::size_t eb = call.collective == Collective::barrier ? 0 : 4;
        const int root = call.collective == Collective::reduce || call.collective == Collective::bcast ? 5 : 0;
        INFO(to_string(form) << " " << to_string(call.collective) << " " << call.algorithm << " n=" << n);
        std::shared_ptr<const CompiledPlan> ours;
        CompiledPlan theirs;
        try {
          theirs = cluster.planner().plan(cluster.key(call.collective, call.algorithm, eb, true, n, root, {}));
        } catch (const UsageError& e) {
          // A form that cannot take the call refuses it alike on both (lanes of
          // a collective plan_lanes does not decompose yet).
          CHECK(form == Form::lanes);
          CallKey key = options.call_key(call.collective, n, eb, true, root);
          key.algorithm = call.algorithm;
          CHECK_THROWS_AS(team.compiled_plan(key), UsageError);
          continue;
        }
        CallKey key = options.call_key(call.collective, n, eb, true, root);
        key.algorithm = call.algorithm;
        ours = team.compiled_plan(key);
        CHECK(testing::plan_difference(*ours, theirs) == "");
        if (form != Form::automatic) CHECK(theirs.form == form);
      }
  }
}

TEST_CASE("planner: lanes need nodes of equal size, and say so", "[planner]") {
  ClusterSpec spec;
  spec.ranks_per_node = {4, 2};
  spec.form = Form::lanes;
  spec.machine = Machine::synthetic(kNode);
  const EmulatedCluster cluster(spec);
  CHECK_THROWS_WITH(cluster.planner().plan(cluster.key(Collective::allreduce, "ring", 4, true, 100, 0, {})),
                    Catch::Contains("lanes form needs nodes of equal size"));
  // auto skips the form it cannot plan.
  spec.form = Form::automatic;
  const EmulatedCluster chooses(spec);
  CHECK(chooses.planner().plan(chooses.key(Collective::allreduce, "ring", 4, true, 100, 0, {})).form != Form::lanes);
}

TEST_CASE("planner: auto form chooses the fastest simulated form", "[planner]") {
  ClusterSpec spec;
  spec.ranks_per_node = {4, 4, 4, 4};
  spec.form = Form::automatic;
  spec.machine = Machine::synthetic(kNode);
  spec.model = CostModel::cluster();
  const EmulatedCluster cluster(spec);
  const CompiledPlan chosen =
      cluster.planner().plan(cluster.key(Collective::allreduce, "auto", 4, true, 1 << 16, 0, {}));
  const Picos best = simulate(chosen.plan, 16, cluster.simulation(4)).time;
  for (Form form : concrete_forms()) {
    CallKey key = cluster.key(Collective::allreduce, "auto", 4, true, 1 << 16, 0, {});
    key.form = form;
    try {
      const CompiledPlan other = cluster.planner().plan(key);
      INFO(to_string(form));
      CHECK(simulate(other.plan, 16, cluster.simulation(4)).time >= best);
    } catch (const UsageError&) {
    }
  }
}

TEST_CASE("plan cache: least recently used first out, arrival keys bounded per shape", "[planner]") {
  PlanCache<int> cache(3, 2);
  auto key = [](std::uint64_t count) {
    CallKey k;
    k.count = count;
    return k;
  };
  for (int i = 0; i < 3; ++i) cache.insert({key(static_cast<std::uint64_t>(i)), DType::int32, nullptr, i});
  REQUIRE(cache.find(key(0), DType::int32, nullptr));  // 0 is now the most recent
  CHECK_FALSE(cache.find(key(0), DType::float32, nullptr));
  cache.insert({key(3), DType::int32, nullptr, 3});  // evicts 1, the least recently used
  CHECK_FALSE(cache.find(key(1), DType::int32, nullptr));
  CHECK(cache.find(key(0), DType::int32, nullptr));
  CHECK(cache.size() == 3);
  PlanCache<int> keyed(100, 2);
  for (std::int64_t a = 0; a < 4; ++a) {
    CallKey k = key(7);
    k.arrival = arrival_key({0, a * 1000});
    keyed.insert({k, DType::int32, nullptr, static_cast<int>(a)});
  }
  CHECK(keyed.size() == 2);  // two keys of the shape stay: the latest
  CallKey latest = key(7);
  latest.arrival = arrival_key({0, 3000});
  CHECK(keyed.find(latest, DType::int32, nullptr));
}

TEST_CASE("config: hierarchy.form from the file, the environment and set(), default leader", "[planner][config]") {
  using Env = std::vector<std::pair<std::string, std::string>>;
  LoadArgs args;
  args.environment = Env{};
  CHECK(Config::load(args).options().hierarchy.form == Form::leader);
  CHECK(make_plan_options(Config::load(args).options()).form_in_effect() == Form::leader);
  args.environment = Env{{"COPSE_HIERARCHY_FORM", "lanes"}};
  Config config = Config::load(args);
  CHECK(config.options().hierarchy.form == Form::lanes);
  CHECK(config.value_text("hierarchy.form") == "lanes");
  CHECK(make_plan_options(config.options()).form == Form::lanes);
  config.set("hierarchy.form", "multi-leader");
  CHECK(config.options().hierarchy.form == Form::multi_leader);
  CHECK_THROWS_WITH(config.set("hierarchy.form", "hierarchical"), Catch::Contains("flat, leader, multi-leader"));
  args.environment = Env{{"COPSE_HIERARCHY_FORM", "sideways"}};
  CHECK_THROWS_WITH(Config::load(args), Catch::Contains("COPSE_HIERARCHY_FORM"));
  // The deprecated flag still means multi-leader under the default form.
  args.environment = Env{{"COPSE_HIERARCHY_MULTI_LEADER", "true"}};
  CHECK(make_plan_options(Config::load(args).options()).form_in_effect() == Form::multi_leader);
  CHECK(make_team_options(Config::load(args).options(), std::vector<int>{2}).form_in_effect() == Form::multi_leader);
}
