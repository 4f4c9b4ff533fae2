// The studies as library code (tools/study_*.hpp, `copse study ...`): their
// points equal a direct simulation of the same schedule, their forms parse
// and print back, their bad input is a UsageError, and the points runner
// reports every point once and passes a point's failure on.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <stdexcept>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "plan/autotune.hpp"
#include "tools/study_bjorndalen.hpp"
#include "tools/study_depth.hpp"
#include "tools/study_flat_hier.hpp"
#include "tools/study_support.hpp"
#include "tools/study_traff.hpp"

using namespace copse;

namespace test_studies {

// `algorithm`'s allreduce of `count` int32 on `nodes` x `per_node` ranks under
// `model` at `blocks`: the simulator's time, computed here without the study.
Picos direct_time(const char* algorithm, Collective collective, int nodes, int per_node, std::uint64_t count,
                  int blocks, const CostModel& model) {
  const AlgorithmInfo& info = find_algorithm(collective, algorithm);
  SimulationOptions options;
  options.model = model;
  options.layout = RankMap::uniform(nodes * per_node, per_node);
  options.element_bytes = 4;
  const Shape shape{nodes * per_node, count, blocks, 0};
  return simulate(info.plan(shape), nodes * per_node, options).time;
}

}  // namespace test_studies

TEST_CASE(
    "studies: the points runner announces its total, reports each point once, in any thread, and passes a failure on") {
  for (bool parallel : {false, true}) {
    std::mutex mutex;
    std::multiset<std::uint64_t> reported;
    std::vector<std::atomic<int>> ran(37);
    for_each_point(
        ran.size(), [&](std::size_t i) { ++ran[i]; },
        [&](std::uint64_t done, std::uint64_t total) {
          CHECK(total == 37);
          const std::lock_guard lock(mutex);
          reported.insert(done);
        },
        parallel);
    CHECK(std::all_of(ran.begin(), ran.end(), [](const std::atomic<int>& n) { return n == 1; }));
    // 0 of 37 before any point ends (the line shows the total at once), then 1..37.
    CHECK(reported.size() == 38);
    CHECK(reported.count(0) == 1);
    CHECK(*reported.rbegin() == 37);
    CHECK(std::set<std::uint64_t>(reported.begin(), reported.end()).size() == 38);
    CHECK_THROWS_AS(for_each_point(
                        10,
                        [](std::size_t i) {
                          if (i == 3) throw UsageError("point 3");
                        },
                        {}, parallel),
                    UsageError);
  }
  for_each_point(0, [](std::size_t) { FAIL("no point to run"); }, {});
}

TEST_CASE("studies: depth's flat points are the simulator's time at the chosen blocks") {
  DepthStudyOptions o;
  o.nodes = {2, 3};
  o.ranks_per_node = 4;
  o.bytes = {8, 4096};
  o.forms = {parse_depth_form("binomial"), parse_depth_form("dual-root"), parse_depth_form("chain"),
             parse_depth_form("groups-2"), parse_depth_form("lanes")};
  o.linear_limit = 8;
  std::uint64_t last_done = 0, last_total = 0;
  const DepthStudy study = run_depth_study(o, [&](std::uint64_t done, std::uint64_t total) {
    last_done = std::max(last_done, done);
    last_total = total;
  });
  CHECK(study.points.size() == 2 * 2 * 5 - 2);  // the chain stops beyond 8 ranks
  CHECK(last_done == study.points.size());
  CHECK(last_total == study.points.size());
  CHECK(study.find(2, 3, 8) == nullptr);
  for (const DepthPoint& p : study.points) {
    INFO(o.forms[p.form].name << " on " << p.nodes << " nodes, " << p.bytes << " B");
    CHECK(p.time > 0);
    if (o.forms[p.form].group == 0)
      CHECK(p.time == test_studies::direct_time(o.forms[p.form].algorithm.c_str(), Collective::allreduce, p.nodes, 4,
                                                p.bytes / 4, p.blocks, o.model));
  }
  CHECK(o.forms[3].label(8) == "groups of 2 (3 levels), binomial");
  CHECK(parse_depth_form("multi-leader-4").label(8) == "groups of 4, multi-leader (2 levels), binomial");
  CHECK(parse_depth_form("groups-8").label(8) == "groups of 8 (1 level), binomial");
  CHECK_THROWS_AS(parse_depth_form("groups-1"), UsageError);
  CHECK_THROWS_AS(parse_depth_form("tree"), UsageError);
  o.bytes = {6};
  CHECK_THROWS_AS(run_depth_study(o), UsageError);
  o.bytes = {8};
  o.forms = {parse_depth_form("groups-8")};  // larger than a node of 4
  CHECK_THROWS_AS(run_depth_study(o), UsageError);
}

