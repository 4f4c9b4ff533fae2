// The emulated cluster on real data: hand-written schedules (pipelined chain,
// recursive doubling with send and receive regions overlapping in one step,
// flat reduce, binomial broadcast), every registered algorithm, both port
// modes, virtual times against the simulator, and failures that must end in
// a clear error instead of a hang.

#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "emulator/emulator.hpp"

using namespace copse;

namespace {

// ---- hand-written schedules ---------------------------------------------------

// Pipelined chain allreduce in two phases: blocks flow up 0 -> p-1 being
// combined (what arrives comes from lower ranks: left), then the result flows
// back down p-1 -> 0. At step t rank r sends block t-r and receives t-r+1.
RankSchedule chain_rank(Shape s, int r) {
  const BlockPartition part(s.count, s.blocks);
  const int p = s.ranks;
  const long b = part.blocks;
  for (long t = 0; t < b + p - 1; ++t) {
    Step st;
    if (r < p - 1) st.send = part.transfer(t - r, r + 1);
    if (r > 0) st.recv = part.transfer(t - r + 1, r - 1);
    st.combine = Combine::left;
    if (!st.empty()) co_yield st;
  }
  const long d = p - 1 - r;  // distance from the top of the chain
  for (long t = 0; t < b + p - 1; ++t) {
    Step st;
    if (r > 0) st.send = part.transfer(t - d, r - 1);
    if (r < p - 1) st.recv = part.transfer(t - d + 1, r + 1);
    st.combine = Combine::replace;
    if (!st.empty()) co_yield st;
  }
}
SchedulePlan chain_plan(const Shape& s) {
  return [s](int r) { return chain_rank(s, r); };
}

// Recursive doubling for any p: ranks >= m (m the largest power of two <= p)
// fold into rank m-1 first and get the result back last. Every exchange sends
// and receives the whole vector in one step: the regions overlap completely.
RankSchedule recursive_doubling_rank(Shape s, int r) {
  const int p = s.ranks;
  int m = 1;
  while (2 * m <= p) m *= 2;
  const Transfer none{};
  auto whole = [&](int peer) { return Transfer{peer, 0, s.count}; };
  if (r >= m) {
    co_yield Step{whole(m - 1), none, Combine::replace, {}};
    co_yield Step{none, whole(m - 1), Combine::replace, {}};
    co_return;
  }
  if (r == m - 1)
    for (int e = m; e < p; ++e) co_yield Step{none, whole(e), Combine::right, {}};
  for (int k = 1; k < m; k *= 2) {
    const int partner = r ^ k;
    co_yield Step{whole(partner), whole(partner), partner < r ? Combine::left : Combine::right, {}};
  }
  if (r == m - 1)
    for (int e = m; e < p; ++e) co_yield Step{whole(e), none, Combine::replace, {}};
}
SchedulePlan recursive_doubling_plan(const Shape& s) {
  return [s](int r) { return recursive_doubling_rank(s, r); };
}

// Allreduce on 3 ranks whose first step has partly overlapping send and
// receive regions: with A = [0, a), B = [a, b), C = [b, n), ranks 0 and 1
// exchange B∪C (0 -> 1) and A∪B (1 -> 0) in one step, so B is both sent and
// received by each of them. Then rank 2 collects and sends the result back.
RankSchedule partial_overlap_rank(Shape s, int r) {
  const std::uint64_t n = s.count, a = n / 3, b = 2 * n / 3;
  const Transfer none{};
  const Transfer all0{0, 0, n}, all1{1, 0, n}, all2{2, 0, n};
  switch (r) {
    case 0:
      co_yield Step{Transfer{1, a, n - a}, Transfer{1, 0, b}, Combine::right, {}};
      co_yield Step{Transfer{2, 0, b}, none, Combine::replace, {}};
      co_yield Step{none, all2, Combine::replace, {}};
      break;
    case 1:
      co_yield Step{Transfer{0, 0, b}, Transfer{0, a, n - a}, Combine::left, {}};
      co_yield Step{Transfer{2, b, n - b}, none, Combine::replace, {}};
      co_yield Step{none, all2, Combine::replace, {}};
      break;
    default:
      co_yield Step{none, Transfer{0, 0, b}, Combine::left, {}};
      co_yield Step{none, Transfer{1, b, n - b}, Combine::left, {}};
      co_yield Step{all0, none, Combine::replace, {}};
      co_yield Step{all1, none, Combine::replace, {}};
      break;
  }
}
SchedulePlan partial_overlap_plan(const Shape& s) {
  return [s](int r) { return partial_overlap_rank(s, r); };
}

// Reduce to a root through rank 0: rank 0 receives from 1, 2, ..., p-1 in
// order (every other rank posts at once: rank 0 has p-1 senders waiting),
// then forwards to the root.
RankSchedule flat_reduce_rank(Shape s, int r) {
  const Transfer none{};
  if (r == 0) {
    for (int q = 1; q < s.ranks; ++q) co_yield Step{none, Transfer{q, 0, s.count}, Combine::right, {}};
    if (s.root != 0) co_yield Step{Transfer{s.root, 0, s.count}, none, Combine::replace, {}};
  } else {
    co_yield Step{Transfer{0, 0, s.count}, none, Combine::replace, {}};
    if (r == s.root) co_yield Step{none, Transfer{0, 0, s.count}, Combine::replace, {}};
  }
}
SchedulePlan flat_reduce_plan(const Shape& s) {
  return [s](int r) { return flat_reduce_rank(s, r); };
}

// Binomial broadcast from any root, relabelled so the root is virtual rank 0.
RankSchedule binomial_bcast_rank(Shape s, int r) {
  const int p = s.ranks;
  const int v = (r - s.root + p) % p;
  auto real = [&](int vr) { return (vr + s.root) % p; };
  for (int k = 1; k < p; k *= 2) {
    Step st;
    if (v < k && v + k < p) st.send = Transfer{real(v + k), 0, s.count};
    if (v >= k && v < 2 * k) st.recv = Transfer{real(v - k), 0, s.count};
    if (!st.empty()) co_yield st;
  }
}
SchedulePlan binomial_bcast_plan(const Shape& s) {
  return [s](int r) { return binomial_bcast_rank(s, r); };
}

AlgorithmInfo custom(Collective c, const char* name, SchedulePlan (*plan)(const Shape&), bool pipelined = true,
                     bool commutative_only = false) {
  return AlgorithmInfo{c, name, "hand-written test schedule", commutative_only, pipelined, plan};
}

CostModel model(Ports ports) { return CostModel({LinkCost{2e-7, 5e-11}, LinkCost{1.5e-6, 1e-10}}, 2.5e-11, ports); }

EmulatorConfig cluster(int p, Ports ports, int ranks_per_node = 0) {
  EmulatorConfig c;
  // Spread ranks over nodes of 2 (or as asked) so both link levels are used.
  c.layout = RankMap::uniform(p, ranks_per_node > 0 ? ranks_per_node : (p % 2 == 0 ? 2 : 1));
  c.model = model(ports);
  c.repetitions = 2;
  c.wait_timeout = std::chrono::milliseconds(20000);
  return c;
}

// Runs the emulator and the simulator on the same schedule; checks the data
// and that the virtual finish times agree exactly.
EmulationResult run_and_compare(const AlgorithmInfo& algo, const Shape& shape, const ReduceOp& op,
                                const EmulatorConfig& config) {
  const EmulationResult e = emulate(algo, shape, op, config);
  INFO("algorithm " << algo.name << ", p = " << shape.ranks << ", count = " << shape.count
                    << ", blocks = " << shape.blocks << ", op " << op.name << ", "
                    << (config.model.ports() == Ports::bidirectional ? "bidirectional" : "unidirectional"));
  CHECK(e.verified);
  CHECK(e.failure == "");
  REQUIRE(e.virtual_finish.size() == static_cast<std::size_t>(shape.ranks));
  CHECK(e.wall_seconds.size() == static_cast<std::size_t>(config.repetitions));
  SimulationOptions options;
  options.model = config.model;
  options.layout = config.layout;
  options.element_bytes = op.element_bytes;
  const SimulationResult sim = simulate(algo.plan(shape), shape.ranks, options);
  CHECK(e.virtual_finish == sim.finish);
  CHECK(e.virtual_time == sim.time);
  return e;
}

const std::vector<int> kRanks = {1, 2, 3, 5, 8, 13};

std::vector<std::uint64_t> emulated_counts(int p) {
  return {0, 1, 2, static_cast<std::uint64_t>(p - 1), static_cast<std::uint64_t>(p + 1), 1000, 1001};
}

}  // namespace

