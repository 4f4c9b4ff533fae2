// The thread Comm's v-variants (issue 19: allgatherv, gatherv, scatterv,
// alltoallv) against the sequential reference of tests/vector_checks.hpp, at
// p = 1, 2, 3, 5, 8 and on two nodes: counts around 0, 1, p-1, p+1, 1000 and
// one over 2^20 bytes, every third block empty, gapped displacements, roots
// other than 0, in place and not.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "runtime/comm.hpp"
#include "tests/comm_threads.hpp"
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
