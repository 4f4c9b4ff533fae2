// The simulator's figures must not move when its internals change (issue 20:
// compact per-rank state, lazily generated schedules): the simulated times,
// message counts and every rank's finish time below were recorded from the
// code before that change (commit be3b0a3) and are compared bit for bit.
#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/step_cursor.hpp"

using namespace copse;

namespace sim_scale_test {

enum class Model { cluster, hockney, hockney_uni, hockney_arrival };

struct Case {
  const char* algorithm;
  int ranks;
  std::uint64_t bytes;
  int blocks;
  Model model;
};

struct Figures {
  Picos time = 0;
  int slowest_rank = 0;
  std::uint64_t messages = 0, max_steps = 0, max_elements_received = 0;
  std::uint64_t finish_digest = 0;  // every rank's finish time, mixed in rank order
  bool operator==(const Figures&) const = default;
};

SimulationOptions options_for(Model model, int ranks) {
  SimulationOptions o;
  switch (model) {
    case Model::cluster: o.model = CostModel::cluster(); break;
    case Model::hockney: o.model = CostModel(); break;
    case Model::hockney_uni: o.model = CostModel::uniform({1e-6, 1e-9}, 5e-10, Ports::unidirectional); break;
    case Model::hockney_arrival:
      o.model = CostModel();
      for (int r = 0; r < ranks; ++r) o.start.push_back(static_cast<Picos>((r * 7919) % 13) * 250000);
      break;
  }
  return o;
}

std::uint64_t digest(const std::vector<Picos>& finish) {
  std::uint64_t h = 1469598103934665603ull;
  for (Picos t : finish) h = (h ^ static_cast<std::uint64_t>(t)) * 1099511628211ull;
  return h;
}

// How a plan with a StepCursor (algorithms/step_cursor.hpp) is simulated:
// through the cursor, or through its coroutines (the plan wrapped so that
// the simulator cannot see the cursor).
enum class Path { as_planned, coroutines };

SchedulePlan plan_for(const char* algorithm, const Shape& shape, Path path) {
  SchedulePlan plan = find_algorithm(Collective::allreduce, algorithm).plan(shape);
  if (path == Path::as_planned) return plan;
  return [plan](int rank) { return plan(rank); };
}

Figures figures_of(const Case& c, Path path = Path::as_planned) {
  Shape shape;
  shape.ranks = c.ranks;
  shape.count = c.bytes;
  shape.blocks = c.blocks;
  const SimulationOptions o = options_for(c.model, c.ranks);
  const SimulationResult r = simulate(plan_for(c.algorithm, shape, path), c.ranks, o);
  return Figures{r.time, r.slowest_rank, r.messages, r.max_steps, r.max_elements_received, digest(r.finish)};
}

// Figures as a row of kRows below.
std::string row_of(const Figures& f) {
  return "{" + std::to_string(f.time) + ", " + std::to_string(f.slowest_rank) + ", " + std::to_string(f.messages) +
         ", " + std::to_string(f.max_steps) + ", " + std::to_string(f.max_elements_received) + ", " +
         std::to_string(f.finish_digest) + "ull}";
}

constexpr std::uint64_t MiB = 1 << 20;

// Each case with its figures as commit be3b0a3 (before the change) gave
// them: time, slowest rank, messages, longest rank's steps, most elements
// received, finish digest.
struct Row {
  Case c;
  Figures recorded;
};
const Row kRows[] = {
    {{"dual-root", 1, MiB, 16, Model::cluster}, {0, 0, 0, 0, 0, 4953163356653287321ull}},
    {{"dual-root", 2, MiB, 16, Model::cluster}, {171072000, 0, 32, 16, 1048576, 13607385040225295611ull}},
    {{"dual-root", 3, 1000, 4, Model::hockney}, {13775000, 0, 16, 9, 2000, 4633023808163622577ull}},
    {{"dual-root", 7, MiB, 16, Model::hockney_uni}, {8026856000, 0, 192, 50, 3145728, 6013798107112489873ull}},
    {{"dual-root", 1000, MiB, 16, Model::cluster}, {712132000, 0, 31968, 71, 3145728, 7194723415391379747ull}},
    {{"dual-root", 1000, 777, 16, Model::hockney_arrival}, {118448000, 0, 31968, 71, 2331, 6105354058828353955ull}},
    {{"dual-root", 4097, MiB, 16, Model::hockney}, {808797600, 0, 131072, 77, 3145728, 7905422889064884985ull}},
    {{"dual-root", 65536, MiB, 16, Model::cluster}, {942824800, 0, 2097120, 89, 3145728, 6171162289086882947ull}},
    {{"dual-root", 100003, MiB, 16, Model::cluster}, {960570400, 0, 3200064, 92, 3145728, 77798938067182881ull}},
    {{"ring", 2, MiB, 1, Model::cluster}, {122964800, 0, 4, 2, 1048576, 6486685848810054267ull}},
    {{"ring", 5, 3, 1, Model::hockney}, {12000900, 0, 24, 7, 6, 15151132184123592353ull}},
    {{"ring", 12, MiB, 1, Model::hockney_uni}, {12235318000, 10, 264, 22, 1922390, 13046842761873938683ull}},
    {{"ring", 100, 64, 1, Model::hockney_arrival}, {300022275, 0, 12672, 130, 128, 18027617468985185775ull}},
    {{"ring", 1000, MiB, 1, Model::cluster}, {5230788975, 0, 1998000, 1998, 2095056, 14923022034251616739ull}},
    {{"ring", 1537, 1000, 1, Model::hockney}, {4608345600, 0, 3072000, 2002, 2000, 14137768559874469785ull}},
    {{"two-tree", 2, MiB, 16, Model::cluster}, {197964800, 0, 64, 32, 1048576, 17416863013026269435ull}},
    {{"two-tree", 9, 100, 3, Model::hockney_uni}, {39738000, 4, 96, 16, 200, 10054042113494146313ull}},
    {{"two-tree", 1000, MiB, 16, Model::cluster}, {563894400, 983, 63936, 80, 2097152, 17524719981312643779ull}},
    {{"two-tree", 1000, 999, 7, Model::hockney_arrival}, {93484200, 1, 27972, 44, 1999, 15654032112237360371ull}},
    {{"two-tree", 65537, MiB, 16, Model::cluster}, {753113600, 65533, 4194304, 94, 2097152, 5666735649383375673ull}},
    {{"two-tree", 30011, 777, 5, Model::hockney_uni}, {163081000, 29431, 600200, 32, 1555, 4878230575451503517ull}},
    {{"rabenseifner", 1, 10, 1, Model::hockney}, {0, 0, 0, 0, 0, 4953163356653287321ull}},
    {{"rabenseifner", 6, MiB, 1, Model::hockney_uni}, {6170384000, 0, 20, 6, 2621440, 2400559765201353131ull}},
    {{"rabenseifner", 1000, MiB, 16, Model::cluster}, {521398400, 0, 10192, 20, 3141632, 1397232651842970339ull}},
    {{"rabenseifner", 1024, 100, 1, Model::hockney_arrival}, {33023625, 0, 15288, 20, 204, 6871213141891415939ull}},
    {{"rabenseifner", 65535, MiB, 16, Model::cluster}, {551852000, 0, 1048574, 32, 3145664, 513431634575213873ull}},
    {{"binomial", 3, MiB, 1, Model::hockney}, {477859200, 0, 4, 4, 2097152, 8582919611725942049ull}},
    {{"binomial", 13, 5, 1, Model::hockney_uni}, {8050000, 0, 24, 8, 20, 15554406166892840329ull}},
    {{"binomial", 1000, MiB, 16, Model::cluster}, {2555296000, 511, 31968, 320, 10485760, 8063895422333919715ull}},
    {{"binomial", 1000, 4096, 1, Model::hockney_arrival}, {42216000, 0, 1998, 20, 40960, 11964498753510310755ull}},
    {{"binomial", 65536, MiB, 16, Model::cluster},
     {4094873600, 65535, 2097120, 512, 16777216, 12135067828387625859ull}},
    {{"recursive-doubling", 100, MiB, 1, Model::cluster}, {1042361600, 56, 456, 8, 7340032, 17931718881101536115ull}},
    {{"recursive-doubling", 4096, 4096, 1, Model::hockney_arrival},
     {27144000, 0, 49152, 12, 49152, 7104498349468926851ull}},
};

}  // namespace sim_scale_test

