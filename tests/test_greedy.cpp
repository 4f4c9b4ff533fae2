// Lowery–Langou's greedy reductions: proven by the verifier, the round count
// of bi-greedy (their Table III) in the simulator, and uni-greedy against the
// standard algorithms at their optimal segment sizes (Table I, §V-B).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "plan/autotune.hpp"
#include "support.hpp"

using namespace copse;
using copse::testing::inclusive_range;

namespace {

const AlgorithmInfo& reduce_named(std::string_view name) { return find_algorithm(Collective::reduce, name); }

SimulationOptions whole_picoseconds(Picos alpha, Picos beta, Picos gamma, Ports ports) {
  SimulationOptions o;
  o.model = CostModel::uniform({to_seconds(alpha), to_seconds(beta)}, to_seconds(gamma), ports);
  return o;
}

Picos simulated(const AlgorithmInfo& a, const Shape& shape, const SimulationOptions& o) {
  return simulate(a.plan(shape), shape.ranks, o).time;
}

// Shape planned for `o`'s model (the greedy builders read it from the hints).
Shape planned_for(Shape shape, const SimulationOptions& o) {
  auto hints = std::make_shared<PlanHints>();
  hints->model = std::make_shared<const CostModel>(o.model);
  hints->element_bytes = o.element_bytes;
  shape.hints = hints;
  return shape;
}

int ceil_log2(int p) { return p <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(p - 1))); }

// Bi-greedy reduce: exactly ceil(log2 p) + q - 1 rounds of alpha + beta s + gamma s.
void check_bi_greedy_rounds(const std::vector<int>& ps, const std::vector<int>& qs) {
  const Picos alpha = 1000000, beta = 1000, gamma = 500;  // 1 us, 1 ns/B, 0.5 ns/B: whole picoseconds
  const auto o = whole_picoseconds(alpha, beta, gamma, Ports::bidirectional);
  const std::uint64_t s = 1000;
  for (int p : ps)
    for (int q : qs) {
      const Shape shape{p, s * static_cast<std::uint64_t>(q), q, p / 3};
      const Picos round = alpha + static_cast<Picos>(s) * (beta + gamma);
      INFO("p=" << p << " q=" << q);
      REQUIRE(simulated(reduce_named("bi-greedy"), shape, o) == (ceil_log2(p) + q - 1) * round);
    }
}

}  // namespace

TEST_CASE("greedy reductions are proven for p = 1..64, every kind of root, segment counts and cost models",
          "[exhaustive]") {
  std::vector<Shape> shapes;
  for (int p = 1; p <= 64; ++p)
    for (int root : {0, p / 2, p - 1})
      for (int blocks : {1, 2, 3, 7, 16, 64})
        for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p + 1), std::uint64_t(3 * p + 5)})
          shapes.push_back(Shape{p, count, blocks, root});
  for (const Shape& shape : shapes)
    for (auto name : {"uni-greedy", "bi-greedy"}) {
      const auto r = verify(reduce_named(name), shape);
      INFO(name << " p=" << shape.ranks << " root=" << shape.root << " blocks=" << shape.blocks
                << " count=" << shape.count << ": " << r.message);
      REQUIRE(r.proven);
    }
  // Uni-greedy's pairing follows the model: latency-bound, bandwidth-bound,
  // compute-bound and a receive overhead give different schedules, all right.
  for (int p : {5, 12, 31, 64})
    for (auto [alpha, beta, gamma] : {std::tuple{0.0, 1e-9, 0.0}, {1e-5, 1e-12, 0.0}, {1e-6, 1e-10, 1e-8}})
      for (int blocks : {3, 9}) {
        SimulationOptions o;
        o.model = CostModel({{alpha, beta}}, gamma, Ports::unidirectional, 2e-7);
        const Shape shape = planned_for(Shape{p, 200, blocks, p - 2}, o);
        const auto r = verify(reduce_named("uni-greedy"), shape);
        INFO("p=" << p << " alpha=" << alpha << " gamma=" << gamma << ": " << r.message);
        REQUIRE(r.proven);
      }
}

TEST_CASE("bi-greedy allreduce is proven with every operator order it may meet") {
  const auto& a = find_algorithm(Collective::allreduce, "bi-greedy");
  REQUIRE(a.needs_commutative);
  for (int p = 1; p <= 64; ++p)
    for (int blocks : {1, 5, 64}) {
      const auto r = verify(a, Shape{p, std::uint64_t(2 * p + 1), blocks, 0});
      INFO("p=" << p << " blocks=" << blocks << ": " << r.message);
      REQUIRE(r.proven);
    }
}

