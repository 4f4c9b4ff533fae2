// The v-variants' schedules (issue 19, item 1): blocks of unequal sizes,
// some empty (Shape::counts, algorithms/block_layout.hpp). Every registry row
// that takes counts is proven by the verifier -- every rank ends with exactly
// its blocks, in order -- for random counts with zeros, every collective and
// several roots; simulated against closed forms where one exists.
#include <catch2/catch.hpp>
#include <random>

#include "algorithms/block_layout.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "sim_support.hpp"

using namespace copse;

using testing::kAlpha;
using testing::kBeta;
using testing::kGamma;
using testing::simulated_seconds;
using testing::uniform_model;

namespace {

// Counts in [0, most], about a third of them zero; n of them.
std::shared_ptr<const std::vector<std::uint64_t>> random_counts(std::mt19937& rng, std::size_t n, std::uint64_t most) {
  std::vector<std::uint64_t> c(n);
  for (auto& x : c) x = rng() % 3 == 0 ? 0 : 1 + rng() % most;
  return std::make_shared<const std::vector<std::uint64_t>>(std::move(c));
}

Shape with_counts(int p, int root, std::shared_ptr<const std::vector<std::uint64_t>> counts) {
  Shape s{p, 0, 1, root};
  s.counts = std::move(counts);
  return s;
}

// Proves every row that takes counts for p ranks: `draws` random count sets,
// and all zeros; roots 0, p/2 and p-1 for the rooted collectives.
int prove_unequal(int p, int draws, std::uint64_t most) {
  std::mt19937 rng(static_cast<unsigned>(p) * 7919U + static_cast<unsigned>(most));
  int proven = 0;
  for (const AlgorithmInfo& a : algorithms()) {
    if (!a.unequal_counts) continue;
    const std::size_t n = static_cast<std::size_t>(p) * (a.collective == Collective::alltoall ? p : 1);
    std::vector<int> roots{0};
    if (takes_root(a.collective)) roots = {0, p / 2, p - 1};
    for (int d = 0; d <= draws; ++d) {
      auto counts = d == draws ? std::make_shared<const std::vector<std::uint64_t>>(n, 0) : random_counts(rng, n, most);
      for (int root : roots) {
        const VerifyResult result = verify(a, with_counts(p, root, counts));
        INFO(to_string(a.collective) << " " << a.name << " p " << p << " draw " << d << " root " << root << ": "
                                     << result.message);
        REQUIRE(result.proven);
        ++proven;
      }
    }
  }
  return proven;
}

}  // namespace

TEST_CASE("v-variants: every schedule taking counts is proven for p = 1..24, random counts with zeros", "[vector]") {
  int proven = 0;
  for (int p = 1; p <= 24; ++p) proven += prove_unequal(p, 3, 5);
  for (int p : {31, 32, 33}) proven += prove_unequal(p, 1, 3);
  CHECK(proven > 1500);
}

TEST_CASE("v-variants: every schedule taking counts is proven for p = 1..64", "[vector][exhaustive]") {
  for (int p = 1; p <= 64; ++p) prove_unequal(p, 4, p + 1);
}

TEST_CASE("v-variants: the rows that take counts, and what they refuse", "[vector]") {
  // allgather, reduce_scatter, scatter, gather and alltoall each have one.
  for (Collective c : {Collective::allgather, Collective::reduce_scatter, Collective::scatter, Collective::gather,
                       Collective::alltoall}) {
    int rows = 0;
    for (const AlgorithmInfo& a : algorithms()) rows += a.collective == c && a.unequal_counts;
    INFO(to_string(c));
    CHECK(rows >= 1);
  }
  auto three = std::make_shared<const std::vector<std::uint64_t>>(std::vector<std::uint64_t>{1, 0, 2});
  CHECK_THROWS_AS(validate_shape(find_algorithm(Collective::allgather, "bruck"), with_counts(3, 0, three)), UsageError);
  CHECK_THROWS_AS(validate_shape(find_algorithm(Collective::alltoall, "pairwise"), with_counts(3, 0, three)),
                  UsageError);  // needs 9
  CHECK_NOTHROW(validate_shape(find_algorithm(Collective::scatter, "binomial"), with_counts(3, 2, three)));
  CHECK(vector_elements(Collective::gather, with_counts(3, 0, three)) == 3);
  // Alltoall: the longest send area (rank 1's 5), then the longest receive area (rank 2's 6).
  auto nine = std::make_shared<const std::vector<std::uint64_t>>(std::vector<std::uint64_t>{0, 1, 2, 1, 0, 4, 0, 0, 0});
  CHECK(vector_elements(Collective::alltoall, with_counts(3, 0, nine)) == 5 + 6);
  const AlltoallLayout one(with_counts(3, 0, nine), 1);
  CHECK(one.send().offset(2) == 1);
  CHECK(one.recv().offset(0) == 5);
  CHECK(one.recv().offset(1) == 6);
}

