// The extended cost model (common/cost_model.hpp): closed forms of the shared
// network interface and of LogGP timing, the group level, Hockney as the
// special case it was, and the emulator's virtual times equal to the
// simulator's under every option.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "emulator/emulator.hpp"
#include "plan/hierarchical.hpp"

using namespace copse;

namespace {

constexpr double kL = 1e-6, kG = 1e-9, kNic = 4e-9, kO = 3e-7;  // whole picoseconds: exact

// Ranks 0..k-1 (node 0) each send `n` elements to rank k+i (node 1) in one step.
SchedulePlan pairs_plan(int k, std::uint64_t n) {
  return [k, n](int r) -> RankSchedule {
    Step s;
    if (r < k)
      s.send = Transfer{r + k, 0, n};
    else
      s.recv = Transfer{r - k, 0, n};
    co_yield s;
  };
}

// Rank 0 receives from ranks 1..f in turn, combining right (a reduce to 0).
RankSchedule fan_in_rank(int f, std::uint64_t n, int r) {
  if (r == 0) {
    for (int c = 1; c <= f; ++c) {
      Step s;
      s.recv = Transfer{c, 0, n};
      s.combine = Combine::right;
      co_yield s;
    }
  } else {
    Step s;
    s.send = Transfer{0, 0, n};
    co_yield s;
  }
}
SchedulePlan fan_in_plan(const Shape& shape) {
  return [f = shape.ranks - 1, n = shape.count](int r) { return fan_in_rank(f, n, r); };
}

Picos ps(double seconds) { return to_picos(seconds); }

}  // namespace

TEST_CASE("shared interface: k concurrent off-node messages of n bytes take k n beta_nic, not n beta_nic",
          "[cost_model]") {
  const std::uint64_t n = 100000;
  for (int k : {1, 2, 3, 8}) {
    SimulationOptions o;
    o.layout = RankMap::uniform(2 * k, k);
    o.model = CostModel({LinkCost{2e-7, 1e-10}, LinkCost{kL, kG}}, 0, Ports::bidirectional);
    INFO("k = " << k);
    // A private port per rank (no interface): every message at the link's speed.
    CHECK(simulate(pairs_plan(k, n), 2 * k, o).time == ps(kL) + ps(kG * n));
    o.model.with_nic(NicCost{kNic, 1});
    CHECK(simulate(pairs_plan(k, n), 2 * k, o).time == ps(kL) + ps(kNic * n * k));
    // k rails: each message has a lane of its own.
    o.model.with_nic(NicCost{kNic, k});
    CHECK(simulate(pairs_plan(k, n), 2 * k, o).time == ps(kL) + ps(kNic * n));
    // A lane faster than one rank's link: the link is the limit.
    o.model.with_nic(NicCost{kG / 4, 1});
    CHECK(simulate(pairs_plan(k, n), 2 * k, o).time == ps(kL) + ps(kG * n * std::max(1.0, k / 4.0)));
  }
}

TEST_CASE("shared interface: the load counts a node's off-node talkers in this schedule", "[cost_model]") {
  const RankMap layout = RankMap::uniform(8, 4);
  const NicLoad load = measure_nic_load(pairs_plan(4, 10), 8, layout);
  CHECK(load.senders == std::vector<int>{4, 0});
  CHECK(load.receivers == std::vector<int>{0, 4});
  // A single leader per node: one talker.
  const NicLoad ring =
      measure_nic_load(find_algorithm(Collective::allreduce, "ring").plan(Shape{8, 64, 1, 0}), 8, layout);
  CHECK(ring.senders == std::vector<int>{1, 1});
  CHECK(ring.receivers == std::vector<int>{1, 1});
}

TEST_CASE("LogGP: a fan-in of f messages to one root costs L + (f+1) o + f G n, not f (L + G n)", "[cost_model]") {
  for (int f : {1, 2, 3, 7, 20})
    for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{8}, std::uint64_t{1000}}) {
      SimulationOptions o;
      o.model = CostModel::uniform(LinkCost{kL, kG, kO, 0}, 0, Ports::bidirectional);
      const Shape shape{f + 1, n, 1, 0};
      INFO("f = " << f << ", n = " << n);
      CHECK(simulate(fan_in_plan(shape), f + 1, o).time == f * ps(kL + kG * n));  // Hockney
      o.model.with_timing(Timing::loggp);
      CHECK(simulate(fan_in_plan(shape), f + 1, o).time == ps(kL) + (f + 1) * ps(kO) + f * ps(kG * n));
      // A gap larger than o + G n spaces the receives by g.
      const double g = 2e-6;
      o.model = CostModel::uniform(LinkCost{kL, kG, kO, g}, 0, Ports::bidirectional).with_timing(Timing::loggp);
      CHECK(simulate(fan_in_plan(shape), f + 1, o).time ==
            std::max(ps(kL) + 2 * ps(kO) + ps(kG * n), ps(g)) + (f - 1) * ps(g));
    }
}

