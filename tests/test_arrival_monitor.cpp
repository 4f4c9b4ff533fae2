// Arrival estimates (plan/arrival_monitor.hpp, Proficz 2018 §3): the
// estimator's arithmetic, the warm-up, the agreement (every rank gets the
// same vector), the plan keys; and the thread Comm's edge(): an arrival-aware
// allreduce with one rank deliberately late stays correct (against a
// sequential reference) and is planned with that rank last.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/arrival_monitor.hpp"
#include "plan/hierarchical.hpp"
#include "runtime/comm.hpp"
#include "support.hpp"

using namespace copse;

TEST_CASE("arrival estimator: linear extrapolation from the edge, corrected by what past phases took") {
  ArrivalEstimator e(0.5);
  e.begin(1000);
  CHECK(e.predicted() == 1000);  // no edge yet: the phase's begin
  CHECK(e.edge(1050, 0.5));
  CHECK_FALSE(e.edge(1060, 0.8));  // only a phase's first edge counts
  CHECK(e.predicted() == 1100);
  e.arrive(1120);  // took 120 where 100 was extrapolated
  CHECK(e.correction() == Approx(1.2));
  e.begin(2000);
  e.edge(2025, 0.25);            // extrapolated: 100
  CHECK(e.predicted() == 2120);  // x 1.2
  e.arrive(2100);                // seen 1.0: 0.5 x 1.2 + 0.5 x 1.0
  CHECK(e.correction() == Approx(1.1));
  e.begin(3000);
  e.arrive(3500);  // no edge: nothing learned
  CHECK(e.correction() == Approx(1.1));
  for (double bad : {0.0, -0.5, 1.5}) CHECK_THROWS_AS(e.edge(3600, bad), UsageError);
}

TEST_CASE("arrival monitor: the warm-up only collects, one value published per allreduce") {
  ArrivalOptions o;
  o.warmup = 2;
  ArrivalMonitor m(o, true);
  m.returned(0, false);
  for (std::int64_t call = 0; call < 2; ++call) {
    CHECK_FALSE(m.planned_by_arrival(m.call()));
    CHECK_FALSE(m.edge(call * 1000 + 50, 0.5));
    CHECK_FALSE(m.arrive(call * 1000 + 100));
    m.returned(call * 1000 + 110, true);
  }
  // The estimator learned during the warm-up: phases of 100 after 110 ... 1110.
  CHECK(m.call() == 2);
  CHECK(m.planned_by_arrival(2));
  // Call 2: the edge publishes its prediction, nothing more is published.
  const auto first = m.edge(2050, 0.5);
  REQUIRE(first);
  CHECK(*first > 2050);
  CHECK_FALSE(m.edge(2060, 0.9));
  CHECK_FALSE(m.arrive(2100));
  m.returned(2110, true);
  // Call 3, no edge: the arrival itself is published.
  const auto second = m.arrive(2500);
  REQUIRE(second);
  CHECK(*second == 2500);
  m.returned(2510, true);
  // An algorithm that is not arrival-aware never publishes.
  ArrivalMonitor off(o, false);
  for (int call = 0; call < 4; ++call) {
    CHECK_FALSE(off.edge(call * 10 + 5, 0.5));
    CHECK_FALSE(off.arrive(call * 10 + 9));
    off.returned(call * 10 + 10, true);
  }
  CHECK_THROWS_AS(check_arrival_options(ArrivalOptions{-1, 0.5, 8, 0}), UsageError);
  CHECK_THROWS_AS(check_arrival_options(ArrivalOptions{1, 0.0, 8, 0}), UsageError);
  CHECK_THROWS_AS(check_arrival_options(ArrivalOptions{1, 0.5, 0, 0}), UsageError);
}

TEST_CASE("arrival keys: order and coarse gaps, jitter below the resolution is simultaneous arrival") {
  const Picos ms = 1'000'000'000;
  const ArrivalKey a = arrival_key({5 * ms, 5 * ms + 3, 105 * ms, 5 * ms + 7}, 1000);
  CHECK(a.level == std::vector<std::int32_t>{0, 0, ArrivalKey::kLevels, 0});
  // The same pattern with some jitter: the same key, hence the same plan.
  CHECK(arrival_key({9 * ms + 11, 9 * ms, 109 * ms + 2000, 9 * ms + 900}, 1000) == a);
  const std::vector<Picos> back = arrival_of(a);
  REQUIRE(back.size() == 4);
  CHECK(back[0] == 0);
  CHECK(back[2] > 90 * ms);
  CHECK(back[2] < 110 * ms);
  // Everything within the resolution: all together.
  const ArrivalKey together = arrival_key({10, 500, 20}, 1000);
  CHECK(together.scale == -1);
  CHECK(arrival_of(together) == std::vector<Picos>{0, 0, 0});
  // Half way: level kLevels / 2.
  CHECK(arrival_key({0, 50 * ms, 100 * ms}).level[1] == ArrivalKey::kLevels / 2);
}