TEST_CASE("v-variants: the verifier refuses a schedule planned for equal blocks", "[vector]") {
  // The equal-count plan of the same total moves blocks at the wrong offsets.
  auto counts = std::make_shared<const std::vector<std::uint64_t>>(std::vector<std::uint64_t>{3, 0, 1, 2});
  for (Collective c : {Collective::allgather, Collective::scatter, Collective::gather}) {
    for (const AlgorithmInfo& a : algorithms()) {
      if (a.collective != c || !a.unequal_counts) continue;
      const Shape v = with_counts(4, 1, counts);
      const VerifyResult wrong = verify(a, a.plan(Shape{4, 1, 1, 1}), v);
      INFO(to_string(c) << " " << a.name);
      CHECK_FALSE(wrong.proven);
      CHECK(verify(a, v).proven);
    }
  }
}

TEST_CASE("v-variants: linear scatterv and gatherv take the sum of alpha + c_r beta over the ranks with a block",
          "[vector]") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  std::mt19937 rng(19);
  for (int p : {1, 2, 3, 5, 8, 17}) {
    const auto counts = random_counts(rng, static_cast<std::size_t>(p), 1000);
    for (int root : {0, p - 1}) {
      double expected = 0;
      for (int r = 0; r < p; ++r)
        if (r != root && (*counts)[static_cast<std::size_t>(r)] > 0)
          expected += kAlpha + static_cast<double>((*counts)[static_cast<std::size_t>(r)]) * kBeta;
      INFO("p=" << p << " root=" << root);
      for (Collective c : {Collective::scatter, Collective::gather})
        CHECK(simulated_seconds(c, "flat", with_counts(p, root, counts), o) == Approx(expected).epsilon(1e-12));
    }
  }
}

TEST_CASE("v-variants: a ring allgatherv of one non-empty block takes (p-1)(alpha + m beta)", "[vector]") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 3, 7, 16})
    for (int owner : {0, p - 1}) {
      std::vector<std::uint64_t> c(static_cast<std::size_t>(p), 0);
      c[static_cast<std::size_t>(owner)] = 500;
      const double expected = (p - 1) * (kAlpha + 500 * kBeta);
      INFO("p=" << p << " owner=" << owner);
      CHECK(simulated_seconds(Collective::allgather, "ring",
                              with_counts(p, 0, std::make_shared<const std::vector<std::uint64_t>>(c)),
                              o) == Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("v-variants: pairwise alltoallv where each rank sends only to its successor takes alpha + c beta",
          "[vector]") {
  // Only step 1 carries data (every rank sends to r + 1), so the others are left out.
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 3, 6}) {
    std::vector<std::uint64_t> c(static_cast<std::size_t>(p * p), 0);
    for (int r = 0; r < p; ++r) c[static_cast<std::size_t>(r * p + (r + 1) % p)] = 64;
    CHECK(simulated_seconds(Collective::alltoall, "pairwise",
                            with_counts(p, 0, std::make_shared<const std::vector<std::uint64_t>>(c)),
                            o) == Approx(kAlpha + 64 * kBeta).epsilon(1e-12));
  }
}