using namespace sim_scale_test;

TEST_CASE("the simulator's figures are those recorded before issue 20's rework", "[exhaustive]") {
  for (const auto& [c, recorded] : kRows) {
    INFO(c.algorithm << ", p = " << c.ranks << ", " << c.bytes << " B, " << c.blocks << " blocks, model "
                     << static_cast<int>(c.model));
    const Figures f = figures_of(c);
    INFO("now " << row_of(f));  // on a failure, the row as the code under test gives it
    CHECK(f.time == recorded.time);
    CHECK(f.slowest_rank == recorded.slowest_rank);
    CHECK(f.messages == recorded.messages);
    CHECK(f.max_steps == recorded.max_steps);
    CHECK(f.max_elements_received == recorded.max_elements_received);
    CHECK(f.finish_digest == recorded.finish_digest);
  }
}

TEST_CASE("plans with a step cursor simulate alike through their coroutines", "[exhaustive]") {
  for (const auto& [c, recorded] : kRows) {
    Shape shape;
    shape.ranks = c.ranks, shape.count = c.bytes, shape.blocks = c.blocks;
    if (c.ranks > 5000 || !cursor_of(find_algorithm(Collective::allreduce, c.algorithm).plan(shape))) continue;
    INFO(c.algorithm << ", p = " << c.ranks << ", model " << static_cast<int>(c.model));
    CHECK(figures_of(c, Path::coroutines) == recorded);
  }
}

