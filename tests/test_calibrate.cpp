// copse calibrate's arithmetic (tools/calibrate.hpp): the least-squares fit of
// alpha and beta on data with known coefficients, the spreads, the sizes of a
// sweep, and which core pairs stand for which level of a machine. The
// measurement itself runs in tests/cli_calibrate.sh.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.hpp"
#include "tools/calibrate.hpp"

using namespace copse;

namespace {

std::vector<double> sizes_8_to_4mib() {
  std::vector<double> x;
  for (double n = 8; n <= 4 << 20; n *= 2) x.push_back(n);
  return x;
}

}  // namespace

TEST_CASE("calibrate: the fit recovers alpha and beta from exact data", "[calibrate]") {
  const std::vector<double> x = sizes_8_to_4mib();
  for (const auto& [alpha, beta] : {std::pair{400e-9, 62e-12}, std::pair{1.5e-6, 100e-12}, std::pair{2e-9, 1e-9}}) {
    std::vector<double> t;
    for (double n : x) t.push_back(alpha + beta * n);
    const LinearFit fit = fit_alpha_beta(x, t);
    CHECK(fit.alpha == Approx(alpha).epsilon(1e-9));
    CHECK(fit.beta == Approx(beta).epsilon(1e-9));
    CHECK(fit.residual < 1e-9);
    CHECK_FALSE(fit.clamped);
  }
}

TEST_CASE("calibrate: the fit weighs every size alike under relative noise", "[calibrate]") {
  // 5 % multiplicative noise: an unweighted fit would let the 4 MiB points
  // decide alpha (their absolute errors are 10^4 times larger than alpha);
  // the relative fit still finds it within a few per cent.
  const double alpha = 800e-9, beta = 50e-12;
  const std::vector<double> x = sizes_8_to_4mib();
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  std::vector<double> t;
  for (double n : x) t.push_back((alpha + beta * n) * (1 + noise(random)));
  const LinearFit fit = fit_alpha_beta(x, t);
  CHECK(fit.alpha == Approx(alpha).epsilon(0.05));
  CHECK(fit.beta == Approx(beta).epsilon(0.05));
  CHECK(fit.residual > 0.005);
  CHECK(fit.residual < 0.05);
}

TEST_CASE("calibrate: a negative coefficient is clamped and the other refitted", "[calibrate]") {
  // Times falling with size: beta would be negative.
  const std::vector<double> x{8, 64, 512, 4096};
  const std::vector<double> t{2e-6, 1.9e-6, 1.8e-6, 1.7e-6};
  LinearFit fit = fit_alpha_beta(x, t);
  CHECK(fit.clamped);
  CHECK(fit.beta == 0);
  CHECK(fit.alpha > 1.7e-6);
  CHECK(fit.alpha < 2e-6);
  // Pure bandwidth with a tiny negative intercept: alpha clamped to 0, beta from the data.
  const std::vector<double> t2{8e-9 * 0.5, 64e-9, 512e-9, 4096e-9};
  fit = fit_alpha_beta(x, t2);
  CHECK(fit.alpha == 0);
  CHECK(fit.beta > 0.5e-9);
  CHECK(fit.beta < 1.01e-9);
}

TEST_CASE("calibrate: the fit refuses what it cannot fit", "[calibrate]") {
  const std::vector<double> one{8}, t1{1e-6};
  CHECK_THROWS_AS(fit_alpha_beta(one, t1), UsageError);
  const std::vector<double> same{64, 64, 64}, t3{1e-6, 1.1e-6, 0.9e-6};
  CHECK_THROWS_AS(fit_alpha_beta(same, t3), UsageError);
  const std::vector<double> x{8, 16}, zero{0, 1e-6}, nan{NAN, 1e-6};
  CHECK_THROWS_AS(fit_alpha_beta(x, zero), UsageError);
  CHECK_THROWS_AS(fit_alpha_beta(x, nan), UsageError);
}

