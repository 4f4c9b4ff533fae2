// Scatter, gather and alltoall (issue 19, item 1): every registered schedule
// proven by the verifier -- each rank ends with exactly its blocks, every
// element in its place -- over rank counts, counts (0, 1, fewer elements
// than ranks, odd) and roots; and simulated against the closed forms.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>

#include "algorithms/patterns.hpp"
#include "algorithms/verifier.hpp"
#include "emulator/emulator.hpp"
#include "plan/selection.hpp"
#include "sim_support.hpp"

using namespace copse;

using testing::kAlpha;
using testing::kBeta;
using testing::kGamma;
using testing::simulated_seconds;
using testing::uniform_model;

namespace {

constexpr Collective kMoving[] = {Collective::scatter, Collective::gather, Collective::alltoall};

bool rooted(Collective c) { return c != Collective::alltoall; }

// Proves every registered algorithm of the three collectives for p ranks,
// the given counts and, for scatter and gather, roots 0, p/2 and p-1 (or
// every root); returns how many shapes were proven.
int prove_moving(int p, std::initializer_list<std::uint64_t> counts, bool every_root) {
  int proven = 0;
  for (const AlgorithmInfo& a : algorithms()) {
    if (has_hierarchy(a.collective)) continue;
    std::vector<int> roots{0};
    if (rooted(a.collective) && every_root)
      for (int r = 1; r < p; ++r) roots.push_back(r);
    else if (rooted(a.collective))
      roots = {0, p / 2, p - 1};
    for (std::uint64_t count : counts)
      for (int root : roots) {
        const VerifyResult result = verify(a, Shape{p, count, 1, root});
        INFO(to_string(a.collective) << " " << a.name << " p " << p << " count " << count << " root " << root << ": "
                                     << result.message);
        REQUIRE(result.proven);
        ++proven;
      }
  }
  return proven;
}

}  // namespace

TEST_CASE("scatter, gather and alltoall: every schedule proven for p = 1..24 and a few larger", "[data_movement]") {
  int proven = 0;
  for (int p = 1; p <= 24; ++p) proven += prove_moving(p, {0, 1, 3, static_cast<std::uint64_t>(p + 1)}, false);
  for (int p : {31, 32, 33, 64}) proven += prove_moving(p, {1, static_cast<std::uint64_t>(p / 2 + 1)}, false);
  CHECK(proven > 1000);
}

TEST_CASE("scatter, gather and alltoall: every schedule proven for p = 1..64, every root, counts 0..p+1",
          "[data_movement][exhaustive]") {
  for (int p = 1; p <= 64; ++p) {
    const auto q = static_cast<std::uint64_t>(p);
    prove_moving(p, {0, 1, 2, 3, 7, q > 1 ? q - 1 : 1, q + 1}, p <= 24);
  }
}

TEST_CASE("the data-movement verifier refuses a misplaced block, a swapped element, a combine", "[data_movement]") {
  const AlgorithmInfo& flat = find_algorithm(Collective::scatter, "flat");
  const Shape shape{4, 3, 1, 0};
  // Rank 3 receives rank 2's block into its own place.
  const SchedulePlan misplaced = [&](int rank) -> RankSchedule {
    return [](RankSchedule inner, int r) -> RankSchedule {
      while (inner.next()) {
        Step s = inner.value();
        if (s.send.peer == 3) s.send.offset = 2 * 3;
        co_yield s;
      }
      (void)r;
    }(flat.plan(shape)(rank), rank);
  };
  VerifyResult result = verify(flat, misplaced, shape);
  CHECK_FALSE(result.proven);
  CHECK_THAT(result.message, Catch::Contains("rank 3") && Catch::Contains("rank 0's element 6"));

  // An alltoall that delivers every block but one element out of order.
  const AlgorithmInfo& pairwise = find_algorithm(Collective::alltoall, "pairwise");
  const Shape three{3, 2, 1, 0};
  const SchedulePlan swapped = [&](int rank) -> RankSchedule {
    return [](RankSchedule inner, int r) -> RankSchedule {
      while (inner.next()) co_yield inner.value();
      if (r == 1) {  // swap the two elements of its received block 0 through element 0 of the send area
        Step s;
        s.copy = LocalCopy{6, 0, 1};
        co_yield s;
        s.copy = LocalCopy{7, 6, 1};
        co_yield s;
        s.copy = LocalCopy{0, 7, 1};
        co_yield s;
      }
    }(pairwise.plan(three)(rank), rank);
  };
  result = verify(pairwise, swapped, three);
  CHECK_FALSE(result.proven);
  CHECK_THAT(result.message, Catch::Contains("rank 1 ends holding rank 0's element 3 at element 6"));
  // On real data the emulator sees the same swap.
  EmulatorConfig config;
  config.layout = RankMap::uniform(3, 3);
  const EmulationResult emulated = emulate(pairwise, swapped, three, builtin_op("affine", DType::uint32), config);
  CHECK_FALSE(emulated.verified);
  CHECK_THAT(emulated.failure, Catch::Contains("rank 1") && Catch::Contains("element 6"));
  CHECK(emulate(pairwise, three, builtin_op("affine", DType::uint32), config).verified);

  // A gather whose root combines instead of replacing.
  const AlgorithmInfo& gather = find_algorithm(Collective::gather, "binomial");
  const SchedulePlan combining = [&](int rank) -> RankSchedule {
    return [](RankSchedule inner) -> RankSchedule {
      while (inner.next()) {
        Step s = inner.value();
        if (s.recv) s.combine = Combine::left;
        co_yield s;
      }
    }(gather.plan(shape)(rank));
  };
  result = verify(gather, combining, shape);
  CHECK_FALSE(result.proven);
  CHECK_THAT(result.message, Catch::Contains("combines") && Catch::Contains("only moves data"));
}