TEST_CASE("concurrency: hand-written allreduce schedules give the sequential result", "[emulator]") {
  const AlgorithmInfo chain = custom(Collective::allreduce, "test-chain", chain_plan);
  const AlgorithmInfo rd = custom(Collective::allreduce, "test-recursive-doubling", recursive_doubling_plan, false);
  const std::vector<ReduceOp> ops = {builtin_op("affine", DType::int32), builtin_op("sum", DType::float64)};
  for (Ports ports : {Ports::bidirectional, Ports::unidirectional})
    for (int p : kRanks)
      for (std::uint64_t n : emulated_counts(p))
        for (const auto& op : ops) {
          const Shape shape{p, n, 4, 0};
          run_and_compare(chain, shape, op, cluster(p, ports));
          run_and_compare(rd, shape, op, cluster(p, ports));
        }
}

TEST_CASE("concurrency: a step whose send and receive regions overlap sends the region as it began", "[emulator]") {
  // Without staging, the rank that receives before its send is consumed
  // would send already-combined data (and the other would read it half-written).
  const AlgorithmInfo partial = custom(Collective::allreduce, "test-partial-overlap", partial_overlap_plan, false);
  const AlgorithmInfo rd = custom(Collective::allreduce, "test-recursive-doubling", recursive_doubling_plan, false);
  for (Ports ports : {Ports::bidirectional, Ports::unidirectional}) {
    for (std::uint64_t n : {0, 1, 2, 3, 5, 64, 1001})
      for (int rpn : {1, 3})
        run_and_compare(partial, Shape{3, n, 1, 0}, builtin_op("affine", DType::uint64), cluster(3, ports, rpn));
    run_and_compare(rd, Shape{8, 333, 1, 0}, builtin_op("affine", DType::uint16), cluster(8, ports, 4));
  }
}