TEST_CASE("studies: flat-hier forms parse and print back, its emulated points are verified") {
  for (const HierarchyForm& form : default_flat_hier_forms())
    CHECK(flat_hier_form_name(parse_flat_hier_form(flat_hier_form_name(form))) == flat_hier_form_name(form));
  CHECK(default_flat_hier_forms().size() == 16);
  CHECK(parse_flat_hier_form("leader:rabenseifner").group == 0);
  for (const char* bad : {"ring", "flat:ring:4", "lanes:ring:2", "leader:ring:1", "auto:ring", "flat:nosuch"})
    CHECK_THROWS_AS(parse_flat_hier_form(bad), UsageError);
  FlatHierStudyOptions o;
  o.clusters = {{2, 4}, {4, 2}};
  o.bytes = {64};
  o.forms = {parse_flat_hier_form("flat:ring"), parse_flat_hier_form("lanes:ring"),
             parse_flat_hier_form("leader:rabenseifner:2")};
  o.emulate_up_to = 8;
  const FlatHierStudy study = run_flat_hier_study(o);
  REQUIRE(study.points.size() == 6);
  CHECK(study.ok());
  for (const FlatHierPoint& p : study.points) {
    CHECK(p.emulated);
    CHECK(p.time > 0);
  }
  // Flat ring on 2 x 4: the simulator's time at the same blocks.
  CHECK(study.points[0].time ==
        test_studies::direct_time("ring", Collective::allreduce, 2, 4, 16, study.points[0].blocks, o.model));
}

TEST_CASE("studies: traff's rows are the simulator's, with his blocks and the best ones") {
  TraffStudyOptions o;
  o.nodes = 3;
  o.ranks_per_node = 2;
  o.counts = {0, 5, 40000};
  const TraffStudy study = run_traff_study(o);
  REQUIRE(study.rows.size() == 3);
  const TraffRow& big = study.rows[2];
  CHECK(big.tree_paper.blocks == 3);  // ceil(40000 / 16000)
  CHECK(big.tree_paper.time ==
        test_studies::direct_time("binary-tree", Collective::allreduce, 3, 2, 40000, 3, o.model));
  CHECK(big.reduce_bcast.time == test_studies::direct_time("binomial", Collective::reduce, 3, 2, 40000, 1, o.model) +
                                     test_studies::direct_time("binomial", Collective::bcast, 3, 2, 40000, 1, o.model));
  Picos native = 0;
  for (const char* a : {"recursive-doubling", "rabenseifner", "ring"}) {
    const Picos t = test_studies::direct_time(a, Collective::allreduce, 3, 2, 40000, 1, o.model);
    if (native == 0 || t < native) native = t;
  }
  CHECK(big.native.time == native);
  // The best block count is no worse than his.
  CHECK(big.tree_auto.time <= big.tree_paper.time);
  CHECK(big.dual_auto.time <= big.dual_paper.time);
  // Without combining, less time.
  CHECK(study.dual_gamma0.time < big.dual_auto.time);
  o.counts = {};
  CHECK_THROWS_AS(run_traff_study(o), UsageError);
}

TEST_CASE("studies: Bjorndalen's configurations emulate at the simulator's time, in both models") {
  BjorndalenStudyOptions o;
  o.sweep_overheads = {10e-6};
  o.sweep_fractions = {0.25, 1.0};
  const BjorndalenStudy study = run_bjorndalen_study(o);
  CHECK(study.rows.size() == 8);
  CHECK(study.ok());
  REQUIRE(study.sweeps.size() == 2);
  for (const auto& sweep : study.sweeps) {
    CHECK(sweep.orders.size() == 2);
    for (const auto& order : sweep.orders)
      CHECK(std::is_permutation(order.begin(), order.end(), std::string("472").begin()));
  }
  o.sweep_fractions = {0};
  CHECK_THROWS_AS(run_bjorndalen_study(o), UsageError);
}
