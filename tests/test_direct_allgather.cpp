// The direct shared-memory allgather, reduce-scatter and reduce
// (transport/direct_gather.hpp) through the thread Comm of one node: every
// rank gets every rank's block, and its block of the rank-order reduction
// (the root: all of it) bitwise as the sequential reference computes it
// (non-commutative operators too), for any team size, count and root, in
// place and not, on both sides of the slot's size, read by address beyond
// it (allgathers, reduce-scatters; reduces of small teams, the schedules
// for the rest); scatter, gather and alltoall likewise; many calls in a
// row share the slots with the direct reduce and the ring with the direct
// bcast; a mismatched call is an error on every rank (a rank that reads
// nothing, at its next call), not a hang; a named
// algorithm still runs its schedule.

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm_threads.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "direct_floats.hpp"
#include "runtime/comm.hpp"
#include "runtime/rank_core.hpp"
#include "support.hpp"
#include "transport/direct_reduce.hpp"

using namespace copse;
using copse::testing::Bytes;
using copse::testing::float_reference;
using copse::testing::message_of;
using copse::testing::on_every_rank;
using copse::testing::options_for;
using copse::testing::random_floats;

namespace direct_gather_test {

Bytes slice_of(const Bytes& v, std::size_t from, std::size_t bytes) {
  return Bytes(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + bytes));
}

// Per rank, the first thing that went wrong ("" if none): Catch's checks
// are not for the ranks' threads.
struct Verdicts {
  explicit Verdicts(int p) : first(static_cast<std::size_t>(p)) {}
  void check(int rank, bool ok, const std::string& what) {
    std::string& mine = first[static_cast<std::size_t>(rank)];
    if (!ok && mine.empty()) mine = "rank " + std::to_string(rank) + ": " + what;
  }
  std::vector<std::string> first;
};

void check_gather_errors(const std::vector<std::exception_ptr>& errors, const Verdicts& verdicts) {
  for (const auto& e : errors) CHECK(message_of(e) == "");
  for (const std::string& v : verdicts.first) CHECK(v == "");
}

// Counts of elements per rank around the slot's size: all of an allgather's
// block, and a reduce-scatter's p blocks, fit up to `fits` elements.
std::vector<std::size_t> gather_counts(std::size_t fits) { return {0, 1, 7, 1001, fits - 1, fits, fits + 1}; }
// The same and one read by address (RankCore::reads_by_address: beyond the
// slots), odd, of `eb`-byte elements.
std::vector<std::size_t> counts_with_address(std::size_t fits, std::size_t eb) {
  std::vector<std::size_t> counts = gather_counts(fits);
  counts.push_back(2 * DirectReduce::kPostBytes / eb + 3);
  return counts;
}
bool by_address(std::size_t bytes) { return bytes > DirectReduce::kPostBytes; }

}  // namespace direct_gather_test

using namespace direct_gather_test;

TEST_CASE("direct allgather: every rank's bits in rank order, any p and count, in place or not",
          "[comm][direct_gather]") {
  constexpr std::size_t fits = DirectReduce::kPostBytes / sizeof(float);
  for (int p : {1, 2, 3, 5, 7}) {
    Team team(options_for({p}));
    Verdicts verdicts(p);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::uint64_t call = 0;
      for (std::size_t n : counts_with_address(fits, sizeof(float)))
        for (bool in_place : {false, true}) {
          ++call;
          const std::size_t bytes = n * sizeof(float);
          Bytes want;
          for (int q = 0; q < p; ++q) {
            const Bytes b = random_floats(q, n, call);
            want.insert(want.end(), b.begin(), b.end());
          }
          const Bytes mine = random_floats(c.rank(), n, call);
          Bytes recv(want.size(), std::byte{0x5a});
          if (in_place && bytes > 0)
            std::memcpy(recv.data() + static_cast<std::size_t>(c.rank()) * bytes, mine.data(), bytes);
          const std::size_t plans = c.cached_plans();
          c.allgather(in_place ? recv.data() : mine.data(), recv.data(), n, DType::float32);
          verdicts.check(c.rank(), recv == want,
                         std::to_string(n) + " floats" + (in_place ? " in place" : "") + " differ");
          // Nothing is planned: the slots or the reads by address serve every size.
          verdicts.check(c.rank(), c.cached_plans() == plans, "planned a direct call");
        }
    });
    INFO("p = " << p);
    check_gather_errors(errors, verdicts);
  }
}