TEST_CASE("arrival board: every rank gets the identical vector of every call") {
  const int p = 5, calls = 20;
  ArrivalBoard board(p);
  std::vector<std::vector<std::vector<Picos>>> seen(p, std::vector<std::vector<Picos>>(calls));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      for (int k = 0; k < calls; ++k) {
        if ((r + k) % 3 == 0) std::this_thread::yield();
        board.publish(r, k, Picos{1000} * k + r * r);
        board.wait(k, seen[r][k], [] {});
      }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < calls; ++k) {
    std::vector<Picos> expected;
    for (int r = 0; r < p; ++r) expected.push_back(Picos{1000} * k + r * r);
    for (int r = 0; r < p; ++r) CHECK(seen[r][k] == expected);
  }
  // A wait gives up when its check throws.
  ArrivalBoard lonely(2);
  lonely.publish(0, 0, 1);
  std::vector<Picos> out;
  CHECK_THROWS_AS(lonely.wait(0, out, [] { throw TimeoutError("nobody came"); }), TimeoutError);
}

namespace {

constexpr const char* kMonitorMachine = "package:1 core:2 pu:1";

// `layout` ranks per node; the allreduce `algorithm`.
TeamOptions arrival_team(const std::vector<int>& layout, const std::string& algorithm, int warmup, std::size_t plans) {
  TeamOptions o;
  for (int k : layout) o.nodes.push_back(NodeSpec{Machine::synthetic(kMonitorMachine), k, {}});
  o.allreduce = algorithm;
  o.arrival.warmup = warmup;
  o.arrival.plans = plans;
  o.arrival.resolution = 2'000'000'000;  // 2 ms: the base phases' jitter is simultaneous arrival
  o.wait_timeout = std::chrono::milliseconds(60000);
  return o;
}

// Iterations of a computation phase (base, or base + delay for the late
// rank, with edge(0.5) half way) and an allreduce of int64 sums. Checks every
// result against the sequential sum; returns what each rank's allreduces
// were planned from ([rank][iteration]).
std::vector<std::vector<std::vector<Picos>>> run_late(Team& team, int iterations, const std::function<int(int)>& late,
                                                      std::chrono::milliseconds delay, std::size_t count) {
  const int p = team.size();
  const auto base = std::chrono::milliseconds(1);
  std::vector<std::vector<std::vector<Picos>>> planned(p, std::vector<std::vector<Picos>>(iterations));
  std::vector<std::exception_ptr> errors(p);
  std::vector<int> mismatches(p, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      try {
        Comm& comm = team.comm(r);
        std::vector<std::int64_t> x(count), y(count);
        const ReduceOp sum = builtin_op("sum", DType::int64);
        for (int it = 0; it < iterations; ++it) {
          for (std::size_t i = 0; i < count; ++i)
            x[i] = static_cast<std::int64_t>((r + 1) * 1000003 + it * 7919 + static_cast<int>(i) * (r + 3));
          const auto phase = base + (late(it) == r ? delay : std::chrono::milliseconds(0));
          std::this_thread::sleep_for(phase / 2);
          comm.edge(0.5);
          std::this_thread::sleep_for(phase / 2);
          comm.allreduce(x.data(), y.data(), count, sum);
          for (std::size_t i = 0; i < count; ++i) {
            std::int64_t want = 0;
            for (int q = 0; q < p; ++q)
              want += static_cast<std::int64_t>((q + 1) * 1000003 + it * 7919 + static_cast<int>(i) * (q + 3));
            if (y[i] != want) ++mismatches[r];
          }
          planned[r][it] = comm.planned_arrival();
        }
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) {
    INFO("rank " << r);
    CHECK(testing::message_of(errors[r]) == "");
    CHECK(mismatches[r] == 0);
  }
  return planned;
}

// Whether `v` has its strict maximum at `rank`.
bool latest_is(const std::vector<Picos>& v, int rank) {
  for (std::size_t r = 0; r < v.size(); ++r)
    if (static_cast<int>(r) != rank && v[r] >= v[static_cast<std::size_t>(rank)]) return false;
  return true;
}

}  // namespace

TEST_CASE("thread Comm edge(): one rank late, SLT and PRR planned with it last, results right") {
  const int warmup = 2, iterations = 5, p = 4;
  for (const std::string algorithm : {"slt", "prr"}) {
    INFO(algorithm);
    Team team(arrival_team(std::vector<int>(p, 1), algorithm, warmup, 8));
    const auto planned = run_late(
        team, iterations, [](int) { return 1; }, std::chrono::milliseconds(120), 1000);
    for (int it = 0; it < iterations; ++it) {
      INFO("iteration " << it);
      for (int r = 0; r < p; ++r) {
        // The warm-up runs the default algorithm; then every rank planned
        // from the same vector, the late rank last.
        CHECK(planned[r][it].empty() == (it < warmup));
        CHECK(planned[r][it] == planned[0][it]);
      }
      if (it >= warmup) CHECK(latest_is(planned[0][it], 1));
    }
  }
}

TEST_CASE("thread Comm edge(): the late rank moves, one plan kept per shape, over nodes of two ranks") {
  // plans = 1: every new pattern evicts the last one (and its rank entries);
  // each rank's cache and the team's stay bounded, results stay right.
  const int warmup = 1, iterations = 5;
  Team team(arrival_team({2, 2, 2}, "slt", warmup, 1));
  const auto late = [](int it) { return (it * 2 + 1) % 6; };
  const auto planned = run_late(team, iterations, late, std::chrono::milliseconds(120), 777);
  for (int it = warmup; it < iterations; ++it) {
    INFO("iteration " << it);
    for (int r = 0; r < team.size(); ++r) CHECK(planned[r][it] == planned[0][it]);
    CHECK(latest_is(planned[0][it], late(it)));
  }
}

TEST_CASE("thread Comm edge(): other algorithms ignore it, bad fractions are refused") {
  Team team(arrival_team({1, 1}, "ring", 0, 8));
  const auto planned = run_late(
      team, 2, [](int) { return 0; }, std::chrono::milliseconds(5), 10);
  for (const auto& rank : planned)
    for (const auto& call : rank) CHECK(call.empty());
  CHECK_THROWS_AS(team.comm(0).edge(0), UsageError);
  CHECK_THROWS_AS(team.comm(0).edge(2), UsageError);
}

TEST_CASE("hierarchical SLT and PRR order the nodes by their ranks' predicted arrivals") {
  // Three nodes of two ranks; rank 3 (a member, not the leader, of the
  // middle node) is late. Planned from the predictions, the middle node goes
  // last among the off-node ranks, and the simulated allreduce ends earlier
  // than the same algorithm planned blind (the nodes in rank order).
  Team team(arrival_team({2, 2, 2}, "slt", 0, 8));
  const auto plan = std::make_shared<const HierarchyPlan>(team.plan());
  const int p = plan->ranks;
  SimulationOptions o;
  o.layout = RankMap::from_nodes(plan->node_of);
  o.element_bytes = 8;
  o.start.assign(static_cast<std::size_t>(p), 0);
  o.start[3] = to_picos(2e-3);
  for (const char* name : {"slt", "prr"}) {
    INFO(name);
    const AlgorithmInfo& alg = find_algorithm(Collective::allreduce, name);
    const Shape blind{p, 1 << 14, 6, 0, planning_hints(o)};
    const Shape aware{p, 1 << 14, 6, 0, planning_hints(o, o.start)};
    const Picos t_blind = simulate(plan_hierarchical(plan, alg, blind), p, o).time;
    const Picos t_aware = simulate(plan_hierarchical(plan, alg, aware), p, o).time;
    CHECK(t_aware < t_blind);
  }
}

TEST_CASE("thread Comm edge(): a wait for a missing prediction is reported, naming the rank") {
  // Rank 1 makes no edge() and comes 300 ms late: the others wait for its
  // arrival (its value) and report every 40 ms whom they wait for.
  TeamOptions o = arrival_team({1, 1, 1}, "prr", 0, 8);
  o.wait_report = std::chrono::milliseconds(40);
  std::mutex mutex;
  std::vector<std::string> reports;
  o.on_wait_report = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(m);
  };
  Team team(o);
  std::vector<std::thread> threads;
  std::vector<std::int64_t> result(3, 0);
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::int64_t x = r + 1;
      team.comm(r).allreduce(&x, &result[static_cast<std::size_t>(r)], 1, builtin_op("sum", DType::int64));
    });
  for (auto& t : threads) t.join();
  CHECK(result == std::vector<std::int64_t>{6, 6, 6});
  std::lock_guard<std::mutex> lock(mutex);
  REQUIRE_FALSE(reports.empty());
  bool named = false;
  for (const auto& m : reports) named = named || m.find("arrival prediction") != std::string::npos;
  CHECK(named);
  // Rank 1 is named in every such report; under load rank 0 or 2 may not
  // have arrived yet at the first one either ("rank(s) 0, 1").
  // The list is join(missing, ", ") (runtime/team_wait.cpp).
  constexpr std::string_view kList = "rank(s) ";
  for (const auto& m : reports) {
    const std::size_t at = m.find(kList);
    if (m.find("arrival prediction") == std::string::npos || at == std::string::npos) continue;
    const std::vector<std::string> late = split(std::string_view(m).substr(at + kList.size()), ',');
    INFO(m);
    CHECK(std::any_of(late.begin(), late.end(), [](const std::string& r) { return r == "1" || r == " 1"; }));
  }
}
