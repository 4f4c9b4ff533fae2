// Issue 2's acceptance matrix: every allreduce builder on the emulated
// cluster, for p in 1..33, 64 and 100 (laid out as nodes x ranks per node),
// counts {0, 1, 2, p-1, p, p+1, 1000, 2^16+3, 2^20+3}, blocks {1, 2, 7, auto},
// sums in float, double, int32 and int64, and the non-commutative `affine` for
// every algorithm that keeps rank order. Every result is compared with the
// sequential reference, and every virtual time with the simulator's.
//
// Up to 1000 elements all four sum datatypes run for every combination. At
// the two large counts one sum datatype runs per p, rotating through the four
// along the sweep, with every block setting, so each datatype still meets
// every algorithm, every block setting and a quarter of the p values there;
// `affine` runs for every combination.
//
// The matrix is split into CTest cases of similar length, per algorithm:
//  - the default run: every count up to 1000 and 2^16+3 (many uneven blocks)
//    for a p sweep that keeps every kind of p and every node layout (see
//    default_ranks), in four cases: counts up to 1000 for p up to 17 and for
//    p from 24 to 100, and 2^16+3 for p up to 33 and for p = 64 and 100;
//  - tagged [slow] (CTest label `slow`, run by `scripts/test.sh --full`): the
//    same counts for the rest of p = 1..33, and 2^20+3 for every p.
// Together they are the whole matrix. The cases of the larger p are tagged
// [exhaustive] as well: the sanitizer presets leave them out (under
// AddressSanitizer the matrix took a fifth of CI's sanitizer time), and keep
// every count, block setting and operator at every kind of p up to 17 and,
// at 2^16+3, up to 33. Each case keeps one set of rank threads for all its
// emulations and computes each sequential reference once for the four block
// settings.
//
// The matrix's cases are not named "concurrency: ...": the TSan preset runs
// the smaller emulator tests, which use the same engine on the same
// algorithms. The two tests at the end, which check the shared rank threads
// and the given reference on their own, are.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <numeric>
#include <set>
#include <string>

#include "algorithms/simulator.hpp"
#include "common/wait.hpp"
#include "emulator/emulator.hpp"
#include "plan/autotune.hpp"

using namespace copse;

