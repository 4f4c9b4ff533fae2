// The simulator's lockstep run (algorithms/lockstep_sim.hpp) against its
// step-by-step run: the cursors that promise lockstep keep the promise, both
// runs give every figure alike, and a cursor that breaks the promise is run
// step by step, which names its fault.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/lockstep_sim.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/step_cursor.hpp"
#include "common/error.hpp"
#include "tests/sim_compare.hpp"

using namespace copse;

namespace lockstep_test {

const char* const kLockstepAlgorithms[] = {"two-tree", "rabenseifner", "recursive-doubling", "dual-root"};

SchedulePlan plan_of(const char* algorithm, int ranks, std::uint64_t count, int blocks) {
  Shape shape;
  shape.ranks = ranks, shape.count = count, shape.blocks = blocks;
  return find_algorithm(Collective::allreduce, algorithm).plan(shape);
}

// A plan's cursor without its lockstep promise: the simulator walks it rank
// by rank.
class RankByRank final : public StepCursor {
 public:
  explicit RankByRank(std::shared_ptr<const StepCursor> inner) : inner_(std::move(inner)) {}
  bool seek(int rank, std::uint32_t& position, Step& step) const override { return inner_->seek(rank, position, step); }
  bool seek_move(int rank, std::uint32_t& position, StepMove& move) const override {
    return inner_->seek_move(rank, position, move);
  }
  Step at(int rank, std::uint32_t position) const override { return inner_->at(rank, position); }

 private:
  std::shared_ptr<const StepCursor> inner_;
};

SchedulePlan rank_by_rank(const SchedulePlan& plan) {
  const auto* c = plan.target<CursorPlan>();
  REQUIRE(c);
  return CursorPlan{c->coroutines, std::make_shared<const RankByRank>(c->cursor)};
}

// The options the lockstep run applies to: every pair of ranks alike
// (sim_compare.hpp's models), every rank at once or arriving late.
std::vector<SimulationOptions> plain_options(int ranks) {
  std::vector<SimulationOptions> all;
  for (const CostModel& model : testing::symmetric_models()) {
    all.emplace_back().model = model;
    if (all.size() % 2 == 0)
      for (int r = 0; r < ranks; ++r) all.back().start.push_back(static_cast<Picos>((r * 7919) % 13) * 250000);
  }
  return all;
}

using testing::check_same;

}  // namespace lockstep_test

using namespace lockstep_test;

TEST_CASE("lockstep cursors keep their promise", "[sim][exhaustive]") {
  for (const char* algorithm : kLockstepAlgorithms)
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17, 31, 33, 64, 100, 127, 129, 1000, 4097})
      for (int blocks : {1, 3, 16})
        for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{1000}}) {
          INFO(algorithm << ", p = " << p << ", " << blocks << " blocks, " << count << " elements");
          const SchedulePlan plan = plan_of(algorithm, p, count, blocks);
          const StepCursor* cursor = cursor_of(plan);
          REQUIRE(cursor);
          REQUIRE(cursor->lockstep());
          const SimulationOptions o;
          const PairCost pair = p > 1 ? o.model.pair_cost(RankMap::uniform(p, 0), 0, 1) : PairCost{};
          // A broken promise gives no result (and the run goes step by step).
          CHECK(simulate_lockstep(*cursor->lockstep(), p, o, pair).has_value());
        }
}

TEST_CASE("lockstep and step-by-step runs give the same figures", "[sim][exhaustive]") {
  for (const char* algorithm : kLockstepAlgorithms)
    for (int p : {1, 2, 3, 5, 17, 100, 1000, 4099})
      for (int blocks : {1, 7, 16}) {
        const SchedulePlan plan = plan_of(algorithm, p, 100000, blocks);
        const SchedulePlan slow = rank_by_rank(plan);
        for (const SimulationOptions& o : plain_options(p)) {
          INFO(algorithm << ", p = " << p << ", " << blocks << " blocks, " << o.start.size() << " offsets");
          check_same(simulate(plan, p, o), simulate(slow, p, o));
        }
      }
}

