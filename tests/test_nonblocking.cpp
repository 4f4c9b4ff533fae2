// The thread Comm's nonblocking and persistent allreduce (runtime/pending.hpp):
// the same resumable run (StepExecutor::start, advance) as the blocking
// call's, progressed by Request::test -- same results, same virtual times.
// Every other collective's forms: test_nonblocking_collectives.cpp; here
// also the calls through the direct reduce's slots, whose one-sided ranks
// are done at their start, and their mismatches.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "comm_threads.hpp"
#include "common/error.hpp"
#include "runtime/comm.hpp"
#include "support.hpp"
#include "transport/direct_reduce.hpp"

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

TEST_CASE("direct nonblocking calls: a rank that reads nothing is done at its start, readers run behind", "[comm]") {
  // A nonblocking or persistent call through the slots (RankCore::slot_call):
  // a scatter's or bcast's root, a gather's or reduce's other ranks, post
  // and are done; their next start posts only once every peer has posted
  // the call before (DirectReduce::ready_to_post) -- until then its request
  // stays unposted, and a test or wait posts it.
  const int p = 3;
  TeamOptions o = options_for({p});
  o.wait_timeout = std::chrono::milliseconds(5000);
  Team team(o);
  const ReduceOp sum = builtin_op("sum", DType::int64);
  std::atomic<bool> root_went{false};
  std::vector<std::string> wrong(p);  // per rank, the first thing that went wrong
  const auto check = [&](int rank, bool ok, const std::string& what) {
    std::string& first = wrong[static_cast<std::size_t>(rank)];
    if (!ok && first.empty()) first = what;
  };
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    const auto r = static_cast<std::int64_t>(c.rank());
    {
      if (r != 0)
        while (!root_went.load()) std::this_thread::yield();
      std::vector<std::int64_t> all{7, 8, 9}, mine{-1};
      Request first = c.iscatter(all.data(), mine.data(), 1, DType::int64, 0);
      if (r == 0) {
        check(0, first.done(), "the root's iscatter is done at its start");
        root_went = true;
      }
      first.wait();
      check(c.rank(), mine[0] == 7 + r, "the first iscatter's block");
    }
    for (std::int64_t call = 1; call <= 120; ++call) {
      const auto n = static_cast<std::size_t>(call % 2 == 0 ? 2 : 100);  // in the slot's first line, and beyond
      const int root = static_cast<int>(call % p);
      if (call % 5 == 0 && r == (root + 1) % p) std::this_thread::sleep_for(std::chrono::microseconds(300));
      const std::string at = "call " + std::to_string(call) + ": ";
      std::vector<std::int64_t> all(n * p), mine(n, -1), gathered(n * p, -1), summed(n, -1), told(n, -1);
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = call * 1000 + static_cast<std::int64_t>(i);
      if (c.rank() == root) told = std::vector<std::int64_t>(n, call);
      Request scattered = c.iscatter(all.data(), mine.data(), n, DType::int64, root);
      // The gather and reduce read the scatter's result: a call's buffers
      // are its own until it is done, so they start after its wait.
      scattered.wait();
      Request gathering = c.igather(mine.data(), gathered.data(), n, DType::int64, root);
      Request reducing = c.ireduce(mine.data(), summed.data(), n, sum, root);
      Request broadcast = c.ibcast(told.data(), n, DType::int64, root);
      broadcast.test();
      broadcast.wait();  // in any order: the queue completes them in theirs
      reducing.wait();
      gathering.wait();
      bool ok = true;
      for (std::size_t i = 0; i < n; ++i) ok = ok && mine[i] == call * 1000 + static_cast<std::int64_t>(r * n + i);
      check(c.rank(), ok, at + "iscatter");
      for (std::size_t i = 0; i < gathered.size(); ++i)
        ok = ok && gathered[i] == (c.rank() == root ? call * 1000 + static_cast<std::int64_t>(i) : -1);
      check(c.rank(), ok, at + "igather");
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t expect = 0;
        for (std::int64_t q = 0; q < p; ++q) expect += call * 1000 + static_cast<std::int64_t>(q * n + i);
        ok = ok && summed[i] == (c.rank() == root ? expect : -1);
      }
      check(c.rank(), ok, at + "ireduce");
      check(c.rank(), told == std::vector<std::int64_t>(n, call), at + "ibcast");
    }
  }));
  CHECK(wrong == std::vector<std::string>(p));
}

TEST_CASE("direct nonblocking calls: a mismatched call fails every rank instead of hanging", "[comm]") {
  TeamOptions o = options_for({3});
  o.wait_timeout = std::chrono::milliseconds(2000);
  SECTION("an ibcast's sizes, which its root does not wait for") {
    Team team(o);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f);
      c.ibcast(v.data(), c.rank() == 2 ? 6 : 12, DType::float32, 0).wait();
      c.ibarrier().wait();
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THAT(message_of(e), Catch::Contains("size mismatch") && Catch::Contains("bcast"));
    }
  }
  SECTION("an igather's roots") {
    Team team(o);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f), all(36);
      c.igather(v.data(), all.data(), 12, DType::float32, c.rank() == 2 ? 1 : 0).wait();
      c.barrier();
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THAT(message_of(e), Catch::Contains("mismatched roots"));
    }
  }
}

TEST_CASE("direct nonblocking calls: a broadcast beyond the slots is read where the root's buffer lies", "[comm]") {
  // The root shares its buffer's address and is done only once every peer
  // has read it (RankCore::slot_call's `by_address`): until then a test
  // says no, and the buffer is still the caller's to keep unchanged.
  const int p = 3;
  TeamOptions o = options_for({p});
  o.wait_timeout = std::chrono::milliseconds(5000);
  Team team(o);
  std::atomic<bool> root_tested{false};
  std::vector<std::string> wrong(p);
  const auto check = [&](int rank, bool ok, const std::string& what) {
    std::string& first = wrong[static_cast<std::size_t>(rank)];
    if (!ok && first.empty()) first = what;
  };
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    const std::size_t n = 2 * DirectReduce::kPostBytes / sizeof(std::int64_t) + 5;
    for (std::int64_t round = 0; round < 40; ++round) {
      const int root = static_cast<int>(round % p);
      const std::size_t count = n + static_cast<std::size_t>(round);
      std::vector<std::int64_t> v(count, -1);
      if (c.rank() == root)
        for (std::size_t i = 0; i < count; ++i) v[i] = round * 100000 + static_cast<std::int64_t>(i);
      if (round == 0 && c.rank() != root)
        while (!root_tested.load()) std::this_thread::yield();
      if (round % 7 == 3 && c.rank() == (root + 1) % p) std::this_thread::sleep_for(std::chrono::microseconds(300));
      Request r = c.ibcast(v.data(), count, DType::int64, root);
      if (round == 0 && c.rank() == root) {
        check(root, !r.test(), "the root's ibcast is done before its readers entered");
        root_tested = true;
      }
      r.wait();
      bool ok = true;
      for (std::size_t i = 0; i < count; ++i) ok = ok && v[i] == round * 100000 + static_cast<std::int64_t>(i);
      check(c.rank(), ok, "round " + std::to_string(round) + ": ibcast");
      if (round % 5 == 0) c.barrier();  // a blocking call after one the root did not see posted
    }
  }));
  CHECK(wrong == std::vector<std::string>(p));
}

}  // namespace copse::testing