namespace {

constexpr std::uint64_t kLarge = (std::uint64_t{1} << 16) + 3;
constexpr std::uint64_t kHuge = (std::uint64_t{1} << 20) + 3;

// The largest of 8, 4, 3, 2, 1 that divides p: nodes of several sizes, and
// prime p spread one rank per node, so both link levels get exercised.
int ranks_per_node_for(int p) {
  for (int k : {8, 4, 3, 2})
    if (p % k == 0 && p > k) return k;
  return 1;
}

std::vector<int> every_rank_count() {
  std::vector<int> ps(33);
  std::iota(ps.begin(), ps.end(), 1);
  ps.push_back(64);
  ps.push_back(100);
  return ps;
}

// The default run's p: 1, 2, 3; the small primes, one rank per node (5, 7,
// 13, 17, 31); powers of two and their neighbours (4, 8, 16, 32, 64 with 3, 5,
// 7, 9, 15, 17, 31, 33); non-powers of two on nodes of 2 (10), 3 (6, 9, 15,
// 33), 4 (12, 100) and 8 (24); and 64 and 100.
std::vector<int> default_ranks() {
  return {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 15, 16, 17, 24, 31, 32, 33, 64, 100};
}

// default_ranks() from `low` to `high`.
std::vector<int> default_ranks_between(int low, int high) {
  std::vector<int> ps = default_ranks();
  std::erase_if(ps, [&](int p) { return p < low || p > high; });
  return ps;
}

// p = 1..33 that the default run leaves out.
std::vector<int> other_ranks_up_to_33() {
  const std::vector<int> in_default = default_ranks();
  std::vector<int> ps;
  for (int p = 1; p <= 33; ++p)
    if (std::find(in_default.begin(), in_default.end(), p) == in_default.end()) ps.push_back(p);
  return ps;
}

EmulatorConfig cluster_for(int p) {
  EmulatorConfig c;
  c.layout = RankMap::uniform(p, ranks_per_node_for(p));
  c.repetitions = 1;
  c.wait_timeout = std::chrono::milliseconds(60000);
  return c;
}

enum class Counts {
  up_to_1000,   // 0, 1, 2, p-1, p, p+1, 1000
  up_to_large,  // those and 2^16+3
  large,        // 2^16+3
  huge,         // 2^20+3
};

std::vector<std::uint64_t> counts_for(Counts counts, int p) {
  const auto n = static_cast<std::uint64_t>(p);
  const std::vector<std::uint64_t> small = {0, 1, 2, n - 1, n, n + 1, 1000};
  switch (counts) {
    case Counts::up_to_1000: return small;
    case Counts::up_to_large: {
      std::vector<std::uint64_t> c = small;
      c.push_back(kLarge);
      return c;
    }
    case Counts::large: return {kLarge};
    case Counts::huge: return {kHuge};
  }
  return {};
}

// The sum datatypes for `count` at the i-th p of a sweep, then affine if the
// algorithm keeps rank order.
std::vector<ReduceOp> operators_for(const AlgorithmInfo& algorithm, std::uint64_t count, std::size_t i) {
  const DType sum_types[] = {DType::float32, DType::float64, DType::int32, DType::int64};
  std::vector<ReduceOp> ops;
  if (count >= kLarge) {
    ops.push_back(builtin_op("sum", sum_types[i % 4]));
  } else {
    for (DType t : sum_types) ops.push_back(builtin_op("sum", t));
  }
  if (!algorithm.needs_commutative) ops.push_back(builtin_op("affine", DType::uint64));
  return ops;
}

void check_matrix(std::string_view name, const std::vector<int>& ranks, Counts counts) {
  const AlgorithmInfo& algorithm = find_algorithm(Collective::allreduce, name);
  // Started once, grown to the largest p, reused by every emulation below.
  // One worker: the matrix checks data and virtual times, which do not
  // depend on the worker a rank runs on, and under ctest -j2 two workers
  // cost it up to four times the CPU; the scheduler's workers are checked
  // by the concurrency tests, which keep one per core.
  RankThreads threads(1);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int p = ranks[i];
    EmulatorConfig config = cluster_for(p);
    config.threads = &threads;
    SimulationOptions sim;
    sim.model = config.model;
    sim.layout = config.layout;
    for (std::uint64_t count : counts_for(counts, p))
      for (const ReduceOp& op : operators_for(algorithm, count, i)) {
        // The sequential reference, once for the four block settings.
        const std::vector<std::byte> reference = reference_result(op, p, count);
        sim.element_bytes = op.element_bytes;
        for (int blocks : {1, 2, 7, 0}) {  // 0: auto
          Shape shape{p, count, blocks, 0};
          if (blocks == 0) shape.blocks = best_blocks(algorithm, Shape{p, count, 1, 0}, sim);
          INFO(algorithm.name << " p=" << p << " (" << config.layout.nodes() << " nodes x " << ranks_per_node_for(p)
                              << ") count=" << count << " blocks=" << (blocks ? std::to_string(blocks) : "auto") << "->"
                              << shape.blocks << " " << op.name << "/" << to_string(op.dtype));
          const EmulationResult result = emulate(algorithm, shape, op, config, reference);
          INFO(result.failure);
          REQUIRE(result.verified);
          REQUIRE(result.virtual_time == simulate(algorithm.plan(shape), p, sim).time);
        }
      }
  }
}

// The parts of one algorithm's matrix, as test-name suffixes; COPSE_MATRIX
// below registers one test case for each.
const char* const kParts[] = {
    ": counts up to 1000, p up to 17",
    ": counts up to 1000, p 24 to 100",
    ": count 2^16+3, p up to 33",
    ": count 2^16+3, p 64 and 100",
    ": counts up to 2^16+3, the other p up to 33",
    ": count 2^20+3, every p",
};

}  // namespace

