// The thread Comm's v-variants (issue 19: allgatherv, gatherv, scatterv,
// alltoallv) against the sequential reference of tests/vector_checks.hpp, at
// p = 1, 2, 3, 5, 8 and on two nodes: counts around 0, 1, p-1, p+1, 1000 and
// one over 2^20 bytes, every third block empty, gapped displacements, roots
// other than 0, in place and not.
#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/comm.hpp"
#include "tests/comm_threads.hpp"
#include "tests/support.hpp"
#include "tests/vector_checks.hpp"

using namespace copse;
using namespace copse::testing;

TEST_CASE("thread Comm: allgatherv, gatherv, scatterv and alltoallv match the reference", "[comm][vector]") {
  for (const std::vector<int>& layout : {std::vector<int>{1}, std::vector<int>{2}, std::vector<int>{3},
                                         std::vector<int>{5}, std::vector<int>{8}, std::vector<int>{2, 3}}) {
    Team team(options_for(layout));
    const int p = team.size();
    int i = 0;
    for (int base : {0, 1, p - 1, p + 1, 1000})
      for (bool in_place : {false, true}) {
        const int root = (i++ * 3 + 1) % p;
        std::vector<std::string> failures(static_cast<std::size_t>(p));
        check_no_errors(on_every_rank(team, [&](Comm& c) {
          failures[static_cast<std::size_t>(c.rank())] = check_vector_collectives(c, base, root, in_place);
        }));
        for (int r = 0; r < p; ++r) {
          INFO(p << " ranks, rank " << r);
          CHECK(failures[static_cast<std::size_t>(r)] == "");
        }
      }
  }
}

TEST_CASE("thread Comm: v-variants over 2^20 bytes a block", "[comm][vector]") {
  Team team(options_for({3}));
  const int base = (1 << 18) + 3;  // int32
  std::vector<std::string> failures(3);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    failures[static_cast<std::size_t>(c.rank())] = check_vector_collectives(c, base, 2, false);
  }));
  for (const std::string& f : failures) CHECK(f == "");
}

TEST_CASE("thread Comm: v-variants refuse negative counts and displacements", "[comm][vector]") {
  Team team(options_for({2}));
  const std::vector<int> counts{1, -1}, displs{0, -3}, good{1, 1};
  auto errors = on_every_rank(team, [&](Comm& c) {
    int x[4] = {};
    c.allgatherv(x, x, counts.data(), nullptr, DType::int32);
  });
  for (auto& e : errors) CHECK_THROWS_AS(std::rethrow_exception(e), UsageError);
  errors = on_every_rank(team, [&](Comm& c) {
    int x[4] = {};
    c.allgatherv(x, x, good.data(), displs.data(), DType::int32);
  });
  for (auto& e : errors) CHECK_THROWS_AS(std::rethrow_exception(e), UsageError);
}

TEST_CASE("thread Comm: on one node the v-variants are read by address, and a count that disagrees fails every rank",
          "[comm][vector]") {
  TeamOptions o = options_for({3});
  o.wait_timeout = std::chrono::milliseconds(2000);
  {
    Team team(o);
    std::vector<std::string> failures(3);
    check_no_errors(on_every_rank(team, [&](Comm& c) {
      const std::size_t plans = c.cached_plans();
      failures[static_cast<std::size_t>(c.rank())] = check_vector_collectives(c, 1000, 1, false);
      // RankCore::vector_direct: no padded collective, so nothing planned (not even the agreement's allreduce).
      if (c.cached_plans() != plans) failures[static_cast<std::size_t>(c.rank())] += "planned a direct call";
    }));
    for (const std::string& f : failures) CHECK(f == "");
  }
  Team team(o);
  // Rank 2 expects 3 elements from rank 0, which sends it 2: rank 2 fails
  // naming both (once its peers are done reading its vector), and the team
  // is broken from then on for every rank.
  std::vector<std::exception_ptr> first(3);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    const std::vector<int> send_counts{2, 2, 2}, displs{0, 2, 4};
    const std::vector<int> recv_counts{c.rank() == 2 ? 3 : 2, 2, 2}, recv_displs{0, 3, 5};
    std::vector<int> send(6, c.rank()), recv(8, -1);
    try {
      c.alltoallv(send.data(), send_counts.data(), displs.data(), recv.data(), recv_counts.data(), recv_displs.data(),
                  DType::int32);
    } catch (...) {
      first[static_cast<std::size_t>(c.rank())] = std::current_exception();
    }
    c.barrier();
  });
  REQUIRE(first[2]);
  CHECK_THROWS_AS(std::rethrow_exception(first[2]), ScheduleError);
  CHECK_THAT(message_of(first[2]), Catch::Contains("alltoallv: rank 0 sends 8 bytes to rank 2, which expects 12"));
  for (const auto& e : errors) CHECK(e);
}