TEST_CASE("direct reduce_scatter_block: the rank-order reduction's block, bitwise, any p and count",
          "[comm][direct_gather]") {
  const ReduceOp fsum = builtin_op("sum", DType::float32);
  const ReduceOp affine = builtin_op("affine", DType::uint32);  // not commutative; 8-byte elements
  for (int p : {1, 2, 3, 5, 7}) {
    Team team(options_for({p}));
    Verdicts verdicts(p);
    const auto up = static_cast<std::size_t>(p);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      const auto me = static_cast<std::size_t>(c.rank());
      std::uint64_t call = 0;
      for (const ReduceOp* op : {&fsum, &affine}) {
        const std::size_t eb = op->element_bytes;
        for (std::size_t n : counts_with_address(DirectReduce::kPostBytes / eb / up, eb))
          for (bool in_place : {false, true}) {
            ++call;
            // Through the slots or, beyond them, by address: every size
            // takes a direct path among threads, so floats are summed in
            // rank order at every size.
            Bytes send(up * n * eb), want;
            if (op == &fsum) {
              send = random_floats(c.rank(), up * n, call);
              want = slice_of(float_reference(p, up * n, call), me * n * eb, n * eb);
            } else {
              if (n > 0) fill_input(affine, c.rank(), up * n, send.data());
              want = slice_of(reference_result(affine, p, up * n), me * n * eb, n * eb);
            }
            Bytes recv(n * eb, std::byte{0x5a});
            const std::size_t plans = c.cached_plans();
            if (in_place) {
              c.reduce_scatter_block(send.data(), send.data(), n, *op);
              recv = slice_of(send, 0, n * eb);
            } else {
              c.reduce_scatter_block(send.data(), recv.data(), n, *op);
            }
            verdicts.check(
                c.rank(), recv == want,
                op->name + " of " + std::to_string(n) + " per block" + (in_place ? " in place" : "") + " differs");
            verdicts.check(c.rank(), c.cached_plans() == plans, "planned a direct call");
          }
      }
      // Blocks of different sizes (reduce_scatter), one of them empty:
      // through the slots, then (x 1000) by address; in place and not.
      for (const int scale : {1, 1000})
        for (bool in_place : {false, true}) {
          std::vector<int> counts(up);
          for (std::size_t v = 0; v < up; ++v) counts[v] = static_cast<int>((v * 5 + 3) % 7) * scale;
          std::size_t total = 0, from = 0;  // all blocks' elements; those before ours
          for (std::size_t v = 0; v < up; ++v) {
            if (v == me) from = total;
            total += static_cast<std::size_t>(counts[v]);
          }
          Bytes send(total * 8);
          if (total > 0) fill_input(affine, c.rank(), total, send.data());
          Bytes recv(static_cast<std::size_t>(counts[me]) * 8);
          if (in_place) {
            c.reduce_scatter(send.data(), send.data(), counts.data(), affine);
            recv = slice_of(send, 0, recv.size());
          } else {
            c.reduce_scatter(send.data(), recv.data(), counts.data(), affine);
          }
          verdicts.check(c.rank(), recv == slice_of(reference_result(affine, p, total), from * 8, recv.size()),
                         "reduce_scatter of unequal blocks (x " + std::to_string(scale) + ")" +
                             (in_place ? " in place" : "") + " differs");
        }
    });
    INFO("p = " << p);
    check_gather_errors(errors, verdicts);
  }
}