#define COPSE_MATRIX(NAME)                                                                                \
  TEST_CASE("emulated allreduce matrix: " NAME ": counts up to 1000, p up to 17") {                       \
    check_matrix(NAME, default_ranks_between(1, 17), Counts::up_to_1000);                                 \
  }                                                                                                       \
  TEST_CASE("emulated allreduce matrix: " NAME ": counts up to 1000, p 24 to 100", "[exhaustive]") {      \
    check_matrix(NAME, default_ranks_between(24, 100), Counts::up_to_1000);                               \
  }                                                                                                       \
  TEST_CASE("emulated allreduce matrix: " NAME ": count 2^16+3, p up to 33") {                            \
    check_matrix(NAME, default_ranks_between(1, 33), Counts::large);                                      \
  }                                                                                                       \
  TEST_CASE("emulated allreduce matrix: " NAME ": count 2^16+3, p 64 and 100", "[exhaustive]") {          \
    check_matrix(NAME, {64, 100}, Counts::large);                                                         \
  }                                                                                                       \
  TEST_CASE("emulated allreduce matrix: " NAME ": counts up to 2^16+3, the other p up to 33", "[slow]") { \
    check_matrix(NAME, other_ranks_up_to_33(), Counts::up_to_large);                                      \
  }                                                                                                       \
  TEST_CASE("emulated allreduce matrix: " NAME ": count 2^20+3, every p", "[slow]") {                     \
    check_matrix(NAME, every_rank_count(), Counts::huge);                                                 \
  }

COPSE_MATRIX("binomial")
COPSE_MATRIX("chain")
COPSE_MATRIX("binary-tree")
COPSE_MATRIX("dual-root")
COPSE_MATRIX("two-tree")
COPSE_MATRIX("ring")
COPSE_MATRIX("rabenseifner")
COPSE_MATRIX("recursive-doubling")
COPSE_MATRIX("flat")
COPSE_MATRIX("bi-greedy")
COPSE_MATRIX("slt")
COPSE_MATRIX("prr")