TEST_CASE("concurrency: thousands of back-to-back messages between the same pairs stay in order", "[emulator]") {
  // One element per block: consecutive messages from one sender to one
  // receiver, where a receiver that arrived first may be overtaken by the
  // sender's next post (the race the rendezvous protocol must get right).
  const AlgorithmInfo chain = custom(Collective::allreduce, "test-chain", chain_plan);
  for (Ports ports : {Ports::bidirectional, Ports::unidirectional})
    for (int p : {2, 3}) {
      EmulatorConfig config = cluster(p, ports, 1);
      config.repetitions = 3;
      run_and_compare(chain, Shape{p, 3000, 3000, 0}, builtin_op("affine", DType::int16), config);
    }
}

TEST_CASE("concurrency: reduce and bcast schedules deliver to any root", "[emulator]") {
  const AlgorithmInfo reduce = custom(Collective::reduce, "test-flat-reduce", flat_reduce_plan, false);
  const AlgorithmInfo bcast = custom(Collective::bcast, "test-binomial-bcast", binomial_bcast_plan, false);
  const ReduceOp op = builtin_op("affine", DType::int64);
  for (Ports ports : {Ports::bidirectional, Ports::unidirectional})
    for (int p : kRanks)
      for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{777}})
        for (int root : {0, p / 2, p - 1}) {
          run_and_compare(reduce, Shape{p, n, 1, root}, op, cluster(p, ports));
          run_and_compare(bcast, Shape{p, n, 1, root}, op, cluster(p, ports));
        }
}