TEST_CASE("direct reduce: the root gets the rank-order reduction bitwise, any p, count and root",
          "[comm][direct_gather]") {
  const ReduceOp fsum = builtin_op("sum", DType::float32);
  const ReduceOp affine = builtin_op("affine", DType::uint32);  // not commutative; 8-byte elements
  for (int p : {1, 2, 3, 5, 7}) {
    Team team(options_for({p}));
    Verdicts verdicts(p);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::uint64_t call = 0;
      for (const ReduceOp* op : {&fsum, &affine}) {
        const std::size_t eb = op->element_bytes;
        for (std::size_t n : counts_with_address(DirectReduce::kPostBytes / eb, eb))
          for (int root : {0, p - 1, p / 2})
            for (bool in_place : {false, true}) {
              ++call;
              const bool direct =
                  n * eb <= DirectReduce::kPostBytes || (by_address(n * eb) && p <= RankCore::kReduceByAddressRanks);
              if (op == &fsum && !direct) continue;  // a schedule may associate a sum otherwise
              Bytes send(n * eb), want;
              if (op == &fsum) {
                send = random_floats(c.rank(), n, call);
                want = float_reference(p, n, call);
              } else {
                if (n > 0) fill_input(affine, c.rank(), n, send.data());
                want = reference_result(affine, p, n);
              }
              const Bytes untouched(n * eb, std::byte{0x5a});
              Bytes recv = untouched;
              const std::size_t plans = c.cached_plans();
              const bool root_in_place = in_place && c.rank() == root;
              c.reduce(send.data(), root_in_place ? send.data() : recv.data(), n, *op, root);
              if (root_in_place) recv = send;
              const std::string what = op->name + " of " + std::to_string(n) + " to root " + std::to_string(root) +
                                       (in_place ? " in place" : "");
              verdicts.check(c.rank(), recv == (c.rank() == root ? want : untouched), what + " differs");
              if (direct) verdicts.check(c.rank(), c.cached_plans() == plans, what + ": planned a direct call");
            }
      }
    });
    INFO("p = " << p);
    check_gather_errors(errors, verdicts);
  }
}

// Every rank's receive vector 16 bytes past the inputs, modulo a page (as
// threads' vectors allocated alike lie): the reads by address then sum in
// a place of their own (transport/direct_gather.cpp's stalls()), for the
// same bits.
TEST_CASE("direct reduce and reduce_scatter by address: the same bits where recv lies just past the inputs",
          "[comm][direct_gather]") {
  const ReduceOp fsum = builtin_op("sum", DType::float32);
  for (int p : {2, 3}) {
    Team team(options_for({p}));
    Verdicts verdicts(p);
    const auto up = static_cast<std::size_t>(p);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      const auto me = static_cast<std::size_t>(c.rank());
      for (const std::size_t n : {std::size_t{5000}, std::size_t{100003}}) {  // one chunk and several
        const std::size_t bytes = up * n * sizeof(float);
        // send at a page's start + 64, recv at another page's start + 80.
        std::vector<std::byte> arena(bytes + n * up * sizeof(float) + 4 * 4096);
        const auto page = (reinterpret_cast<std::uintptr_t>(arena.data()) + 4095) / 4096 * 4096;
        auto* send = reinterpret_cast<std::byte*>(page) + 64;
        auto* recv = send + (bytes + 4095) / 4096 * 4096 + 16;
        const Bytes input = random_floats(c.rank(), up * n, n);
        std::memcpy(send, input.data(), bytes);
        const Bytes all = float_reference(p, up * n, n);
        c.reduce_scatter_block(send, recv, n, fsum);
        verdicts.check(c.rank(), std::memcmp(recv, all.data() + me * n * sizeof(float), n * sizeof(float)) == 0,
                       "reduce_scatter_block of " + std::to_string(n) + " per block differs");
        c.reduce(send, recv, up * n, fsum, 0);
        verdicts.check(c.rank(), c.rank() != 0 || std::memcmp(recv, all.data(), bytes) == 0,
                       "reduce of " + std::to_string(up * n) + " differs");
      }
    });
    INFO("p = " << p);
    check_gather_errors(errors, verdicts);
  }
}

