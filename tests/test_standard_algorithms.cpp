// The standard large- and small-message algorithms of MPICH and Open MPI
// (issue 18, item 2): van de Geijn's scatter-allgather bcast, Bruck's and
// recursive-doubling allgather, recursive-halving and pairwise
// reduce_scatter. Each is proven by the verifier for p = 1..64 (every root for
// bcast), costed by the simulator against its closed form, and run on real
// data by the thread Comm, flat and as the lanes' inter-node algorithm.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>

#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "comm_threads.hpp"
#include "forms_check.hpp"
#include "sim_support.hpp"

using namespace copse;
using testing::kAlpha;
using testing::kBeta;
using testing::kGamma;
using testing::simulated_seconds;
using testing::uniform_model;

namespace {

struct Named {
  Collective collective;
  std::string_view name;
};
constexpr Named kStandard[] = {{Collective::bcast, "scatter-allgather"},
                               {Collective::allgather, "bruck"},
                               {Collective::allgather, "recursive-doubling"},
                               {Collective::reduce_scatter, "recursive-halving"},
                               {Collective::reduce_scatter, "pairwise"}};

}  // namespace

TEST_CASE("the standard algorithms are proven for p = 1..64, with fewer elements than ranks and odd counts",
          "[exhaustive]") {
  for (const auto& [collective, name] : kStandard) {
    const auto& a = find_algorithm(collective, name);
    for (int p = 1; p <= 64; ++p) {
      const int roots = collective == Collective::bcast ? p : 1;
      for (int root = 0; root < roots; root += (p > 16 ? 7 : 1))
        for (std::uint64_t count :
             {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p > 1 ? p - 1 : 2), std::uint64_t(2 * p + 3)}) {
          const auto r = verify(a, Shape{p, count, 3, root});
          INFO(to_string(collective) << ":" << name << " p=" << p << " root=" << root << " count=" << count << ": "
                                     << r.message);
          REQUIRE(r.proven);
        }
    }
  }
}

TEST_CASE("the reordering reduce_scatters declare that they need a commutative operator") {
  for (std::string_view name : {"recursive-halving", "pairwise"}) {
    auto a = find_algorithm(Collective::reduce_scatter, name);
    REQUIRE(a.needs_commutative);
    a.needs_commutative = false;  // pretend it keeps rank order
    INFO(name);
    CHECK_FALSE(verify(a, Shape{5, 3, 1, 0}).proven);
  }
}

TEST_CASE("van de Geijn bcast: (log2 p + p - 1) alpha + 2 (p-1)/p m beta") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 4, 8, 16, 64}) {
    const std::uint64_t m = 1024 * static_cast<std::uint64_t>(p);
    const double steps = std::log2(p) + p - 1;
    const double expected = steps * kAlpha + 2.0 * (p - 1) / p * static_cast<double>(m) * kBeta;
    INFO("p=" << p);
    for (int root : {0, p - 1})
      CHECK(simulated_seconds(Collective::bcast, "scatter-allgather", Shape{p, m, 1, root}, o) ==
            Approx(expected).epsilon(1e-12));
    // A binomial tree's root sends the whole vector log2 p times.
    CHECK(simulated_seconds(Collective::bcast, "scatter-allgather", Shape{p, m, 1, 0}, uniform_model(0, kBeta, 0)) <
          2 / std::log2(p) *
              simulated_seconds(Collective::bcast, "binomial", Shape{p, m, 1, 0}, uniform_model(0, kBeta, 0)));
  }
}

TEST_CASE("allgather: recursive doubling takes log2 p rounds and (p-1) blocks at a power of two, Bruck any p") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 4, 8, 32}) {
    const std::uint64_t c = 1000;
    const double expected = std::log2(p) * kAlpha + (p - 1) * static_cast<double>(c) * kBeta;
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::allgather, "recursive-doubling", Shape{p, c, 1, 0}, o) ==
          Approx(expected).epsilon(1e-12));
  }
  // Bruck: ceil(log2 p) rounds, a round whose runs wrap paying a second
  // start-up and at most half its blocks again.
  for (int p : {2, 3, 4, 5, 6, 7, 8, 13, 32, 33}) {
    const double rounds = std::ceil(std::log2(p)), blocks = (p - 1) * 1000.0;
    const double t =
        simulated_seconds(Collective::allgather, "bruck", Shape{p, 1000, 1, 0}, uniform_model(kAlpha, 0, 0));
    const double volume =
        simulated_seconds(Collective::allgather, "bruck", Shape{p, 1000, 1, 0}, uniform_model(0, kBeta, 0));
    INFO("p=" << p);
    CHECK(t >= rounds * kAlpha * (1 - 1e-12));
    CHECK(t <= 2 * rounds * kAlpha * (1 + 1e-12));
    CHECK(volume >= blocks * kBeta * (1 - 1e-12));
    CHECK(volume <= 1.5 * blocks * kBeta * (1 + 1e-12));
  }
}