TEST_CASE("concurrency: virtual times are exact and identical across repetitions", "[emulator]") {
  const AlgorithmInfo rd = custom(Collective::allreduce, "test-recursive-doubling", recursive_doubling_plan, false);
  const ReduceOp op = builtin_op("sum", DType::int32);
  const std::uint64_t n = 1000;
  for (Ports ports : {Ports::bidirectional, Ports::unidirectional}) {
    EmulatorConfig config = cluster(2, ports, 1);
    config.repetitions = 5;
    const EmulationResult e = emulate(rd, Shape{2, n, 1, 0}, op, config);
    CHECK(e.verified);
    CHECK(e.wall_seconds.size() == 5);
    // One exchange of 4000 bytes between nodes, then 4000 bytes combined.
    const Picos transfer = config.model.transfer(1, 4 * n);
    const Picos expected = ports == Ports::bidirectional ? transfer + config.model.combine(4 * n)
                                                         : 2 * transfer + config.model.combine(4 * n);
    CHECK(e.virtual_finish == std::vector<Picos>{expected, expected});
    CHECK(e.virtual_time == expected);
    const EmulationResult again = emulate(rd, Shape{2, n, 1, 0}, op, config);
    CHECK(again.virtual_finish == e.virtual_finish);
  }
}

TEST_CASE("concurrency: a deadlocking schedule times out naming the rank, the peer and the step", "[emulator]") {
  // Both ranks receive from each other and nobody sends.
  const AlgorithmInfo both_receive = custom(Collective::allreduce, "test-deadlock", [](const Shape& s) -> SchedulePlan {
    return [s](int r) -> RankSchedule {
      co_yield Step{};  // an empty step first, so the stuck step is step 1
      co_yield Step{Transfer{}, Transfer{1 - r, 0, s.count}, Combine::right, {}};
    };
  });
  EmulatorConfig config = cluster(2, Ports::bidirectional, 1);
  config.wait_timeout = std::chrono::milliseconds(150);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_MATCHES(
      emulate(both_receive, Shape{2, 10, 1, 0}, builtin_op("sum", DType::int32), config), TimeoutError,
      Catch::Matchers::Predicate<TimeoutError>(
          [](const TimeoutError& e) {
            const std::string m = e.what();
            return (m.find("rank 0") != std::string::npos && m.find("waiting for rank 1") != std::string::npos) ||
                   (m.find("rank 1") != std::string::npos && m.find("waiting for rank 0") != std::string::npos);
          },
          "names a rank and its peer"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));

  // A send nobody receives: the sender times out waiting for its peer.
  const AlgorithmInfo lost_send = custom(Collective::allreduce, "test-lost-send", [](const Shape& s) -> SchedulePlan {
    return [s](int r) -> RankSchedule {
      if (r == 0) co_yield Step{Transfer{2, 0, s.count}, Transfer{}, Combine::replace, {}};
    };
  });
  EmulatorConfig three = cluster(3, Ports::unidirectional, 1);
  three.wait_timeout = std::chrono::milliseconds(100);
  CHECK_THROWS_WITH(emulate(lost_send, Shape{3, 10, 1, 0}, builtin_op("sum", DType::int32), three),
                    Catch::Contains("rank 0") && Catch::Contains("step 0") &&
                        Catch::Contains("waiting for rank 2 to receive") && Catch::Contains("finished"));
}