TEST_CASE("direct allgather and reduce_scatter: many calls share the region with allreduce, bcast and barrier",
          "[comm][direct_gather]") {
  const int p = 4;
  Team team(options_for({p}));
  const ReduceOp sum = builtin_op("sum", DType::int64);
  Verdicts verdicts(p);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    const auto r = static_cast<std::int64_t>(c.rank());
    for (std::int64_t call = 1; call <= 300; ++call) {
      const auto n = static_cast<std::size_t>(call % 5 == 0 ? 0 : call % 60);
      const std::string at = "call " + std::to_string(call) + ", " + std::to_string(n) + " elements: ";
      std::vector<std::int64_t> mine(n, call * 100 + r), all(n * p, -1);
      c.allgather(mine.data(), all.data(), n, DType::int64);
      bool ok = true;
      for (std::size_t i = 0; i < all.size(); ++i) ok = ok && all[i] == call * 100 + static_cast<std::int64_t>(i / n);
      verdicts.check(c.rank(), ok, at + "allgather");
      // Element i of every rank's vector is call + i; our block's sum p times that.
      std::vector<std::int64_t> in(n * p), block(n, -1);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = call + static_cast<std::int64_t>(i);
      c.reduce_scatter_block(in.data(), block.data(), n, sum);
      for (std::size_t i = 0; i < n; ++i) ok = ok && block[i] == p * (call + static_cast<std::int64_t>(r * n + i));
      verdicts.check(c.rank(), ok, at + "reduce_scatter");
      if (call % 3 == 0) {
        std::int64_t one = 1, total = 0;
        c.allreduce(&one, &total, 1, sum);
        verdicts.check(c.rank(), total == p, at + "allreduce");
      }
      if (call % 4 == 1) {
        std::vector<std::int64_t> b(n, r == call % p ? call : -1);
        c.bcast(b.data(), n, DType::int64, static_cast<int>(call % p));
        verdicts.check(c.rank(), std::all_of(b.begin(), b.end(), [&](std::int64_t x) { return x == call; }),
                       at + "bcast");
      }
      if (call % 7 == 0) c.barrier();
      if (call % 5 == 2) {
        const int root = static_cast<int>(call % p);
        std::vector<std::int64_t> summed(n, -1);
        c.reduce(in.data(), summed.data(), n, sum, root);
        for (std::size_t i = 0; i < n; ++i)
          ok = ok && summed[i] == (c.rank() == root ? p * (call + static_cast<std::int64_t>(i)) : -1);
        verdicts.check(c.rank(), ok, at + "reduce");
      }
    }
    verdicts.check(c.rank(), c.cached_plans() == 0, "planned a direct call");
  });
  check_gather_errors(errors, verdicts);
}

TEST_CASE("direct scatter, gather and reduce: a rank that reads nothing runs ahead, never over a slow reader's post",
          "[comm][direct_gather]") {
  // A scatter's root posts and goes, as do a gather's and a reduce's other
  // ranks; a post rewrites the buffer of two calls before only once every
  // peer has posted the call between (DirectReduce's reuse rule). The
  // reader that sleeps lets the writers run ahead: without the rule they
  // would overwrite the post it has still to read.
  const int p = 3;
  Team team(options_for({p}));
  const ReduceOp sum = builtin_op("sum", DType::int64);
  Verdicts verdicts(p);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    const auto r = static_cast<std::int64_t>(c.rank());
    for (std::int64_t call = 1; call <= 240; ++call) {
      const auto n = static_cast<std::size_t>(call % 2 == 0 ? 2 : 100);  // in the slot's first line, and beyond
      const int root = call % 60 < 30 ? 0 : 2;
      const bool slow = call % 6 == 0 && (call % 60 < 30 ? r == 1 : r == root);
      if (slow) std::this_thread::sleep_for(std::chrono::microseconds(300));
      const std::string at = "call " + std::to_string(call) + ": ";
      std::vector<std::int64_t> all(n * p), mine(n, -1);
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = call * 1000 + static_cast<std::int64_t>(i);
      c.scatter(all.data(), mine.data(), n, DType::int64, root);
      bool ok = true;
      for (std::size_t i = 0; i < n; ++i) ok = ok && mine[i] == call * 1000 + static_cast<std::int64_t>(r * n + i);
      verdicts.check(c.rank(), ok, at + "scatter");
      std::vector<std::int64_t> gathered(n * p, -1);
      c.gather(mine.data(), gathered.data(), n, DType::int64, root);
      for (std::size_t i = 0; i < gathered.size(); ++i)
        ok = ok && gathered[i] == (c.rank() == root ? call * 1000 + static_cast<std::int64_t>(i) : -1);
      verdicts.check(c.rank(), ok, at + "gather");
      std::vector<std::int64_t> summed(n, -1);
      c.reduce(mine.data(), summed.data(), n, sum, root);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t expect = 0;  // every rank's block i: call * 1000 + q * n + i
        for (std::int64_t q = 0; q < p; ++q) expect += call * 1000 + static_cast<std::int64_t>(q * n + i);
        ok = ok && summed[i] == (c.rank() == root ? expect : -1);
      }
      verdicts.check(c.rank(), ok, at + "reduce");
    }
  });
  check_gather_errors(errors, verdicts);
}

