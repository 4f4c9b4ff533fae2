// The simulator against the papers' closed forms, the beta coefficients of
// Träff 2021 §1.2, port models, and the block autotuner.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>

#include "algorithms/simulator.hpp"
#include "plan/autotune.hpp"
#include "sim_support.hpp"

using namespace copse;

using testing::kAlpha;
using testing::kBeta;
using testing::kGamma;
using testing::simulated_seconds;
using testing::uniform_model;

TEST_CASE("binomial reduce takes ceil(log2 p)(alpha + beta m + gamma m)") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 3, 4, 5, 7, 8, 13, 16, 31, 100, 1000}) {
    const std::uint64_t m = 4096;
    const double expected = std::ceil(std::log2(p)) * (kAlpha + kBeta * m + kGamma * m);
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::reduce, "binomial", Shape{p, m, 1, 0}, o) == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("pipelined chain reduce, bidirectional, takes (p+q-2)(alpha + beta s + gamma s)") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 3, 4, 9, 17, 64})
    for (int q : {1, 2, 5, 16, 100}) {
      const std::uint64_t s = 1000, m = s * static_cast<std::uint64_t>(q);
      const double expected = (p + q - 2) * (kAlpha + kBeta * s + kGamma * s);
      INFO("p=" << p << " q=" << q);
      CHECK(simulated_seconds(Collective::reduce, "chain", Shape{p, m, q, p - 1}, o) ==
            Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("with alpha -> 0 and many blocks the beta coefficient tends to 4, 3 and 2", "[exhaustive]") {
  // Träff 2021 §1.2: pipelined reduce+bcast over one binary tree 4*beta*m,
  // doubly pipelined dual-root 3*beta*m, two-tree 2*beta*m.
  const auto o = uniform_model(0, kBeta, 0);
  const std::uint64_t m = 1u << 22;
  for (int p : {6, 14, 30, 62, 100}) {
    auto coefficient = [&](std::string_view name, int blocks) {
      return simulated_seconds(Collective::allreduce, name, Shape{p, m, blocks, 0}, o) /
             (kBeta * static_cast<double>(m));
    };
    INFO("p=" << p);
    for (auto [name, limit] : {std::pair{"binary-tree", 4.0}, {"dual-root", 3.0}, {"two-tree", 2.0}}) {
      const double coarse = coefficient(name, 256), fine = coefficient(name, 4096);
      INFO(name << ": " << coarse << " at 256 blocks, " << fine << " at 4096");
      CHECK(fine > limit);                   // the limit is approached from above ...
      CHECK(fine - limit < 0.01);            // ... closely with many blocks ...
      CHECK(coarse - limit > fine - limit);  // ... and more closely as blocks grow
    }
  }
}

TEST_CASE("unidirectional ports: every algorithm completes and is no faster than bidirectional") {
  const auto bi = uniform_model(kAlpha, kBeta, kGamma, Ports::bidirectional);
  const auto uni = uniform_model(kAlpha, kBeta, kGamma, Ports::unidirectional);
  for (const auto& a : algorithms())
    for (int p : {1, 2, 3, 5, 8, 13, 24, 64})
      for (int blocks : {1, 4}) {
        const Shape shape{p, 4000, blocks, p / 2};
        INFO(to_string(a.collective) << ":" << a.name << " p=" << p << " blocks=" << blocks);
        const auto tb = simulate(a.plan(shape), p, bi).time;
        const auto tu = simulate(a.plan(shape), p, uni).time;
        CHECK(tu >= tb);
      }
  // A chain reduce cannot overlap its receive and its send with one port:
  // each block costs two rounds per rank instead of one.
  const auto t_uni = simulated_seconds(Collective::reduce, "chain", Shape{8, 16000, 16, 7}, uni);
  const auto t_bi = simulated_seconds(Collective::reduce, "chain", Shape{8, 16000, 16, 7}, bi);
  CHECK(t_uni > 1.5 * t_bi);
}

TEST_CASE("link levels: ranks on one node talk at level 0") {
  SimulationOptions o;
  o.model = CostModel({LinkCost{1e-7, 1e-11}, LinkCost{1e-6, 1e-9}}, 0, Ports::bidirectional);
  const Shape shape{8, 100000, 1, 0};
  const auto& a = find_algorithm(Collective::allreduce, "recursive-doubling");
  o.layout = RankMap::uniform(8, 0);  // every rank its own node
  const auto apart = simulate(a.plan(shape), 8, o).time;
  o.layout = RankMap::uniform(8, 8);  // all on one node
  const auto together = simulate(a.plan(shape), 8, o).time;
  o.layout = RankMap::uniform(8, 4);  // two nodes: one of the three exchanges crosses nodes
  const auto two_nodes = simulate(a.plan(shape), 8, o).time;
  CHECK(to_seconds(apart) == Approx(3 * (1e-6 + 1e-9 * 100000)));
  CHECK(to_seconds(together) == Approx(3 * (1e-7 + 1e-11 * 100000)));
  CHECK(to_seconds(two_nodes) == Approx(2 * (1e-7 + 1e-11 * 100000) + (1e-6 + 1e-9 * 100000)));
}

TEST_CASE("block autotuning finds the simulated optimum near the pipelining formula") {
  const auto o = uniform_model(kAlpha, kBeta, 0);
  for (auto name : {"dual-root", "binary-tree", "two-tree", "chain"})
    for (int p : {7, 30}) {
      const auto& a = find_algorithm(Collective::allreduce, name);
      const Shape shape{p, 1u << 20, 1, 0};
      const int best = best_blocks(a, shape, o);
      auto time_at = [&](int b) {
        Shape s = shape;
        s.blocks = std::max(1, b);
        return simulate(a.plan(s), p, o).time;
      };
      INFO(name << " p=" << p << " best=" << best);
      // No block count in a wide sweep beats the tuned one by more than 1%.
      for (int b = 1; b <= 4096; b *= 2) CHECK(time_at(best) <= time_at(b) * 1.01);
      CHECK(time_at(best) < time_at(1));
    }
  CHECK(best_blocks(find_algorithm(Collective::allreduce, "ring"), Shape{8, 1u << 20, 1, 0}, o) == 1);
}

TEST_CASE("p = 1 and empty vectors take no time, and a barrier always synchronises") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (const auto& a : algorithms()) {
    INFO(to_string(a.collective) << ":" << a.name);
    // An alltoall's one rank still copies its block from its send area to its receive area.
    if (a.collective != Collective::alltoall) CHECK(simulate(a.plan(Shape{1, 1000, 4, 0}), 1, o).time == 0);
    const auto empty = simulate(a.plan(Shape{9, 0, 4, 3}), 9, o).time;
    if (a.collective == Collective::barrier)
      CHECK(empty >= 4 * to_picos(kAlpha));  // at least log2(9) rounds
    else
      CHECK(empty == 0);
  }
}

TEST_CASE("the most a rank receives: ring and Rabenseifner allreduce meet the 2(p-1)/p m bound") {
  // Every rank must receive at least (p-1)/p of the vector to reduce its
  // share and again to gather the others' shares: 2(p-1)/p m in all.
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 3, 5, 8, 16, 64}) {
    const std::uint64_t m = 1000 * static_cast<std::uint64_t>(p);
    const std::uint64_t bound = 2 * (static_cast<std::uint64_t>(p) - 1) * m / static_cast<std::uint64_t>(p);
    INFO("p=" << p);
    CHECK(simulate(find_algorithm(Collective::allreduce, "ring").plan(Shape{p, m, 1, 0}), p, o).max_elements_received ==
          bound);
    const auto rabenseifner =
        simulate(find_algorithm(Collective::allreduce, "rabenseifner").plan(Shape{p, m, 1, 0}), p, o);
    CHECK(rabenseifner.max_elements_received >= bound);
    if (std::has_single_bit(static_cast<unsigned>(p))) CHECK(rabenseifner.max_elements_received == bound);
  }
  // A binomial reduce: the root hears the whole vector from ceil(log2 p) children.
  CHECK(
      simulate(find_algorithm(Collective::reduce, "binomial").plan(Shape{9, 100, 1, 0}), 9, o).max_elements_received ==
      400);
}
