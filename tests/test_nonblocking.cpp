// The thread Comm's nonblocking and persistent allreduce (runtime/pending.hpp):
// the same resumable run (StepExecutor::start, advance) as the blocking
// call's, progressed by Request::test -- same results, same virtual times.
// Every other collective's forms: test_nonblocking_collectives.cpp.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "comm_threads.hpp"
#include "common/error.hpp"
#include "runtime/comm.hpp"

namespace copse::testing {
namespace {

std::int64_t nb_value(int rank, std::size_t i, int salt) {
  return (rank + 1) * 1000003 + static_cast<std::int64_t>(i) * 7 + salt;
}

// Every rank's sum at element i (the sequential reference).
std::int64_t nb_sum(int p, std::size_t i, int salt) {
  std::int64_t s = 0;
  for (int r = 0; r < p; ++r) s += nb_value(r, i, salt);
  return s;
}

std::vector<std::int64_t> nb_input(int rank, std::size_t n, int salt) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = nb_value(rank, i, salt);
  return v;
}

bool nb_summed(const std::vector<std::int64_t>& got, int p, int salt) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != nb_sum(p, i, salt)) return false;
  return true;
}

}  // namespace

TEST_CASE("thread Comm: iallreduce, several outstanding, tested to the end, then a blocking one", "[comm]") {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{1}, {2}, {3}, {2, 3}}) {
    Team team(options_for(nodes));
    const int p = team.size();
    const ReduceOp sum = builtin_op("sum", DType::int64);
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(p + 1), std::size_t{1000}}) {
      INFO("nodes " << nodes.size() << ", p = " << p << ", n = " << n);
      std::vector<int> good(static_cast<std::size_t>(p), 0);
      check_no_errors(on_every_rank(team, [&](Comm& c) {
        const auto a_in = nb_input(c.rank(), n, 1), b_in = nb_input(c.rank(), n, 2);
        std::vector<std::int64_t> a(n), b(n), in_place = nb_input(c.rank(), n, 3), blocking(n);
        Request ra = c.iallreduce(a_in.data(), a.data(), n, sum);
        Request rb = c.iallreduce(b_in.data(), b.data(), n, sum);
        Request rc = c.iallreduce(in_place.data(), in_place.data(), n, sum);
        while (!rb.test()) {
        }
        const bool in_order = ra.done();                    // b is done only after a
        c.allreduce(b_in.data(), blocking.data(), n, sum);  // completes c first
        const bool drained = rc.done();
        ra.wait();
        rc.wait();
        good[static_cast<std::size_t>(c.rank())] = in_order && drained && nb_summed(a, p, 1) && nb_summed(b, p, 2) &&
                                                   nb_summed(in_place, p, 3) && nb_summed(blocking, p, 2);
      }));
      CHECK(good == std::vector<int>(static_cast<std::size_t>(p), 1));
    }
  }
}

TEST_CASE("thread Comm: an iallreduce after a scatter whose root went ahead starts without waiting", "[comm]") {
  // The scatter's root posts and returns (transport/direct_reduce.hpp); its
  // next call may rewrite its buffers only once every peer has posted the
  // scatter. A nonblocking start must not wait for that: rank 1 enters the
  // scatter only after rank 0's iallreduce has returned.
  TeamOptions o = options_for({3});
  o.wait_timeout = std::chrono::milliseconds(5000);
  Team team(o);
  const ReduceOp sum = builtin_op("sum", DType::int64);
  std::atomic<bool> started{false};
  std::vector<int> good(3, 0);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    if (c.rank() == 1)
      while (!started.load()) std::this_thread::yield();
    std::vector<std::int64_t> all{10, 11, 12}, mine{-1};
    c.scatter(all.data(), mine.data(), 1, DType::int64, 0);
    const auto in = nb_input(c.rank(), 2, 4);
    std::vector<std::int64_t> out(2);
    Request r = c.iallreduce(in.data(), out.data(), 2, sum);
    if (c.rank() == 0) started = true;
    r.wait();
    good[static_cast<std::size_t>(c.rank())] = mine[0] == 10 + c.rank() && nb_summed(out, 3, 4);
  }));
  CHECK(good == std::vector<int>(3, 1));
}