TEST_CASE("concurrency: errors inside a rank end the whole run cleanly", "[emulator]") {
  // Size mismatch: rank 0 sends 3 elements, rank 1 expects 2.
  const AlgorithmInfo mismatch = custom(Collective::allreduce, "test-mismatch", [](const Shape&) -> SchedulePlan {
    return [](int r) -> RankSchedule {
      if (r == 0)
        co_yield Step{Transfer{1, 0, 3}, Transfer{}, Combine::replace, {}};
      else
        co_yield Step{Transfer{}, Transfer{0, 0, 2}, Combine::right, {}};
    };
  });
  CHECK_THROWS_WITH(
      emulate(mismatch, Shape{2, 4, 1, 0}, builtin_op("sum", DType::int32), cluster(2, Ports::bidirectional, 1)),
      Catch::Contains("size mismatch") && Catch::Contains("rank 1"));

  // A throwing user operator on one rank, while the others wait on it.
  const ReduceOp boom =
      user_op("boom", DType::int32, true, 4, [](const void*, void*, std::size_t) { throw std::runtime_error("boom"); });
  const AlgorithmInfo chain = custom(Collective::allreduce, "test-chain", chain_plan);
  CHECK_THROWS_WITH(emulate(chain, Shape{8, 100, 4, 0}, boom, cluster(8, Ports::bidirectional)), "boom");

  // Out-of-range regions and peers are refused before anything runs.
  const AlgorithmInfo out_of_range = custom(Collective::allreduce, "test-range", [](const Shape& s) -> SchedulePlan {
    return [s](int r) -> RankSchedule {
      co_yield Step{Transfer{1 - r, s.count - 1, 2}, Transfer{1 - r, s.count - 1, 2}, Combine::right, {}};
    };
  });
  CHECK_THROWS_AS(
      emulate(out_of_range, Shape{2, 4, 1, 0}, builtin_op("sum", DType::int32), cluster(2, Ports::bidirectional, 1)),
      ScheduleError);
  const AlgorithmInfo self = custom(Collective::allreduce, "test-self", [](const Shape& s) -> SchedulePlan {
    return [s](int r) -> RankSchedule { co_yield Step{Transfer{r, 0, s.count}, Transfer{}, Combine::right, {}}; };
  });
  CHECK_THROWS_WITH(
      emulate(self, Shape{2, 4, 1, 0}, builtin_op("sum", DType::int32), cluster(2, Ports::bidirectional, 1)),
      Catch::Contains("itself"));
}

TEST_CASE("emulate refuses bad configurations and non-commutative operators for commutative-only algorithms",
          "[emulator]") {
  const AlgorithmInfo commutative = custom(Collective::allreduce, "test-comm", chain_plan, true, true);
  CHECK_THROWS_WITH(
      emulate(commutative, Shape{2, 4, 1, 0}, builtin_op("affine", DType::int32), cluster(2, Ports::bidirectional, 1)),
      Catch::Contains("commutative") && Catch::Contains("affine"));
  CHECK_THROWS_AS(
      emulate(commutative, Shape{2, 4, 1, 0}, builtin_op("affine", DType::int32), cluster(2, Ports::bidirectional, 1)),
      UsageError);
  EmulatorConfig wrong = cluster(4, Ports::bidirectional, 2);
  CHECK_THROWS_AS(emulate(commutative, Shape{3, 4, 1, 0}, builtin_op("sum", DType::int32), wrong), UsageError);
  CHECK_THROWS_AS(emulate(commutative, Shape{0, 4, 1, 0}, builtin_op("sum", DType::int32), wrong), UsageError);
  // More memory than the machine has: refused before anything is allocated.
  const AlgorithmInfo rd = custom(Collective::allreduce, "test-recursive-doubling", recursive_doubling_plan, false);
  CHECK_THROWS_WITH(emulate(rd, Shape{4, std::uint64_t{1} << 50, 1, 0}, builtin_op("sum", DType::int32), wrong),
                    Catch::Contains("more memory than this machine has"));
  wrong.repetitions = 0;
  CHECK_THROWS_AS(emulate(commutative, Shape{4, 4, 1, 0}, builtin_op("sum", DType::int32), wrong), UsageError);
}

TEST_CASE("concurrency: a wrong schedule is reported as a failed verification, naming rank and element", "[emulator]") {
  // Recursive doubling with the combine sides swapped: right for sum, wrong for affine.
  const AlgorithmInfo swapped = custom(
      Collective::allreduce, "test-swapped",
      [](const Shape& s) -> SchedulePlan {
        return [s](int r) -> RankSchedule {
          const int partner = r ^ 1;
          co_yield Step{Transfer{partner, 0, s.count},
                        Transfer{partner, 0, s.count},
                        partner < r ? Combine::right : Combine::left,
                        {}};
        };
      },
      false);
  const EmulationResult ok =
      emulate(swapped, Shape{2, 50, 1, 0}, builtin_op("sum", DType::int32), cluster(2, Ports::bidirectional, 1));
  CHECK(ok.verified);
  const EmulationResult bad =
      emulate(swapped, Shape{2, 50, 1, 0}, builtin_op("affine", DType::int32), cluster(2, Ports::bidirectional, 1));
  CHECK_FALSE(bad.verified);
  CHECK_THAT(bad.failure, Catch::Contains("repetition 0") && Catch::Contains("rank 0") &&
                              Catch::Contains("element 0") && Catch::Contains("expected ("));
}