TEST_CASE("direct allgather, reduce_scatter and reduce: a mismatched call fails every rank instead of hanging",
          "[comm][direct_gather]") {
  TeamOptions o = options_for({3});
  o.wait_timeout = std::chrono::milliseconds(2000);
  SECTION("sizes") {
    Team team(o);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(100, 1.0f), all(300);
      c.allgather(v.data(), all.data(), c.rank() == 2 ? 50 : 100, DType::float32);
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THROWS_AS(std::rethrow_exception(e), ScheduleError);
      CHECK_THAT(message_of(e), Catch::Contains("size mismatch") && Catch::Contains("50 elements") &&
                                    Catch::Contains("100 elements") && Catch::Contains("allgather"));
    }
    // The team is broken from now on: every call says why.
    std::vector<float> v(3);
    CHECK_THROWS_AS(team.comm(1).allgather(v.data(), v.data(), 1, DType::float32), ScheduleError);
  }
  // A rank whose part of a call reads nothing (a reduce's and a gather's
  // others, a scatter's root) posts and returns; it learns of the mismatch
  // at its next call, before that call posts anything.
  SECTION("roots") {
    Team team(o);
    const ReduceOp fsum = builtin_op("sum", DType::float32);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f), out(12);
      c.reduce(v.data(), out.data(), 12, fsum, c.rank() == 2 ? 1 : 0);
      c.barrier();
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THROWS_AS(std::rethrow_exception(e), ScheduleError);
      CHECK_THAT(message_of(e),
                 Catch::Contains("mismatched roots") && Catch::Contains("root 1") && Catch::Contains("root 0"));
    }
  }
  SECTION("a gather's roots") {
    Team team(o);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f), all(36);
      c.gather(v.data(), all.data(), 12, DType::float32, c.rank() == 2 ? 1 : 0);
      c.barrier();
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THAT(message_of(e), Catch::Contains("mismatched roots"));
    }
  }
  SECTION("a scatter's sizes, which its root does not wait for") {
    Team team(o);
    std::vector<int> returned(3, 0);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> all(36, 1.0f), mine(12);
      c.scatter(all.data(), mine.data(), c.rank() == 2 ? 6 : 12, DType::float32, 0);
      returned[static_cast<std::size_t>(c.rank())] = 1;
      c.barrier();
    });
    CHECK(returned[0] == 1);  // the root posted and went
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THAT(message_of(e), Catch::Contains("size mismatch"));
    }
  }
  SECTION("a gather's other ranks") {
    Team team(o);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f), all(36);
      c.gather(v.data(), all.data(), 12, DType::float32, 0);
      c.barrier();
      c.gather(v.data(), all.data(), c.rank() == 0 ? 12 : 6, DType::float32, 0);
      c.barrier();
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THAT(message_of(e), Catch::Contains("size mismatch") && Catch::Contains("gather"));
    }
  }
  SECTION("collectives") {
    // The same bytes posted for different collectives.
    Team team(o);
    const ReduceOp fsum = builtin_op("sum", DType::float32);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::vector<float> v(12, 1.0f), out(12);
      if (c.rank() == 1)
        c.allreduce(v.data(), out.data(), 12, fsum);
      else
        c.reduce_scatter_block(v.data(), out.data(), 4, fsum);
    });
    for (const auto& e : errors) {
      REQUIRE(e);
      CHECK_THROWS_AS(std::rethrow_exception(e), ScheduleError);
      CHECK_THAT(message_of(e), Catch::Contains("mismatched calls") && Catch::Contains("allreduce") &&
                                    Catch::Contains("reduce_scatter"));
    }
  }
}