TEST_CASE("thread Comm: iallreduce advanced by tests keeps the blocking call's virtual time", "[comm]") {
  TeamOptions o = options_for({3, 2}, "size:2");
  o.virtual_clock = true;
  Team team(o);
  const int p = team.size();
  const ReduceOp sum = builtin_op("sum", DType::int64);
  const std::size_t n = 777;
  std::vector<Picos> blocking(static_cast<std::size_t>(p)), nonblocking(static_cast<std::size_t>(p));
  std::vector<int> good(static_cast<std::size_t>(p), 0);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    const auto in = nb_input(c.rank(), n, 0);
    std::vector<std::int64_t> out(n);
    c.allreduce(in.data(), out.data(), n, sum);
    blocking[static_cast<std::size_t>(c.rank())] = c.virtual_time();
    Request r = c.iallreduce(in.data(), out.data(), n, sum);
    while (!r.test()) {
    }
    nonblocking[static_cast<std::size_t>(c.rank())] = c.virtual_time();
    good[static_cast<std::size_t>(c.rank())] = nb_summed(out, p, 0);
  }));
  CHECK(good == std::vector<int>(static_cast<std::size_t>(p), 1));
  CHECK(nonblocking == blocking);
  for (Picos t : blocking) CHECK(t > 0);
}

TEST_CASE("thread Comm: allreduce_init plans once, each start runs it again", "[comm]") {
  Team team(options_for({3}));
  const int p = team.size();
  const ReduceOp sum = builtin_op("sum", DType::int64);
  const std::size_t n = 100;
  std::vector<int> good(static_cast<std::size_t>(p), 0);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    std::vector<std::int64_t> in(n), out(n);
    Request r = c.allreduce_init(in.data(), out.data(), n, sum);
    const std::size_t plans = c.cached_plans();
    bool all = r.done() && r.persistent();
    for (int round = 0; round < 5; ++round) {
      const auto next = nb_input(c.rank(), n, round);
      std::copy(next.begin(), next.end(), in.begin());  // the same buffer: the call holds its address
      r.start();
      r.wait();
      all = all && nb_summed(out, p, round);
    }
    all = all && c.cached_plans() == plans;
    Request once = c.iallreduce(in.data(), out.data(), n, sum);
    try {
      once.start();  // not persistent
      all = false;
    } catch (const UsageError&) {
    }
    once.wait();
    good[static_cast<std::size_t>(c.rank())] = all;
  }));
  CHECK(good == std::vector<int>(static_cast<std::size_t>(p), 1));
}

TEST_CASE("thread Comm: a persistent request dropped while its call runs: the call still completes", "[comm]") {
  // The queue holds a started persistent call by address; the last Request
  // going first hands it the call (Request::~Request), or the blocking call
  // below would progress freed memory.
  Team team(options_for({3}));
  const int p = team.size();
  const ReduceOp sum = builtin_op("sum", DType::int64);
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}}) {
    std::vector<int> good(static_cast<std::size_t>(p), 0);
    check_no_errors(on_every_rank(team, [&](Comm& c) {
      std::vector<std::int64_t> in = nb_input(c.rank(), n, 7), out(n);
      {
        Request r = c.allreduce_init(in.data(), out.data(), n, sum);
        Request copy = r;
        r.start();
      }  // both go, the call maybe still running
      std::int64_t one = 1, all = 0;
      c.allreduce(&one, &all, 1, sum);  // completes the dropped call first
      good[static_cast<std::size_t>(c.rank())] = nb_summed(out, p, 7) && all == p;
    }));
    CHECK(good == std::vector<int>(static_cast<std::size_t>(p), 1));
  }
}

}  // namespace copse::testing
