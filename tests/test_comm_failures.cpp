// The thread-rank Comm when something goes wrong or waits: a rank that
// never calls (a TimeoutError naming it, not a hang, and the team broken
// from then on), an operator that throws on one rank (every rank fails with
// its error), a late rank without a deadline (waited for, and reported), and
// the deadline's defaults and bad values. test_comm.cpp has the results.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"
#include "tests/comm_threads.hpp"
#include "tests/support.hpp"

using namespace copse;
using copse::testing::message_of;
using copse::testing::on_every_rank;
using copse::testing::options_for;

TEST_CASE("concurrency: comm: a rank that never calls makes the others time out naming it", "[comm]") {
  {
    TeamOptions o = options_for({2});
    o.wait_timeout = std::chrono::milliseconds(200);
    Team team(o);
    const ReduceOp op = builtin_op("sum", DType::int32);
    const auto t0 = std::chrono::steady_clock::now();
    const auto errors = on_every_rank(
        team,
        [&](Comm& c) {
          std::vector<int> v(100, 1);
          c.allreduce(v.data(), v.data(), v.size(), op);
        },
        1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE(errors[0]);
    CHECK_THROWS_AS(std::rethrow_exception(errors[0]), TimeoutError);
    CHECK_THAT(message_of(errors[0]), Catch::Contains("rank 0") && Catch::Contains("of call 0 (allreduce)") &&
                                          Catch::Contains("waiting for rank 1") &&
                                          Catch::Contains("rank 1 has not started"));
    // The team is broken from now on: every call says why, at once.
    std::vector<int> v(10, 1);
    CHECK_THROWS_AS(team.comm(0).allreduce(v.data(), v.data(), v.size(), op), TimeoutError);
    CHECK_THROWS_AS(team.comm(1).barrier(), TimeoutError);
  }
  {
    // Three ranks on two nodes, rank 2 absent: both callers fail with the
    // first timeout (a waiter on rank 2, or on a rank stuck on rank 2).
    TeamOptions o = options_for({2, 1});
    o.wait_timeout = std::chrono::milliseconds(200);
    Team team(o);
    const auto errors = on_every_rank(
        team,
        [&](Comm& c) {
          std::vector<double> v(1000, 1.0);
          c.bcast(v.data(), v.size(), DType::float64, 2);
        },
        2);
    for (int r = 0; r < 2; ++r) {
      REQUIRE(errors[static_cast<std::size_t>(r)]);
      CHECK_THROWS_AS(std::rethrow_exception(errors[static_cast<std::size_t>(r)]), TimeoutError);
      CHECK_THAT(message_of(errors[static_cast<std::size_t>(r)]),
                 Catch::Contains("timed out after 200 ms waiting for rank ") && Catch::Contains("(bcast)"));
    }
    CHECK(message_of(errors[0]) == message_of(errors[1]));
  }
}

TEST_CASE("concurrency: comm: a throwing operator on one rank fails every rank with its error", "[comm]") {
  Team team(options_for({3, 2}, "size:2"));
  std::atomic<bool> thrown{false};
  const ReduceOp boom = user_op("boom", DType::int32, true, 4, [&](const void*, void*, std::size_t) {
    if (!thrown.exchange(true)) throw std::runtime_error("boom on the first combine");
  });
  const auto errors = on_every_rank(team, [&](Comm& c) {
    std::vector<int> v(1000, 1);
    c.allreduce(v.data(), v.data(), v.size(), boom);
  });
  // Every rank's result depends on that combine, so nobody can finish.
  for (std::size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    CHECK(message_of(errors[r]) == "boom on the first combine");
  }
  std::vector<int> v(10, 1);
  CHECK_THROWS_WITH(team.comm(0).allreduce(v.data(), v.data(), v.size(), builtin_op("sum", DType::int32)),
                    "boom on the first combine");
}

TEST_CASE("concurrency: comm: without a deadline a late rank is waited for, and reported", "[comm]") {
  TeamOptions o = options_for({2, 1});
  o.wait_timeout.reset();  // the Comm default: no deadline
  o.wait_report = std::chrono::milliseconds(40);
  std::mutex reports_mutex;
  std::vector<std::string> reports;
  o.on_wait_report = [&](const std::string& message) {
    std::lock_guard<std::mutex> lock(reports_mutex);
    reports.push_back(message);
  };
  Team team(o);
  const ReduceOp op = builtin_op("sum", DType::int64);
  std::vector<std::vector<std::int64_t>> results(3);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    // Rank 2 arrives long after several report intervals have passed.
    if (c.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    auto& v = results[static_cast<std::size_t>(c.rank())];
    v.assign(1000, c.rank() + 1);
    c.allreduce(v.data(), v.data(), v.size(), op);
  });
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK_FALSE(errors[r]);
    CHECK(results[r] == std::vector<std::int64_t>(1000, 1 + 2 + 3));
  }
  // Rank 1 may be reporting that it waits for rank 0; somebody must name rank 2.
  std::lock_guard<std::mutex> lock(reports_mutex);
  REQUIRE_FALSE(reports.empty());
  for (const auto& report : reports)
    CHECK_THAT(report, Catch::Contains("still blocked after") && Catch::Contains("(allreduce)"));
  CHECK(std::any_of(reports.begin(), reports.end(), [](const std::string& report) {
    return report.find("waiting for rank 2") != std::string::npos &&
           report.find("rank 2 has not started") != std::string::npos;
  }));
}

TEST_CASE("comm: TeamOptions waits without a deadline by default, and refuses a non-positive one", "[comm]") {
  CHECK_FALSE(TeamOptions().wait_timeout.has_value());
  CHECK(TeamOptions().wait_report == std::chrono::seconds(60));
  TeamOptions o = options_for({2});
  o.wait_timeout = std::chrono::milliseconds(0);
  CHECK_THROWS_AS(Team(o), UsageError);
  o.wait_timeout.reset();
  o.wait_report = std::chrono::milliseconds(-1);
  CHECK_THROWS_AS(Team(o), UsageError);
}