TEST_CASE("direct scatter, gather and alltoall: every block in its place, any p, count and root, in place or not",
          "[comm][direct_gather]") {
  for (int p : {1, 2, 3, 5}) {
    Team team(options_for({p}));
    Verdicts verdicts(p);
    const auto P = static_cast<std::size_t>(p);
    // Per block: around a slot's size for a gather (one block posted) and for a scatter and an alltoall (p), and
    // beyond both (by address).
    const std::size_t fits = DirectReduce::kPostBytes / sizeof(float);
    std::vector<std::size_t> counts = counts_with_address(fits, sizeof(float));
    for (std::size_t n : {fits / P - 1, fits / P, fits / P + 1}) counts.push_back(n);
    const auto errors = on_every_rank(team, [&](Comm& c) {
      std::uint64_t call = 0;
      const auto r = static_cast<std::size_t>(c.rank());
      // Rank `from`'s block for rank `to` in call `call`.
      auto block = [&](int from, int to, std::size_t n) { return random_floats(from * p + to, n, call); };
      for (std::size_t n : counts)
        for (int root : {0, p - 1, p / 2})
          for (bool in_place : {false, true}) {
            const std::size_t bytes = n * sizeof(float);
            const bool at_root = c.rank() == root, root_in_place = in_place && at_root;
            const std::string what =
                std::to_string(n) + " floats, root " + std::to_string(root) + (in_place ? " in place" : "");
            const std::size_t plans = c.cached_plans();
            // Gather: block q of the root's recv from rank q.
            ++call;
            Bytes want, mine = block(c.rank(), root, n);
            for (int q = 0; q < p; ++q) {
              const Bytes b = block(q, root, n);
              want.insert(want.end(), b.begin(), b.end());
            }
            const Bytes untouched(P * bytes, std::byte{0x5a});
            Bytes recv = untouched;
            if (root_in_place && bytes > 0) std::memcpy(recv.data() + r * bytes, mine.data(), bytes);
            c.gather(root_in_place ? recv.data() : mine.data(), recv.data(), n, DType::float32, root);
            verdicts.check(c.rank(), recv == (at_root ? want : untouched), "gather of " + what + " differs");
            // Scatter: block q of the root's send to rank q.
            ++call;
            Bytes send;
            for (int q = 0; q < p && at_root; ++q) {
              const Bytes b = block(root, q, n);
              send.insert(send.end(), b.begin(), b.end());
            }
            Bytes got(bytes, std::byte{0x5a});
            c.scatter(send.data(), root_in_place ? send.data() : got.data(), n, DType::float32, root);
            if (root_in_place) got = slice_of(send, r * bytes, bytes);
            verdicts.check(c.rank(), got == block(root, c.rank(), n), "scatter of " + what + " differs");
            // Alltoall (its root is no argument: once per count): block q of rank r's send to rank q.
            if (root != 0) continue;
            ++call;
            Bytes out, in;
            for (int q = 0; q < p; ++q) {
              const Bytes b = block(c.rank(), q, n), a = block(q, c.rank(), n);
              out.insert(out.end(), b.begin(), b.end());
              in.insert(in.end(), a.begin(), a.end());
            }
            Bytes result = in_place ? out : Bytes(P * bytes, std::byte{0x5a});
            c.alltoall(in_place ? result.data() : out.data(), result.data(), n, DType::float32);
            verdicts.check(c.rank(), result == in, "alltoall of " + what + " differs");
            // Nothing is planned: the slots or the reads by address serve every size.
            verdicts.check(c.rank(), c.cached_plans() == plans, "planned a direct call of " + what);
          }
    });
    INFO("p = " << p);
    check_gather_errors(errors, verdicts);
  }
}

TEST_CASE("direct allgather and reduce_scatter: a named algorithm runs its schedule", "[comm][direct_gather]") {
  TeamOptions named = options_for({3});
  named.allgather = "binomial";
  named.reduce_scatter = "binomial";
  Team team(named);
  const ReduceOp sum = builtin_op("sum", DType::int32);
  Verdicts verdicts(3);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    std::vector<int> mine(2, c.rank()), all(6, -1), in(6, 1), block(2, 0);
    c.allgather(mine.data(), all.data(), 2, DType::int32);
    verdicts.check(c.rank(), all == std::vector<int>{0, 0, 1, 1, 2, 2}, "allgather");
    c.reduce_scatter_block(in.data(), block.data(), 2, sum);
    verdicts.check(c.rank(), block == std::vector<int>{3, 3}, "reduce_scatter_block");
    verdicts.check(c.rank(), c.cached_plans() == 2, "planned no schedule");
  });
  check_gather_errors(errors, verdicts);
}