// The simulator reads a position that names its ranks through moves_of
// alone; moves_at, over every rank (or place), must agree: each named
// rank's move, and a void move for every other.
TEST_CASE("moves_at agrees with moves_of over the ranks a position names", "[sim]") {
  for (const char* algorithm : kLockstepAlgorithms)
    for (int p : {1, 2, 3, 7, 12, 33}) {
      const SchedulePlan plan = plan_of(algorithm, p, 1000, 3);
      const LockstepMoves& moves = *cursor_of(plan)->lockstep();
      for (std::uint32_t at = 0; at < moves.positions(); ++at) {
        const std::vector<std::int32_t>* named = moves.ranks_at(at);
        if (!named) continue;
        INFO(algorithm << ", p = " << p << ", position " << at);
        std::vector<StepMove> all(static_cast<std::size_t>(p)), some(named->size());
        moves.moves_at(at, 0, p, all.data());
        moves.moves_of(at, named->data(), static_cast<int>(named->size()), some.data());
        std::vector<bool> is_named(static_cast<std::size_t>(p), false);
        for (std::size_t i = 0; i < named->size(); ++i) {
          const StepMove& a = all[static_cast<std::size_t>((*named)[i])];
          CHECK(a.send_peer == some[i].send_peer);
          CHECK(a.recv_peer == some[i].recv_peer);
          CHECK(a.send_count == some[i].send_count);
          CHECK(a.recv_count == some[i].recv_count);
          CHECK(a.work_elements == some[i].work_elements);
          is_named[static_cast<std::size_t>((*named)[i])] = true;
        }
        for (int r = 0; r < p; ++r)
          if (!is_named[static_cast<std::size_t>(r)]) {
            const StepMove& a = all[static_cast<std::size_t>(r)];
            CHECK((a.send_peer < 0 && a.recv_peer < 0 && a.work_elements == 0));
          }
      }
    }
}

TEST_CASE("lockstep and step-by-step runs agree at p = 2^20", "[slow]") {
  const int p = 1 << 20;
  for (const char* algorithm : {"two-tree", "rabenseifner", "dual-root"}) {
    INFO(algorithm);
    const SchedulePlan plan = plan_of(algorithm, p, 1 << 20, 16);
    SimulationOptions o;
    o.model = CostModel::cluster();
    check_same(simulate(plan, p, o), simulate(rank_by_rank(plan), p, o));
  }
}

namespace lockstep_test {

// Two ranks, rank 0 sending `count` elements to rank 1 at position 0, rank 1
// receiving `received` at position `at`: a cursor that claims lockstep
// whether or not its steps keep the promise.
class Claimed final : public StepCursor, public LockstepMoves {
 public:
  Claimed(std::uint64_t count, std::uint64_t received, std::uint32_t at)
      : count_(count), received_(received), at_(at) {}
  bool seek(int rank, std::uint32_t& position, Step& step) const override {
    for (; position < 2; ++position)
      if (!(step = at(rank, position)).empty()) return true;
    return false;
  }
  bool seek_move(int rank, std::uint32_t& position, StepMove& move) const override {
    Step step;
    if (!seek(rank, position, step)) return false;
    move = move_of(step);
    return true;
  }
  Step at(int rank, std::uint32_t position) const override {
    Step s;
    if (rank == 0 && position == 0) s.send = Transfer{1, 0, count_};
    if (rank == 1 && position == at_) s.recv = Transfer{0, 0, received_};
    return s;
  }
  const LockstepMoves* lockstep() const override { return this; }
  std::uint32_t positions() const override { return 2; }
  void moves_at(std::uint32_t position, int first, int count, StepMove* out) const override {
    for (int i = 0; i < count; ++i) out[i] = move_of(at(first + i, position));
  }

 private:
  std::uint64_t count_, received_;
  std::uint32_t at_;
};

SchedulePlan claimed_plan(std::uint64_t count, std::uint64_t received, std::uint32_t at) {
  auto cursor = std::make_shared<const Claimed>(count, received, at);
  const SchedulePlan coroutines = [cursor](int rank) -> RankSchedule {
    return [](std::shared_ptr<const Claimed> c, int r) -> RankSchedule {
      for (std::uint32_t i = 0; i < 2; ++i)
        if (const Step s = c->at(r, i); !s.empty()) co_yield s;
    }(cursor, rank);
  };
  return CursorPlan{coroutines, cursor};
}

}  // namespace lockstep_test

TEST_CASE("a cursor that breaks its lockstep promise runs step by step", "[sim]") {
  SimulationOptions o;
  o.model = CostModel::uniform({1e-6, 1e-9}, 0, Ports::bidirectional);
  SECTION("a receive one position late: the step-by-step run's figures") {
    const SchedulePlan plan = claimed_plan(1000, 1000, 1);
    const SimulationResult r = simulate(plan, 2, o);
    CHECK(r.messages == 1);
    check_same(r, simulate([plan](int rank) { return plan(rank); }, 2, o));
  }
  SECTION("counts that differ: the step-by-step run's error") {
    CHECK_THROWS_WITH(simulate(claimed_plan(1000, 999, 0), 2, o), Catch::Contains("size mismatch"));
  }
}
