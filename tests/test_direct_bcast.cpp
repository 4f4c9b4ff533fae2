// The direct shared-memory broadcast (transport/direct_bcast.hpp) through
// the thread Comm of one node: every rank ends with the root's bytes, for
// any team size, count and root, across calls that wrap the ring and calls
// that interleave with the direct reduce; a mismatched call is an error on
// every rank, not a hang; the path plans nothing, and a named algorithm
// still runs its schedule.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm_threads.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"
#include "support.hpp"
#include "transport/arena.hpp"
#include "transport/direct_bcast.hpp"
#include "transport/direct_reduce.hpp"

using namespace copse;
using copse::testing::message_of;
using copse::testing::on_every_rank;
using copse::testing::options_for;

namespace direct_bcast_test {

// Inexact floats, different on every rank and call (a rank that kept its own
// data, or read another call's, fails the comparison).
std::vector<float> floats_of(int rank, std::size_t count, std::uint64_t call) {
  std::mt19937_64 gen(call * 1009 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = value(gen) / 3.0f;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Counts around the paths' edges: empty, one element, odd, just below and
// at the by-address size (threads: up to there through the ring), a chunk
// and a bit, the whole ring and more.
std::vector<std::size_t> counts() {
  constexpr std::size_t chunk = DirectBcast::kChunkBytes / sizeof(float);
  constexpr std::size_t ring = chunk * DirectBcast::kChunks;
  constexpr std::size_t by_address = DirectBcast::kByAddressFromBytes / sizeof(float);
  return {0, 1, 7, 1001, by_address - 1, by_address, chunk + 3, ring, 2 * ring + 5};
}

void throw_first(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace direct_bcast_test

using namespace direct_bcast_test;

TEST_CASE("direct bcast: every rank gets the root's bits, any p, count and root", "[comm][direct_bcast]") {
  for (int p : {1, 2, 3, 5, 7}) {
    Team team(options_for({p}));
    std::vector<std::string> wrong(static_cast<std::size_t>(p));
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::uint64_t call = 0;
      for (std::size_t n : counts())
        for (int root : {0, p - 1, p / 2}) {
          ++call;
          const std::vector<float> want = floats_of(root, n, call);
          std::vector<float> buffer = c.rank() == root ? want : floats_of(c.rank(), n, call);
          c.bcast(buffer.data(), n, DType::float32, root);
          if (!same_bits(buffer, want) && wrong[static_cast<std::size_t>(c.rank())].empty())
            wrong[static_cast<std::size_t>(c.rank())] = "rank " + std::to_string(c.rank()) + ": " + std::to_string(n) +
                                                        " floats from root " + std::to_string(root) + " differ";
        }
      // Nothing planned: the calls ran on the direct path, not a schedule.
      CHECK(c.cached_plans() == 0);
    });
    INFO("p = " << p);
    throw_first(errors);
    for (const std::string& w : wrong) CHECK(w == "");
  }
}

TEST_CASE("direct bcast: many calls wrap the ring and interleave with the direct reduce", "[comm][direct_bcast]") {
  const int p = 4;
  Team team(options_for({p}));
  const ReduceOp sum = builtin_op("sum", DType::int64);
  std::vector<int> bad(static_cast<std::size_t>(p), 0);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    for (std::uint64_t call = 1; call <= 200; ++call) {
      const int root = static_cast<int>(call % p);
      const std::size_t n = (call * 37) % 3000;
      std::vector<std::int64_t> v(n, c.rank() == root ? static_cast<std::int64_t>(call * 1000 + n) : -1);
      c.bcast(v.data(), n, DType::int64, root);
      bad[static_cast<std::size_t>(c.rank())] += static_cast<int>(std::count_if(
          v.begin(), v.end(), [&](std::int64_t x) { return x != static_cast<std::int64_t>(call * 1000 + n); }));
      std::int64_t one = 1, total = 0;
      if (call % 3 == 0) {
        c.allreduce(&one, &total, 1, sum);
        if (total != p) ++bad[static_cast<std::size_t>(c.rank())];
      }
    }
  });
  throw_first(errors);
  for (int b : bad) CHECK(b == 0);
}