// The acceptance command's schedule at p = 2^20 (`copse sim --algorithm
// dual-root --ranks 1048576 --bytes 1MiB --blocks 16`, whose defaults are
// CostModel::cluster()), recorded from commit be3b0a3.
TEST_CASE("dual-root at p = 2^20 simulates as before issue 20's rework", "[slow]") {
  Shape shape;
  shape.ranks = 1 << 20;
  shape.count = MiB;
  shape.blocks = 16;
  SimulationOptions o;
  o.model = CostModel::cluster();
  const SimulationResult r = simulate(find_algorithm(Collective::allreduce, "dual-root").plan(shape), shape.ranks, o);
  CHECK(r.time == 1084789600);
  CHECK(r.max_steps == 96);
  CHECK(r.messages == 33554400);
  // The same through the coroutines, every rank's finish time included.
  const Case c{"dual-root", shape.ranks, MiB, 16, Model::cluster};
  CHECK(figures_of(c, Path::coroutines) == figures_of(c));
}

// two-tree as `copse sim --algorithm two-tree --bytes 1MiB --blocks 16` runs
// it at p = 2^20 + 1, recorded from commit 1cbfd4d, before its cursor
// computed steps by colour.
TEST_CASE("two-tree at p = 2^20 + 1 simulates as before its cursor's rework", "[slow]") {
  const Case c{"two-tree", (1 << 20) + 1, MiB, 16, Model::cluster};
  const Figures f = figures_of(c);
  INFO("now " << row_of(f));
  CHECK(f == Figures{852096000, 1048573, 67108864, 98, 2097152, 2105929110998019257ull});
}

// A chain towards rank 0 runs against the simulator's ascending sweeps (one
// rank a sweep): past the first sweep it must run depth first, and its
// figures are the closed form's. Rank r receives from r + 1, then sends to
// r - 1; with Hockney costs each hop takes alpha + wire after the last.
TEST_CASE("a chain towards rank 0 simulates to its closed form at p = 5000", "[sim]") {
  const int p = 5000;
  const std::uint64_t count = 1000;
  const SchedulePlan chain = [p, count](int rank) -> RankSchedule {
    return [](int r, int ranks, std::uint64_t n) -> RankSchedule {
      if (r + 1 < ranks) {
        Step s;
        s.recv = Transfer{r + 1, 0, n};
        co_yield s;
      }
      if (r > 0) {
        Step s;
        s.send = Transfer{r - 1, 0, n};
        co_yield s;
      }
    }(rank, p, count);
  };
  SimulationOptions o;
  o.model = CostModel::uniform({1e-6, 1e-9}, 0, Ports::bidirectional);
  const SimulationResult r = simulate(chain, p, o);
  const Picos hop = o.model.pair_cost(RankMap::uniform(p, 0), 1, 0).ends(count, 0, 0).recv_end;
  REQUIRE(hop > 0);
  CHECK(r.time == (p - 1) * hop);
  CHECK(r.messages == static_cast<std::uint64_t>(p - 1));
  for (int rank = 0; rank < p; ++rank) CHECK(r.finish[static_cast<std::size_t>(rank)] == (p - std::max(rank, 1)) * hop);
}
