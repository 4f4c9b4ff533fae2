// Issue 2's acceptance matrix: every allreduce builder on the emulated
// cluster, for p in 1..33, 64 and 100 (laid out as nodes x ranks per node),
// counts {0, 1, 2, p-1, p, p+1, 1000, 2^20+3}, blocks {1, 2, 7, auto}, sums in
// float, double, int32 and int64, and the non-commutative `affine` for every
// algorithm that keeps rank order. Every result is compared with the
// sequential reference, and every virtual time with the simulator's.
//
// Up to 1000 elements all four sum datatypes run for every combination. At
// 2^20+3 elements (8 MiB per rank in double) one sum datatype runs per
// combination, rotating through the four, so each datatype still meets every
// algorithm, block setting and a quarter of the p values at that size;
// `affine` runs for every combination. That keeps the suite within CI time.
//
// Not prefixed "concurrency:": the TSan preset runs the smaller emulator
// tests, which use the same engine on the same algorithms.
#include <catch2/catch.hpp>

#include <numeric>

#include "internode/autotune.hpp"
#include "internode/executor.hpp"
#include "node/emulator.hpp"

using namespace copse;

namespace {

std::vector<int> ranks_under_test() {
  std::vector<int> ps(33);
  std::iota(ps.begin(), ps.end(), 1);
  ps.push_back(64);
  ps.push_back(100);
  return ps;
}

// The largest of 8, 4, 3, 2, 1 that divides p: nodes of several sizes, and
// prime p spread one rank per node, so both link levels get exercised.
int ranks_per_node_for(int p) {
  for (int k : {8, 4, 3, 2})
    if (p % k == 0 && p > k) return k;
  return 1;
}

EmulatorConfig cluster_for(int p) {
  EmulatorConfig c;
  c.ranks_per_node = ranks_per_node_for(p);
  c.nodes = p / c.ranks_per_node;
  c.repetitions = 1;
  c.wait_timeout = std::chrono::milliseconds(60000);
  return c;
}

void check_algorithm(const AlgorithmInfo& algorithm) {
  const DType sum_types[] = {DType::float32, DType::float64, DType::int32, DType::int64};
  const std::uint64_t big = (std::uint64_t{1} << 20) + 3;
  int rotation = 0;
  for (int p : ranks_under_test()) {
    const EmulatorConfig config = cluster_for(p);
    ExecutionOptions sim;
    sim.model = config.model;
    sim.ranks_per_node = config.ranks_per_node;
    for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, std::uint64_t(p - 1),
                                std::uint64_t(p), std::uint64_t(p + 1), std::uint64_t{1000}, big})
      for (int blocks : {1, 2, 7, 0}) {  // 0: auto
        std::vector<ReduceOp> ops;
        if (count == big) {
          ops.push_back(builtin_op("sum", sum_types[rotation++ % 4]));
        } else {
          for (DType t : sum_types) ops.push_back(builtin_op("sum", t));
        }
        if (!algorithm.needs_commutative) ops.push_back(builtin_op("affine", DType::uint64));
        for (const ReduceOp& op : ops) {
          Shape shape{p, count, blocks, 0};
          sim.element_bytes = op.element_bytes;
          if (blocks == 0) shape.blocks = best_blocks(algorithm, Shape{p, count, 1, 0}, sim);
          INFO(algorithm.name << " p=" << p << " (" << config.nodes << " nodes x " << config.ranks_per_node
                              << ") count=" << count << " blocks=" << (blocks ? std::to_string(blocks) : "auto")
                              << "->" << shape.blocks << " " << op.name << "/" << to_string(op.dtype));
          const EmulationResult result = emulate(algorithm, shape, op, config);
          INFO(result.failure);
          REQUIRE(result.verified);
          REQUIRE(result.virtual_time == execute(algorithm.plan(shape), p, sim).time);
        }
      }
  }
}

}  // namespace

TEST_CASE("emulated allreduce matches the sequential reference: binomial") { check_algorithm(find_algorithm(Collective::allreduce, "binomial")); }
TEST_CASE("emulated allreduce matches the sequential reference: chain") { check_algorithm(find_algorithm(Collective::allreduce, "chain")); }
TEST_CASE("emulated allreduce matches the sequential reference: binary-tree") { check_algorithm(find_algorithm(Collective::allreduce, "binary-tree")); }
TEST_CASE("emulated allreduce matches the sequential reference: dual-root") { check_algorithm(find_algorithm(Collective::allreduce, "dual-root")); }
TEST_CASE("emulated allreduce matches the sequential reference: two-tree") { check_algorithm(find_algorithm(Collective::allreduce, "two-tree")); }
TEST_CASE("emulated allreduce matches the sequential reference: ring") { check_algorithm(find_algorithm(Collective::allreduce, "ring")); }
TEST_CASE("emulated allreduce matches the sequential reference: rabenseifner") { check_algorithm(find_algorithm(Collective::allreduce, "rabenseifner")); }
TEST_CASE("emulated allreduce matches the sequential reference: recursive-doubling") { check_algorithm(find_algorithm(Collective::allreduce, "recursive-doubling")); }
TEST_CASE("emulated allreduce matches the sequential reference: flat") { check_algorithm(find_algorithm(Collective::allreduce, "flat")); }

TEST_CASE("every allreduce builder is covered by the acceptance matrix") {
  int covered = 0;
  for (const auto& a : algorithms()) covered += a.collective == Collective::allreduce;
  CHECK(covered == 9);  // a new allreduce algorithm needs its own test case above
}