TEST_CASE("LogGP: an eager sender is free after o + G n, before its receiver is done", "[cost_model]") {
  const CostModel m = CostModel::uniform(LinkCost{kL, kG, kO, 0}, 0, Ports::bidirectional).with_timing(Timing::loggp);
  const RankMap layout = RankMap::uniform(2, 1);
  const TransferEnds e = m.transfer_ends(layout, 0, 1, 1000, 0, 0);
  CHECK(e.send_end == ps(kO) + ps(kG * 1000));
  CHECK(e.recv_end == ps(kO) + ps(kG * 1000) + ps(kL) + ps(kO));
  // A receiver that arrives late pays its overhead and the stream from then on.
  const TransferEnds late = m.transfer_ends(layout, 0, 1, 1000, 0, ps(1e-3));
  CHECK(late.recv_end == ps(1e-3) + ps(kO) + ps(kG * 1000));
}

TEST_CASE("Hockney stays the rendezvous rule: both ends at max(ready) + alpha + beta n", "[cost_model]") {
  const CostModel m({LinkCost{2e-7, 5e-11}, LinkCost{1.5e-6, 1e-10}}, 2.5e-11, Ports::bidirectional);
  const RankMap layout = RankMap::uniform(4, 2);
  for (auto [src, dst, level] : {std::tuple{0, 1, 0}, std::tuple{1, 2, 1}}) {
    const TransferEnds e = m.transfer_ends(layout, src, dst, 4096, 100, 7000);
    CHECK(e.send_end == 7000 + m.transfer(level, 4096));
    CHECK(e.recv_end == e.send_end);
  }
}

TEST_CASE("group level: same group, same node and other node have their own costs", "[cost_model]") {
  CostModel m({LinkCost{1e-8, 1e-12}, LinkCost{1e-7, 1e-11}, LinkCost{1e-6, 1e-10}}, 0, Ports::bidirectional);
  CHECK_THROWS_AS(CostModel().with_group_size(4), UsageError);
  m.with_group_size(4);
  const RankMap layout = RankMap::uniform(16, 8);
  CHECK(m.level_of(layout, 0, 3) == 0);
  CHECK(m.level_of(layout, 3, 4) == 1);
  CHECK(m.level_of(layout, 7, 8) == 2);
  CHECK(m.level_of(layout, 12, 15) == 0);
  CHECK(m.transfer_ends(layout, 4, 5, 1000, 0, 0).recv_end == m.transfer(0, 1000));
  CHECK(m.transfer_ends(layout, 3, 4, 1000, 0, 0).recv_end == m.transfer(1, 1000));
  CHECK(m.transfer_ends(layout, 3, 12, 1000, 0, 0).recv_end == m.transfer(2, 1000));
}

TEST_CASE("cost model options refuse bad values", "[cost_model]") {
  CHECK_THROWS_AS(CostModel().with_nic(NicCost{-1e-9, 1}), UsageError);
  CHECK_THROWS_AS(CostModel().with_nic(NicCost{1e-9, 0}), UsageError);
  CHECK_THROWS_AS(CostModel({LinkCost{1e-6, 1e-9, -1e-7, 0}}), UsageError);
}

TEST_CASE("concurrency: emulator = simulator under LogGP, a shared interface and a group level", "[cost_model]") {
  CostModel loggp(
      {LinkCost{5e-8, 2e-11, 1e-8, 0}, LinkCost{2e-7, 5e-11, 5e-8, 1e-7}, LinkCost{1.5e-6, 1e-10, 4e-7, 5e-7}}, 2.5e-11,
      Ports::bidirectional, 1e-8);
  loggp.with_timing(Timing::loggp).with_nic(NicCost{2.5e-10, 2}).with_group_size(2);
  CostModel hockney_nic({LinkCost{2e-7, 5e-11}, LinkCost{1.5e-6, 1e-10}}, 2.5e-11, Ports::unidirectional);
  hockney_nic.with_nic(NicCost{3e-10, 1});
  const ReduceOp op = builtin_op("affine", DType::int32);
  const ReduceOp sum = builtin_op("sum", DType::float32);
  for (const CostModel& model : {loggp, hockney_nic})
    for (const AlgorithmInfo& algo : algorithms()) {
      if (algo.collective != Collective::allreduce && algo.collective != Collective::reduce) continue;
      const int p = 12;
      const Shape shape{p, 1001, algo.pipelined ? 4 : 1, 5};
      EmulatorConfig c;
      c.layout = RankMap::uniform(p, 4);
      c.model = model;
      c.wait_timeout = std::chrono::milliseconds(20000);
      SimulationOptions o;
      o.model = model;
      o.layout = c.layout;
      const ReduceOp& used = algo.needs_commutative ? sum : op;
      o.element_bytes = used.element_bytes;
      SimulationResult sim;
      try {
        sim = simulate(algo.plan(shape), p, o);
      } catch (const ScheduleError&) {
        continue;  // not deadlock-free with these ports
      }
      INFO(algo.name << (model.timing() == Timing::loggp ? " loggp" : " hockney"));
      const EmulationResult e = emulate(algo, shape, used, c);
      CHECK(e.verified);
      CHECK(e.virtual_finish == sim.finish);
    }
}
