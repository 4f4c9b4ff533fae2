// The simulator's shortcut for the ring, whose chunks move one rank a step
// (algorithms/shift_plan.hpp): its profile over the diagonals must give every
// figure of the step-by-step run bit for bit, per-rank finish times included,
// with equal chunks (every rank alike) and unequal ones; and the fast
// per-message path (every pair of ranks alike) must agree with the general
// one.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/shift_plan.hpp"
#include "algorithms/simulator.hpp"
#include "tests/sim_compare.hpp"

using namespace copse;

namespace symmetric_sim_test {

SchedulePlan ring_plan(int p, std::uint64_t count) {
  Shape shape;
  shape.ranks = p;
  shape.count = count;
  return find_algorithm(Collective::allreduce, "ring").plan(shape);
}

// The plan wrapped so that simulate() sees neither its ShiftPlan nor its cursor.
SchedulePlan hidden(const SchedulePlan& plan) {
  return [plan](int rank) { return plan(rank); };
}

using testing::check_same;
using testing::symmetric_models;

void check_ring_shortcut(int p, std::uint64_t count) {
  const SchedulePlan plan = ring_plan(p, count);
  CHECK(shift_plan_of(plan) != nullptr);
  for (const CostModel& model : symmetric_models()) {
    INFO("p = " << p << ", count " << count << ", timing " << static_cast<int>(model.timing()) << ", alpha "
                << model.level(1).alpha);
    SimulationOptions o;
    o.model = model;
    o.element_bytes = 3;
    check_same(simulate(plan, p, o), simulate(hidden(plan), p, o));
  }
}

}  // namespace symmetric_sim_test

using namespace symmetric_sim_test;

TEST_CASE("the ring's symmetric shortcut gives the step-by-step figures", "[sim]") {
  for (int p : {1, 2, 3, 5, 7, 64})
    for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p), std::uint64_t(3 * p),
                                std::uint64_t(1000 * p), std::uint64_t(1000 * p + 1)})
      check_ring_shortcut(p, count);
}

// Unequal chunks: the shift profile (algorithms/shift_sim.cpp) against the
// step-by-step run, with fewer elements than ranks (void chunks, steps not
// yielded), a few more, and a remainder on either side of p/2.
TEST_CASE("the ring's shift profile gives the step-by-step figures", "[sim]") {
  for (int p : {2, 3, 5, 17, 100, 257})
    for (std::uint64_t count : {std::uint64_t{2}, std::uint64_t(p / 3 + 1), std::uint64_t(p - 1), std::uint64_t(p + 1),
                                std::uint64_t(5 * p + p / 2 + 1), std::uint64_t(7 * p - 1), std::uint64_t(100 * p + 3)})
      check_ring_shortcut(p, count);
}

// The step-by-step side runs 2(p-1)p transfers per model: at p = 4099 a
// minute and a half of the default suite's budget for what p = 1000 already
// shows (no path of the simulator depends on p's size), so 4099 is [slow].
TEST_CASE("the ring's symmetric shortcut gives the step-by-step figures at large p", "[exhaustive]") {
  for (std::uint64_t count : {std::uint64_t{1000}, std::uint64_t{7000}}) check_ring_shortcut(1000, count);
}

TEST_CASE("the ring's symmetric shortcut gives the step-by-step figures at p = 4099", "[slow]") {
  for (std::uint64_t count : {std::uint64_t{4099}, std::uint64_t{7 * 4099}}) check_ring_shortcut(4099, count);
}

// Where the promise's conditions fail the plan runs step by step, and the
// figures are still those of the hidden plan.
TEST_CASE("the ring outside the shortcut's conditions simulates step by step", "[sim]") {
  const int p = 12;
  const SchedulePlan plan = ring_plan(p, 1200);
  REQUIRE(shift_plan_of(plan));
  SimulationOptions uni;
  uni.model = CostModel::uniform({1e-6, 1e-9}, 5e-10, Ports::unidirectional);
  SimulationOptions arrival;
  for (int r = 0; r < p; ++r) arrival.start.push_back(static_cast<Picos>((r * 7) % 5) * 100000);
  SimulationOptions nodes;
  nodes.layout = RankMap::uniform(p, 4);
  for (const SimulationOptions* o : {&uni, &arrival, &nodes}) {
    const SimulationResult shortcut = simulate(plan, p, *o), stepwise = simulate(hidden(plan), p, *o);
    check_same(shortcut, stepwise);
  }
}

// At p = 2^20 the step-by-step ring would run 2^41 transfers; the shortcut's
// time is the Hockney sum: 2(p-1) transfers of one chunk and p-1 combines.
TEST_CASE("the ring at p = 2^20 simulates through its shortcut", "[sim]") {
  const int p = 1 << 20;
  const std::uint64_t chunk = 5, bytes = 4;
  SimulationOptions o;
  o.model = CostModel::uniform({1e-6, 1e-10}, 3e-11, Ports::bidirectional);
  o.element_bytes = bytes;
  const SimulationResult r = simulate(ring_plan(p, chunk * p), p, o);
  const Picos transfer = o.model.transfer(1, chunk * bytes), combine = o.model.combine(chunk * bytes);
  CHECK(r.time == 2 * (p - 1) * transfer + (p - 1) * combine);
  CHECK(r.messages == 2 * std::uint64_t(p) * (p - 1));
  CHECK(r.max_steps == 2 * std::uint64_t(p - 1));
  CHECK(r.slowest_rank == 0);
  CHECK(r.finish.size() == std::size_t(p));
  CHECK(r.finish.back() == r.time);
}

// The case: more ranks than elements, so most chunks are void and
// most steps not yielded; step by step it would run 2^43 transfers.
TEST_CASE("the ring at p = 2^22 with fewer elements than ranks simulates through its shortcut", "[sim]") {
  const int p = 1 << 22;
  const std::uint64_t count = 1 << 20;
  const SimulationResult r = simulate(ring_plan(p, count), p, SimulationOptions{});
  CHECK(r.messages == 2 * std::uint64_t(p - 1) * count);
  CHECK(r.elements_moved == r.messages);
  CHECK(r.max_elements_received == 2 * count);  // a rank past the chunks receives every one twice
  CHECK(r.finish.size() == std::size_t(p));
  CHECK(r.time > 0);
}