TEST_CASE("binomial scatter and gather take ceil(log2 p) alpha + (p-1)/p m beta from any root", "[data_movement]") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  const std::uint64_t c = 64;  // bytes a block; m = p c in all
  for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 33, 64, 100, 1000})
    for (int root : {0, p / 3, p - 1}) {
      const double expected = std::ceil(std::log2(p)) * kAlpha + static_cast<double>(p - 1) * c * kBeta;
      INFO("p=" << p << " root=" << root);
      for (Collective coll : {Collective::scatter, Collective::gather})
        CHECK(simulated_seconds(coll, "binomial", Shape{p, c, 1, root}, o) == Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("flat scatter and gather take (p-1)(alpha + m/p beta)", "[data_movement]") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {1, 2, 3, 8, 17, 64})
    for (int root : {0, p - 1}) {
      const double expected = (p - 1) * (kAlpha + 100 * kBeta);
      INFO("p=" << p << " root=" << root);
      for (Collective coll : {Collective::scatter, Collective::gather})
        CHECK(simulated_seconds(coll, "flat", Shape{p, 100, 1, root}, o) == Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("pairwise alltoall takes (p-1)(alpha + m/p beta) and one block's copy", "[data_movement]") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {1, 2, 3, 4, 7, 16, 33, 100}) {
    const std::uint64_t c = 64;
    const double expected = (p - 1) * (kAlpha + c * kBeta) + c * kGamma;
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::alltoall, "pairwise", Shape{p, c}, o) == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("Bruck's alltoall: ceil(log2 p) rounds of n_d blocks, log2 p (alpha + m/2 beta) at powers of two",
          "[data_movement]") {
  const std::uint64_t c = 64;
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {1, 2, 3, 4, 5, 7, 8, 12, 16, 33, 64, 100}) {
    double expected = 0;
    std::uint64_t moved = 0;  // blocks sent over all rounds
    for (int d = 1; d < p; d *= 2) {
      std::uint64_t n = 0;
      for (int i = 0; i < p; ++i) n += (i & d) ? 1 : 0;
      expected += kAlpha + static_cast<double>(n * c) * kBeta;
      moved += n;
    }
    // Each sent block is copied into the packing area and its replacement
    // back; at the end every block is copied to its place.
    expected += static_cast<double>((2 * moved + static_cast<std::uint64_t>(p)) * c) * kGamma;
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::alltoall, "bruck", Shape{p, c}, o) == Approx(expected).epsilon(1e-12));
  }
  const auto no_copies = uniform_model(kAlpha, kBeta, 0);
  for (int p : {2, 4, 16, 64, 256}) {
    const double m = static_cast<double>(p) * c;
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::alltoall, "bruck", Shape{p, c}, no_copies) ==
          Approx(std::log2(p) * (kAlpha + m / 2 * kBeta)).epsilon(1e-12));
  }
}

TEST_CASE("the selection takes Bruck for small alltoall blocks and pairwise exchange for large", "[data_movement]") {
  SimulationOptions options;  // the documented default model, every rank on a node of its own
  CHECK(select_algorithm(Collective::alltoall, Shape{64, 8}, options, true).algorithm().name == "bruck");
  CHECK(select_algorithm(Collective::alltoall, Shape{64, 1 << 20}, options, true).algorithm().name == "pairwise");
  CHECK(select_algorithm(Collective::scatter, Shape{64, 1 << 10, 1, 5}, options, true).algorithm().name == "binomial");
}

TEST_CASE("scatter, gather and alltoall: their vectors, roots and forms", "[data_movement]") {
  CHECK(vector_elements(Collective::scatter, Shape{5, 3}) == 15);
  CHECK(vector_elements(Collective::gather, Shape{5, 3}) == 15);
  CHECK(vector_elements(Collective::alltoall, Shape{5, 3}) == 30);
  for (Collective c : kMoving) {
    CHECK(parse_collective(to_string(c)) == c);
    CHECK_FALSE(has_hierarchy(c));
  }
  CHECK_THROWS_AS(validate_shape(find_algorithm(Collective::scatter, "binomial"), Shape{4, 1, 1, 4}), UsageError);
  CHECK_THROWS_AS(validate_shape(find_algorithm(Collective::gather, "flat"), Shape{4, 1, 1, -1}), UsageError);
  for (const AlgorithmInfo& a : algorithms())
    if (!has_hierarchy(a.collective)) {
      INFO(a.name);
      CHECK(takes_form(a, Form::flat));
      CHECK_FALSE(takes_form(a, Form::leader));
      CHECK_FALSE(takes_form(a, Form::lanes));
    }
  // patterns::reversed refuses what cannot run backwards.
  auto reversed_combine = patterns::reversed([]() -> RankSchedule {
    Step s;
    s.recv = Transfer{1, 0, 1};
    s.combine = Combine::left;
    co_yield s;
  }());
  CHECK_THROWS_AS(reversed_combine.next(), ScheduleError);
}