namespace {

// Every registered algorithm (any collective) emulated at each p of `ranks`,
// both port models, the counts of emulated_counts and 1 or 5 blocks, against
// the sequential reference and the simulator's block count.
void check_every_registered_algorithm(const std::vector<int>& ranks) {
  REQUIRE_FALSE(algorithms().empty());
  const ReduceOp affine = builtin_op("affine", DType::uint32);
  const ReduceOp sum = builtin_op("sum", DType::float32);
  for (const AlgorithmInfo& algo : algorithms())
    for (Ports ports : {Ports::bidirectional, Ports::unidirectional})
      for (int p : ranks)
        for (std::uint64_t n : emulated_counts(p))
          for (int blocks : {1, 5}) {
            if (blocks > 1 && !algo.pipelined) continue;
            const Shape shape{p, n, blocks, p / 2};
            const ReduceOp& op = algo.needs_commutative ? sum : affine;
            SimulationOptions options;
            options.model = model(ports);
            try {
              (void)simulate(algo.plan(shape), p, options);
            } catch (const ScheduleError& e) {
              // Not deadlock-free with these ports: the simulator says so, and
              // the emulator would only time out.
              WARN(algo.name << " p=" << p << ": " << e.what());
              continue;
            }
            const EmulationResult e = run_and_compare(algo, shape, op, cluster(p, ports));
            CHECK(e.blocks == blocks_used(algo, shape));
          }
}

}  // namespace

TEST_CASE("concurrency: every registered algorithm gives the sequential result and the simulator's times",
          "[emulator]") {
  check_every_registered_algorithm({1, 2, 3, 5});
}

// The same at the wider p, where trees are deeper: half the time, and
// under the sanitizers (which leave out [exhaustive]) the same code as the
// smaller p.
TEST_CASE("concurrency: every registered algorithm gives the sequential result and the simulator's times, p 8 and 13",
          "[emulator][exhaustive]") {
  check_every_registered_algorithm({8, 13});
}

TEST_CASE("concurrency: a commutative-only registered algorithm refuses a non-commutative operator", "[emulator]") {
  for (const AlgorithmInfo& algo : algorithms()) {
    if (!algo.needs_commutative) continue;
    CHECK_THROWS_AS(
        emulate(algo, Shape{4, 8, 1, 0}, builtin_op("affine", DType::int32), cluster(4, Ports::bidirectional, 2)),
        UsageError);
  }
}

TEST_CASE("concurrency: dual-root allreduce on 64 ranks as 8 nodes x 8", "[emulator]") {
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, "dual-root");
  const std::uint64_t n = 16384;  // 64 KiB of int32 per rank
  run_and_compare(algo, Shape{64, n, 16, 0}, builtin_op("sum", DType::int32), cluster(64, Ports::bidirectional, 8));
  run_and_compare(algo, Shape{64, n / 2, 16, 0}, builtin_op("affine", DType::int32),
                  cluster(64, Ports::unidirectional, 8));
}

// Not a "concurrency:" case: under ThreadSanitizer, which runs those, the
// ranks are threads (emulator.cpp), and 4096 of them is no test of the
// fibers. AddressSanitizer's run takes 512, for the same reason.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kManyNodes = 32;
#else
constexpr int kManyNodes = 256;
#endif

TEST_CASE("emulator: 4096 ranks as 256 nodes x 16 give the sequential result and the simulator's times", "[emulator]") {
  // Thousands of ranks on a worker thread per core (fibers).
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, "dual-root");
  EmulatorConfig config = cluster(kManyNodes * 16, Ports::bidirectional, 16);
  config.repetitions = 1;
  run_and_compare(algo, Shape{kManyNodes * 16, 256, 4, 0}, builtin_op("sum", DType::int32), config);
}