TEST_CASE("calibrate: a sweep's fit and the spread of its per-repetition fits", "[calibrate]") {
  Sweep sweep;
  // Three repetitions with alpha 1, 2 and 3 us and beta 10, 20, 30 ps/B.
  for (std::uint64_t n : {8, 1024, 1 << 20}) {
    sweep.bytes.push_back(n);
    std::vector<double> reps;
    for (double k : {3.0, 1.0, 2.0}) reps.push_back(k * (1e-6 + 10e-12 * static_cast<double>(n)));
    sweep.seconds.push_back(reps);
  }
  analyse(sweep);
  // The fit: each size's fastest repetition.
  CHECK(sweep.fit.alpha == Approx(1e-6).epsilon(1e-9));
  CHECK(sweep.fit.beta == Approx(10e-12).epsilon(1e-9));
  CHECK(sweep.alpha.min == Approx(1e-6).epsilon(1e-9));
  CHECK(sweep.alpha.median == Approx(2e-6).epsilon(1e-9));
  CHECK(sweep.alpha.max == Approx(3e-6).epsilon(1e-9));
  CHECK(sweep.beta.max == Approx(30e-12).epsilon(1e-9));
}

TEST_CASE("calibrate: spreads and sweep sizes", "[calibrate]") {
  const Spread odd = spread_of({5, 1, 3});
  CHECK((odd.min == 1 && odd.median == 3 && odd.max == 5));
  CHECK(spread_of({4, 1, 2, 3}).median == 2.5);
  CalibrateOptions options;
  std::vector<std::uint64_t> sizes = sweep_sizes(options);
  CHECK(sizes.front() == 8);
  CHECK(sizes.back() == std::uint64_t{4} << 20);
  CHECK(sizes.size() == 20);  // 8 B = 2^3 .. 4 MiB = 2^22
  options.max_bytes = 1000;
  sizes = sweep_sizes(options);
  CHECK(sizes == std::vector<std::uint64_t>{8, 16, 32, 64, 128, 256, 512, 1000});
  options.quick = true;
  options.max_bytes = std::uint64_t{1} << 30;
  sizes = sweep_sizes(options);
  CHECK(sizes.back() == std::uint64_t{256} << 10);  // quick stops at 256 KiB
  options.max_bytes = 8;
  CHECK_THROWS_AS(check_options(options), UsageError);
  options.max_bytes = 16;
  options.repetitions = 0;
  CHECK_THROWS_AS(check_options(options), UsageError);
}

TEST_CASE("calibrate: one core pair per level of the machine", "[calibrate]") {
  std::vector<std::string> skipped;
  // Two packages, each an L3 over two L2s of two cores (two PUs each).
  const Machine big = Machine::synthetic("package:2 l3:1 l2:2 core:2 pu:2");
  std::vector<int> all(static_cast<std::size_t>(big.pus()));
  std::iota(all.begin(), all.end(), 0);
  std::vector<CorePair> pairs = core_pairs(big, all, skipped);
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[0].level == "l2");
  CHECK(pairs[0].pu_a == 0);
  CHECK(pairs[0].pu_b == 2);  // PU 1 is PU 0's SMT sibling: not a pair of cores
  CHECK(pairs[0].group_cores == 2);
  CHECK(pairs[1].level == "l3");
  CHECK(pairs[1].group_cores == 4);
  CHECK(pairs[2].level == "machine");
  CHECK(big.container("package", pairs[2].pu_a) != big.container("package", pairs[2].pu_b));
  REQUIRE(skipped.size() == 1);  // a package holds one L3: no pair across L3s within one
  CHECK(skipped[0].find("package") != std::string::npos);

  // This machine's shape: one L3 over two cores with their own L2s.
  skipped.clear();
  const Machine two = Machine::synthetic("package:1 l3:1 l2:2 core:1 pu:1");
  const std::vector<int> both{0, 1};
  pairs = core_pairs(two, both, skipped);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].level == "l3");
  CHECK(skipped.size() == 3);

  // A process allowed on one CPU has no pair at all.
  skipped.clear();
  const std::vector<int> one{1};
  CHECK(core_pairs(two, one, skipped).empty());
  CHECK(skipped.size() == 4);
}