TEST_CASE(
    "bi-greedy reduce takes ceil(log2 p) + q - 1 rounds: every q up to 64 for chosen p, every p up to 1024 "
    "for chosen q",
    "[exhaustive]") {
  check_bi_greedy_rounds({2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 100, 127, 128, 129, 1023, 1024}, inclusive_range(1, 64));
  check_bi_greedy_rounds(inclusive_range(2, 1024), {1, 2, 5});
}

// The whole grid, in four parts of about equal cost (it grows as p^2), so
// that CTest can run them side by side.
TEST_CASE("bi-greedy reduce takes ceil(log2 p) + q - 1 rounds for every q in 1..64: p in 2..645", "[slow]") {
  check_bi_greedy_rounds(inclusive_range(2, 645), inclusive_range(1, 64));
}
TEST_CASE("bi-greedy reduce takes ceil(log2 p) + q - 1 rounds for every q in 1..64: p in 646..813", "[slow]") {
  check_bi_greedy_rounds(inclusive_range(646, 813), inclusive_range(1, 64));
}
TEST_CASE("bi-greedy reduce takes ceil(log2 p) + q - 1 rounds for every q in 1..64: p in 814..930", "[slow]") {
  check_bi_greedy_rounds(inclusive_range(814, 930), inclusive_range(1, 64));
}
TEST_CASE("bi-greedy reduce takes ceil(log2 p) + q - 1 rounds for every q in 1..64: p in 931..1024", "[slow]") {
  check_bi_greedy_rounds(inclusive_range(931, 1024), inclusive_range(1, 64));
}

TEST_CASE("bi-greedy allreduce is the reduce and its mirror: R rounds with combines, R without") {
  const Picos alpha = 1000000, beta = 1000, gamma = 500;
  const auto o = whole_picoseconds(alpha, beta, gamma, Ports::bidirectional);
  const std::uint64_t s = 1000;
  for (int p : {2, 3, 6, 17, 64, 100})
    for (int q : {1, 4, 13}) {
      const Picos rounds = ceil_log2(p) + q - 1;
      const Shape shape{p, s * static_cast<std::uint64_t>(q), q, 0};
      INFO("p=" << p << " q=" << q);
      CHECK(simulated(find_algorithm(Collective::allreduce, "bi-greedy"), shape, o) ==
            rounds * (alpha + static_cast<Picos>(s) * (beta + gamma)) +
                rounds * (alpha + static_cast<Picos>(s) * beta));
    }
}

TEST_CASE("uni-greedy with one segment is the binomial tree: ceil(log2 p)(alpha + beta m + gamma m)") {
  // Lowery–Langou §V-B: "for small messages ... uni-greedy is exactly the binomial algorithm".
  const auto o = whole_picoseconds(1000000, 1000, 500, Ports::unidirectional);
  for (int p : {2, 3, 4, 5, 7, 8, 13, 64, 100, 1000}) {
    const Shape shape = planned_for(Shape{p, 4096, 1, 0}, o);
    INFO("p=" << p);
    CHECK(simulated(reduce_named("uni-greedy"), shape, o) == ceil_log2(p) * (1000000 + 4096 * 1500));
    CHECK(simulated(reduce_named("uni-greedy"), shape, o) == simulated(reduce_named("binomial"), shape, o));
  }
}