TEST_CASE("every allreduce builder is covered by the acceptance matrix") {
  std::set<std::string> registered;
  for (const Catch::TestCase& t : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
    registered.insert(t.name);
  int covered = 0;
  for (const auto& a : algorithms()) {
    if (a.collective != Collective::allreduce) continue;
    ++covered;
    for (const char* part : kParts) {
      const std::string name = "emulated allreduce matrix: " + std::string(a.name) + part;
      INFO(name);
      CHECK(registered.count(name) == 1);  // a new allreduce algorithm needs its COPSE_MATRIX line above
    }
  }
  CHECK(covered == 12);
}

TEST_CASE("the acceptance matrix's parts cover every p, and the default run every kind of p") {
  // Default and slow parts together: p = 1..33, 64, 100, each once per count class.
  const std::vector<int> small = default_ranks_between(1, 17), large = default_ranks_between(24, 100);
  std::vector<int> whole = default_ranks_between(1, 33);
  const std::vector<int> others = other_ranks_up_to_33();
  whole.insert(whole.end(), others.begin(), others.end());
  whole.insert(whole.end(), {64, 100});
  std::sort(whole.begin(), whole.end());
  CHECK(whole == every_rank_count());
  // The two default parts of each count class: together the default sweep, each p once.
  std::vector<int> defaults = small;
  defaults.insert(defaults.end(), large.begin(), large.end());
  CHECK(defaults == default_ranks());
  std::vector<int> defaults_large = default_ranks_between(1, 33);
  defaults_large.insert(defaults_large.end(), {64, 100});
  CHECK(defaults_large == default_ranks());
  // What the sanitizer runs keep (no [exhaustive]): every layout and kind of p up to 17.
  std::set<int> small_layouts;
  for (int p : small) small_layouts.insert(ranks_per_node_for(p));
  CHECK(small_layouts == std::set<int>{1, 2, 3, 4, 8});

  // The default run keeps every node layout, and the small and special p.
  std::set<int> layouts;
  for (int p : default_ranks()) layouts.insert(ranks_per_node_for(p));
  CHECK(layouts == std::set<int>{1, 2, 3, 4, 8});
  const std::vector<int> d = default_ranks();
  // 1..3, primes on one rank per node, powers of two and their neighbours,
  // non-powers of two on nodes of 2, 3, 4 and 8, and 64 and 100.
  for (int p : {1, 2, 3, 5, 7, 13, 17, 31, 4, 8, 16, 32, 64, 9, 15, 33, 6, 10, 12, 24, 100}) {
    INFO("p = " << p);
    CHECK(std::count(d.begin(), d.end(), p) == 1);
  }
}

// The matrix's two shortcuts, checked on their own: rank threads shared by
// many emulations, and a reference computed once by the caller.
TEST_CASE("concurrency: rank threads run every index once, all at the same time, and are reused") {
  // One worker per core, and one worker for every rank (as the matrix runs).
  const int workers = GENERATE(0, 1);
  INFO("workers " << workers);
  RankThreads threads(workers);
  CHECK(threads.size() == 0);
  int most = 0;
  for (int n : {3, 1, 8, 0, 5, 8}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
    std::atomic<std::uint32_t> arrived{0};
    const std::function<void(int)> body = [&](int r) {
      runs[static_cast<std::size_t>(r)].fetch_add(1);
      // Every body waits for all of them: bodies run one after another would
      // hang here. (They wait as ranks do, through wait_while_equal: bodies
      // are tasks on a worker thread per core, see emulator.hpp.)
      WaitPolicy policy;
      policy.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      std::uint32_t seen = arrived.fetch_add(1) + 1;
      wake_all(arrived);
      while (seen < static_cast<std::uint32_t>(n)) seen = wait_while_equal(arrived, seen, policy);
    };
    threads.start(n, body);
    threads.wait();
    most = std::max(most, n);
    CHECK(threads.size() == most);
    for (const auto& r : runs) CHECK(r.load() == 1);
  }
}

TEST_CASE("concurrency: emulations on shared rank threads, and against a reference the caller gives") {
  const AlgorithmInfo& rd = find_algorithm(Collective::allreduce, "recursive-doubling");
  const ReduceOp affine = builtin_op("affine", DType::uint64);
  RankThreads threads;
  for (int p : {6, 3, 12}) {
    INFO("p = " << p);
    EmulatorConfig config = cluster_for(p);
    const Shape shape{p, 100, 2, 0};
    const EmulationResult alone = emulate(rd, shape, affine, config);
    config.threads = &threads;
    const EmulationResult shared = emulate(rd, shape, affine, config);
    REQUIRE(alone.verified);
    REQUIRE(shared.verified);
    CHECK(shared.virtual_finish == alone.virtual_finish);

    // The given reference is the one checked: right, one element wrong, wrong size.
    std::vector<std::byte> reference = reference_result(affine, p, 100);
    CHECK(emulate(rd, shape, affine, config, reference).verified);
    reference[5 * affine.element_bytes] ^= std::byte{1};
    const EmulationResult wrong = emulate(rd, shape, affine, config, reference);
    CHECK_FALSE(wrong.verified);
    CHECK_THAT(wrong.failure, Catch::Contains("wrong result at element 5"));
    reference.pop_back();
    CHECK_THROWS_AS(emulate(rd, shape, affine, config, reference), UsageError);
  }
  CHECK(threads.size() == 12);

  // A rank that fails ends the emulation with its error; the threads stay usable.
  const ReduceOp boom =
      user_op("boom", DType::int32, true, 4, [](const void*, void*, std::size_t) { throw std::runtime_error("boom"); });
  EmulatorConfig config = cluster_for(8);
  config.threads = &threads;
  const AlgorithmInfo& chain = find_algorithm(Collective::allreduce, "chain");
  CHECK_THROWS_WITH(emulate(chain, Shape{8, 100, 4, 0}, boom, config), "boom");
  CHECK(emulate(chain, Shape{8, 100, 4, 0}, builtin_op("sum", DType::int32), config).verified);
}