TEST_CASE("reduce_scatter: recursive halving log2 p steps, pairwise p-1, both (p-1) blocks sent and combined") {
  const auto o = uniform_model(kAlpha, kBeta, kGamma);
  for (int p : {2, 4, 8, 32}) {
    const std::uint64_t c = 1000;
    const double volume = (p - 1) * static_cast<double>(c) * (kBeta + kGamma);
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::reduce_scatter, "recursive-halving", Shape{p, c, 1, 0}, o) ==
          Approx(std::log2(p) * kAlpha + volume).epsilon(1e-12));
    CHECK(simulated_seconds(Collective::reduce_scatter, "pairwise", Shape{p, c, 1, 0}, o) ==
          Approx((p - 1) * kAlpha + volume).epsilon(1e-12));
  }
  for (int p : {3, 5, 7, 12, 31}) {  // any p: pairwise stays p-1 equal steps
    INFO("p=" << p);
    CHECK(simulated_seconds(Collective::reduce_scatter, "pairwise", Shape{p, 1000, 1, 0}, o) ==
          Approx((p - 1) * (kAlpha + 1000 * (kBeta + kGamma))).epsilon(1e-12));
  }
}

TEST_CASE("the standard algorithms run on real data through the thread Comm, flat and in lanes") {
  const ReduceOp affine = builtin_op("affine", DType::uint64), sum = builtin_op("sum", DType::float32);
  for (const auto& [collective, name] : kStandard) {
    const auto& a = find_algorithm(collective, name);
    // Non-commutative where the algorithm keeps order (bcast and allgather
    // combine nothing); otherwise a float sum of small integers (fill_input),
    // exact in any order, so the reduce_scatters that reorder match the
    // reference bit for bit.
    const ReduceOp& op = a.needs_commutative ? sum : affine;
    for (const auto& [layout, form] : std::vector<std::pair<std::vector<int>, Form>>{{{1}, Form::flat},
                                                                                     {{2}, Form::flat},
                                                                                     {{3}, Form::flat},
                                                                                     {{5}, Form::flat},
                                                                                     {{8}, Form::flat},
                                                                                     {{3, 3}, Form::flat},
                                                                                     {{2, 2, 2}, Form::lanes},
                                                                                     {{3, 3}, Form::lanes}}) {
      TeamOptions o = testing::options_for(layout);
      o.form = form;
      switch (collective) {
        case Collective::bcast: o.bcast = name; break;
        case Collective::allgather: o.allgather = name; break;
        default: o.reduce_scatter = name; break;
      }
      Team team(std::move(o));
      const int p = team.size();
      if (collective == Collective::bcast && p < 2) continue;  // check_collective broadcasts from rank 1
      for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p + 2), std::uint64_t{4099}}) {
        std::vector<char> right(static_cast<std::size_t>(p), 0);
        const auto errors = testing::on_every_rank(team, [&](Comm& c) {
          testing::FormBytes unused;
          right[static_cast<std::size_t>(c.rank())] = testing::check_collective(c, collective, op, n, unused);
        });
        for (int r = 0; r < p; ++r) {
          INFO(to_string(collective) << ":" << name << " form " << to_string(form) << " p=" << p << " n=" << n
                                     << " rank " << r);
          REQUIRE_FALSE(errors[static_cast<std::size_t>(r)]);
          CHECK(right[static_cast<std::size_t>(r)]);
        }
      }
    }
  }
}

TEST_CASE("an algorithm the leader form cannot run is refused when the team is made, naming the way out") {
  TeamOptions o = testing::options_for({4});
  o.bcast = "scatter-allgather";
  CHECK_THROWS_WITH(Team(o), Catch::Contains("bcast algorithm 'scatter-allgather' does not run in the leader form") &&
                                 Catch::Contains("hierarchy.form = flat, lanes or auto"));
  o.form = Form::flat;
  CHECK_NOTHROW(Team(o));
}