namespace {

// The segment count minimising a Table I closed form T(q) for m elements.
int best_segments(std::uint64_t m, const std::function<double(double q, double s)>& time) {
  int best = 1;
  double best_time = std::numeric_limits<double>::infinity();
  for (int q = 1; q <= static_cast<int>(std::min<std::uint64_t>(m, 4096)); ++q) {
    const double t = time(q, static_cast<double>(m) / q);
    if (t < best_time) best_time = t, best = q;
  }
  return best;
}

void check_uni_greedy_beats_table_one(const std::vector<int>& ps, const std::vector<std::uint64_t>& ms) {
  // Lowery–Langou §V-B's sweep, beta = 1 (one picosecond per byte here).
  for (Picos alpha : {0, 1, 10, 100, 1000})
    for (Picos gamma : {0, 1})
      for (int p : ps)
        for (std::uint64_t m : ms) {
          const auto o = whole_picoseconds(alpha, 1, gamma, Ports::unidirectional);
          const double a = static_cast<double>(alpha), w = 1.0 + static_cast<double>(gamma);
          const double n = std::ceil(std::log2(p + 1.0));
          // Table I: pipeline (chain) and binary tree in a unidirectional system.
          const int q_chain = best_segments(m, [&](double q, double s) { return (p - 1 + 2 * (q - 1)) * (a + w * s); });
          const int q_binary =
              best_segments(m, [&](double q, double s) { return (2 * (n - 1) + 4 * (q - 1)) * (a + w * s); });
          const Picos binomial = simulated(reduce_named("binomial"), Shape{p, m, 1, 0}, o);
          const Picos chain = simulated(reduce_named("chain"), Shape{p, m, q_chain, p - 1}, o);
          const Picos binary = simulated(reduce_named("binary-tree"), Shape{p, m, q_binary, p - 1}, o);
          const Picos standard = std::min({binomial, chain, binary});
          // Uni-greedy with its best equal segmentation: it is optimal for every
          // segmentation (Theorem 5), so trying the others' counts and a
          // geometric sweep suffices to show it is never slower.
          Picos greedy = std::numeric_limits<Picos>::max();
          std::vector<int> counts = {1, q_chain, q_binary};
          for (int q = 2; q <= static_cast<int>(std::min<std::uint64_t>(m, 512)); q *= 2) counts.push_back(q);
          for (int q : counts)
            greedy = std::min(greedy, simulated(reduce_named("uni-greedy"), planned_for(Shape{p, m, q, 0}, o), o));
          INFO("alpha=" << alpha << " gamma=" << gamma << " p=" << p << " m=" << m << ": greedy " << greedy
                        << ", binomial " << binomial << ", chain " << chain << " (q=" << q_chain << "), binary "
                        << binary << " (q=" << q_binary << ")");
          REQUIRE(greedy <= standard);
        }
}

}  // namespace

TEST_CASE("uni-greedy is never slower than binomial, binary and chain at their optimal segment sizes (uni ports)",
          "[exhaustive]") {
  check_uni_greedy_beats_table_one({4, 16, 64}, {4, 64, 1024, 8192});
}

TEST_CASE("uni-greedy against Table I over Lowery–Langou's sweep, p up to 256", "[slow]") {
  // Their §V-B sweep for p = 4..256 (up to 1024 the chain alone, at its
  // optimal thousands of segments, costs minutes to simulate).
  std::vector<int> ps;
  for (int k = 2; k <= 8; ++k) ps.push_back(1 << k);
  std::vector<std::uint64_t> ms;
  for (int k = 2; k <= 16; ++k) ms.push_back(std::uint64_t{1} << k);
  check_uni_greedy_beats_table_one(ps, ms);
}

TEST_CASE("unequal segmentation: never worse than the best equal one, and better where Table IV says") {
  // Lowery–Langou §VIII: m = 10, beta = 1, unidirectional ports.
  struct Case {
    int p;
    Picos alpha, gamma;
    bool improves;  // Table IV lists the case, and the search finds a better segmentation
  };
  for (const Case& c : {Case{6, 1, 1, true}, Case{8, 1, 1, true}, Case{16, 1, 0, true}, Case{256, 5, 1, true},
                        Case{4, 100, 0, false}, Case{32, 1000, 1, false}}) {
    const auto o = whole_picoseconds(c.alpha, 1, c.gamma, Ports::unidirectional);
    const auto& greedy = reduce_named("uni-greedy");
    Shape shape = planned_for(Shape{c.p, 10, 1, 0}, o);
    shape.blocks = best_blocks(greedy, shape, o);
    const SegmentSearch s = best_unequal_segments(greedy, shape, o);
    INFO("p=" << c.p << " alpha=" << c.alpha << " gamma=" << c.gamma << ": " << s.equal_time << " -> " << s.time);
    CHECK(s.equal_time == simulated(greedy, shape, o));
    CHECK(s.time == simulated(greedy, with_segments(shape, s.segments), o));
    CHECK(std::accumulate(s.segments.begin(), s.segments.end(), std::uint64_t{0}) == 10);
    CHECK(std::find(s.segments.begin(), s.segments.end(), 0) == s.segments.end());
    CHECK(verify(greedy, with_segments(shape, s.segments)).proven);
    if (c.improves)
      CHECK(s.time < s.equal_time);
    else
      CHECK(s.time == s.equal_time);
  }
  CHECK_THROWS_AS(best_unequal_segments(reduce_named("binomial"), Shape{8, 10, 2, 0}, SimulationOptions{}), UsageError);
}
