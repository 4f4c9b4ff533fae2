// The verifier proves every builder, and fails where it should.
#include <catch2/catch.hpp>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"

using namespace copse;

namespace {

std::string name_of(const AlgorithmInfo& a) { return std::string(to_string(a.collective)) + ":" + std::string(a.name); }

}  // namespace

TEST_CASE("verifier proves every allreduce builder for p in 1..64 and blocks {1,2,3,7,16}", "[exhaustive]") {
  for (const auto& a : algorithms()) {
    if (a.collective != Collective::allreduce) continue;
    for (int p = 1; p <= 64; ++p)
      for (int blocks : {1, 2, 3, 7, 16})
        for (std::uint64_t count :
             {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p + 1), std::uint64_t(3 * p + 5)}) {
          const auto r = verify(a, Shape{p, count, blocks, 0});
          INFO(name_of(a) << " p=" << p << " blocks=" << blocks << " count=" << count << ": " << r.message);
          REQUIRE(r.proven);
        }
  }
}

TEST_CASE("verifier proves reduce and bcast builders for every root", "[exhaustive]") {
  for (const auto& a : algorithms()) {
    if (a.collective == Collective::allreduce) continue;
    for (int p : {1, 2, 3, 5, 8, 13, 17, 32, 33})
      // Every root where the collective has one (allgather, alltoall and the
      // like ignore Shape::root: one pass proves them).
      for (int root = 0; root < (takes_root(a.collective) ? p : 1); ++root)
        for (int blocks : {1, 3, 7})
          for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, std::uint64_t(2 * p + 3)}) {
            const auto r = verify(a, Shape{p, count, blocks, root});
            INFO(name_of(a) << " p=" << p << " root=" << root << " blocks=" << blocks << " count=" << count << ": "
                            << r.message);
            REQUIRE(r.proven);
          }
  }
}

TEST_CASE("verifier finds order violations, size mismatches and deadlocks") {
  SECTION("ring is not order-preserving, so it must declare commutativity") {
    auto ring = find_algorithm(Collective::allreduce, "ring");
    REQUIRE(ring.needs_commutative);
    REQUIRE(verify(ring, Shape{5, 10, 1, 0}).proven);
    ring.needs_commutative = false;  // pretend it keeps rank order
    const auto r = verify(ring, Shape{5, 10, 1, 0});
    REQUIRE_FALSE(r.proven);
    REQUIRE_THAT(r.message, Catch::Contains("not adjacent in rank order"));
  }
  // Two ranks exchanging; `mode` breaks it in one way.
  static int mode = 0;
  const AlgorithmInfo broken{Collective::allreduce, "broken", "", false, false, [](const Shape& s) -> SchedulePlan {
                               return [s](int rank) -> RankSchedule {
                                 const int peer = 1 - rank;
                                 Step st;
                                 st.send = {peer, 0, s.count};
                                 st.recv = {peer, 0, s.count};
                                 st.combine = (mode == 0) == (peer < rank) ? Combine::right : Combine::left;
                                 if (mode == 1 && rank == 0) st.recv.count -= 1;
                                 if (mode == 2) {
                                   Step first;
                                   first.recv = {peer, 0, s.count};
                                   co_yield first;
                                 }
                                 if (mode == 3) st.send.peer = 7;
                                 co_yield st;
                               };
                             }};
  mode = 0;
  auto r = verify(broken, Shape{2, 4, 1, 0});
  CHECK_THAT(r.message, Catch::Contains("step 0 combines x_1 with x_0"));
  mode = 1;
  r = verify(broken, Shape{2, 4, 1, 0});
  CHECK_THAT(r.message, Catch::Contains("size mismatch"));
  mode = 2;
  r = verify(broken, Shape{2, 4, 1, 0});
  CHECK_THAT(r.message, Catch::Contains("deadlock"));
  CHECK_THAT(r.message, Catch::Contains("receiving 4 elements from rank 1"));
  mode = 3;
  r = verify(broken, Shape{2, 4, 1, 0});
  CHECK_THAT(r.message, Catch::Contains("not a rank"));
  mode = 4;  // the correct exchange
  CHECK(verify(broken, Shape{2, 4, 1, 0}).proven);
}

TEST_CASE("shapes are validated") {
  const auto& a = find_algorithm(Collective::reduce, "binomial");
  CHECK_THROWS_AS(verify(a, Shape{0, 4, 1, 0}), UsageError);
  CHECK_THROWS_AS(verify(a, Shape{4, 4, 0, 0}), UsageError);
  CHECK_THROWS_AS(verify(a, Shape{4, 4, 1, 4}), UsageError);
  CHECK_THROWS_AS(find_algorithm(Collective::allreduce, "nope"), UsageError);
}

TEST_CASE("verifier proves barrier, allgather and reduce_scatter builders") {
  for (const auto& a : algorithms()) {
    if (a.collective != Collective::barrier && a.collective != Collective::allgather &&
        a.collective != Collective::reduce_scatter)
      continue;
    for (int p = 1; p <= 40; ++p)
      for (int blocks : {1, 3, 7})
        for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3}}) {
          const auto r = verify(a, Shape{p, count, blocks, 0});
          INFO(name_of(a) << " p=" << p << " blocks=" << blocks << " count=" << count << ": " << r.message);
          REQUIRE(r.proven);
        }
  }
}

TEST_CASE("allgather and reduce_scatter checks catch a missing block") {
  // An allgather that forgets the last step of the ring leaves a block out.
  const auto& ring = find_algorithm(Collective::allgather, "ring");
  const AlgorithmInfo short_ring{Collective::allgather, "short", "", false, false, [](const Shape& s) -> SchedulePlan {
                                   auto full = find_algorithm(Collective::allgather, "ring").plan(s);
                                   return [full, s](int rank) -> RankSchedule {
                                     auto g = full(rank);
                                     for (int step = 0; step + 2 < s.ranks && g.next(); ++step) co_yield g.value();
                                   };
                                 }};
  REQUIRE(verify(ring, Shape{5, 2, 1, 0}).proven);
  const auto r = verify(short_ring, Shape{5, 2, 1, 0});
  REQUIRE_FALSE(r.proven);
  CHECK_THAT(r.message, Catch::Contains("ends holding nothing"));
}