TEST_CASE("direct bcast: a mismatched size fails every rank instead of hanging", "[comm][direct_bcast]") {
  TeamOptions o = options_for({3});
  o.wait_timeout = std::chrono::milliseconds(2000);
  Team team(o);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    std::vector<float> v(100, 1.0f);
    c.bcast(v.data(), c.rank() == 2 ? 50 : 100, DType::float32, 0);
  });
  REQUIRE(errors[2]);
  CHECK_THROWS_AS(std::rethrow_exception(errors[2]), ScheduleError);
  CHECK_THAT(message_of(errors[2]),
             Catch::Contains("rank 2 expects 200 bytes from root 0") && Catch::Contains("rank 0 broadcasts 400 bytes"));
  // The team is broken from now on: every call says why.
  std::vector<float> v(4, 0.0f);
  CHECK_THROWS_AS(team.comm(1).bcast(v.data(), 4, DType::float32, 0), ScheduleError);
}

TEST_CASE("direct bcast: a bad root is a UsageError, a named algorithm runs its schedule", "[comm][direct_bcast]") {
  Team team(options_for({3}));
  std::vector<int> v(4, 1);
  CHECK_THROWS_AS(team.comm(0).bcast(v.data(), 4, DType::int32, 3), UsageError);
  CHECK_THROWS_AS(team.comm(0).bcast(v.data(), 4, DType::int32, -1), UsageError);

  TeamOptions named = options_for({3});
  named.bcast = "binomial";
  Team scheduled(named);
  const auto errors = on_every_rank(scheduled, [&](Comm& c) {
    std::vector<int> w(5, c.rank() == 1 ? 42 : 0);
    c.bcast(w.data(), w.size(), DType::int32, 1);
    CHECK(std::all_of(w.begin(), w.end(), [](int x) { return x == 42; }));
    CHECK(c.cached_plans() == 1);
  });
  throw_first(errors);
}

TEST_CASE("direct bcast: between processes, the ring streams vectors larger than itself, or attach reads them",
          "[direct_bcast]") {
  // FutexScope::shared, as for processes: every size goes through the ring
  // -- or, with `attach`, large ones by process_vm_readv from the root's
  // buffer -- here on threads over a heap arena.
  for (bool attach : {false, true})
    for (int p : {2, 3}) {
      HeapArena arena;
      const Arena::Offset at = arena.allocate(DirectBcast::shared_bytes(p), 64);
      DirectBcast::create_at(arena.address(at), p);
      DirectBcast ring(arena.address(at), p, FutexScope::shared, nullptr);
      constexpr std::size_t big = DirectBcast::kChunkBytes * DirectBcast::kChunks * 2 + 12;
      std::vector<int> bad(static_cast<std::size_t>(p), 0);
      std::vector<std::thread> threads;
      for (int r = 0; r < p; ++r)
        threads.emplace_back([&, r] {
          DirectRank me;
          me.rank = r;
          WaitPolicy policy;
          policy.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          std::uint64_t call = 0;
          for (std::size_t floats : {big / 4, std::size_t{0}, std::size_t{3}, big / 4 - 1})
            for (int root = 0; root < p; ++root) {
              const std::vector<float> want = floats_of(root, floats, ++call);
              std::vector<float> v = r == root ? want : floats_of(r, floats, call);
              ring.bcast(me, reinterpret_cast<std::byte*>(v.data()), floats * sizeof(float), root, policy, attach);
              if (!same_bits(v, want)) ++bad[static_cast<std::size_t>(r)];
            }
        });
      for (auto& t : threads) t.join();
      INFO("p = " << p << (attach ? ", by cross-memory attach" : ", through the ring"));
      for (int b : bad) CHECK(b == 0);
    }
}
