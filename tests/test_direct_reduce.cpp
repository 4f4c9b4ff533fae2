// The direct shared-memory reduce (transport/direct_reduce.hpp): every rank
// gets the rank-order reduction, bitwise the same on every rank; repeated
// calls reuse the slots safely; waits end on their deadline and on an abort.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "direct_floats.hpp"
#include "support.hpp"
#include "transport/direct_gather.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/direct_vector.hpp"

using namespace copse;
using copse::testing::Bytes;
using copse::testing::float_reference;
using copse::testing::message_of;
using copse::testing::random_floats;

namespace {

// Runs body(rank, reducer) on p threads over one fresh set of slots; returns
// each rank's exception (null if none).
template <class Body>
std::vector<std::exception_ptr> on_ranks(int p, Body&& body, Arena* shared = nullptr) {
  HeapArena heap;
  Arena& arena = shared ? *shared : heap;
  DirectReduce reducer(arena, DirectReduce::create_shared(arena, p), p, nullptr);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, reducer);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

WaitPolicy patient() {
  WaitPolicy policy;
  policy.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  return policy;
}

// "" if equal, else where they differ (a short message for Catch, whose
// own rendering of two large vectors takes minutes).
std::string first_difference(const Bytes& got, const Bytes& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " bytes, expected " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return "byte " + std::to_string(i) + " differs";
  return "";
}

// Runs body(p, processes, rank, reducer) on p threads, for each p of `ps`,
// over a heap arena (threads: reads by address load their peers' vectors)
// and over a shared segment (processes: every read by address is a
// process_vm_readv, here of this process itself, as the bcast's test does);
// checks that no rank threw.
template <class Body>
void over_both_arenas(std::initializer_list<int> ps, const std::string& tag, Body&& body) {
  for (bool processes : {false, true})
    for (int p : ps) {
      INFO((processes ? "shared segment" : "heap") << ", p = " << p);
      const std::string name = "/copse-test-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(p);
      ShmArena::remove(name);
      std::optional<ShmArena> segment;
      if (processes) segment.emplace(ShmArena::Create{}, name, DirectReduce::shared_bytes(p) + 4096);
      const auto errors = on_ranks(
          p, [&](int r, DirectReduce& reducer) { body(p, processes, r, reducer); }, segment ? &*segment : nullptr);
      for (const auto& e : errors) CHECK(message_of(e) == "");
      if (processes) ShmArena::remove(name);
    }
}

}  // namespace

TEST_CASE(
    "concurrency: direct reduce: rank-order results on every rank, p 1 to 32, through the slots and in slices, "
    "interleaved",
    "[direct]") {
  const ReduceOp affine = builtin_op("affine", DType::uint32);  // not commutative; 8-byte elements
  const ReduceOp fsum = builtin_op("sum", DType::float32);
  const std::size_t max_affine = DirectReduce::kSlotBytes / affine.element_bytes;
  const std::size_t max_float = DirectReduce::kSlotBytes / fsum.element_bytes;
  for (int p : {1, 2, 3, 4, 5, 7, 8, 13, 32}) {
    INFO("p = " << p);
    // Several rounds per shape: call n uses buffer n % 2, so repeated calls
    // check that no rank overwrites what a slower one still reads.
    // Sliced calls: fewer elements than ranks (void slices), odd counts,
    // and a large one, among the slot calls.
    struct Call {
      const ReduceOp* op;
      std::size_t count;
      bool in_place;
      bool sliced;
    };
    std::vector<Call> calls;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7}, max_affine})
      for (bool in_place : {false, true}) calls.push_back({&affine, n, in_place, false});
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{33}, max_float})
      for (bool in_place : {false, true}) calls.push_back({&fsum, n, in_place, false});
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1001}})
      for (bool in_place : {false, true}) {
        calls.push_back({&affine, n, in_place, true});
        calls.push_back({&fsum, n, in_place, true});
      }
    const std::size_t large = p <= 8 ? 40009 : 3001;  // past the 16 KiB chunk of an in-place slice
    for (bool in_place : {false, true}) {
      calls.push_back({&affine, large, in_place, true});
      calls.push_back({&fsum, large, in_place, true});
    }
    const int rounds = p > 8 ? 2 : 4;
    std::vector<std::vector<Bytes>> got(static_cast<std::size_t>(p));  // per rank, per call and round
    const auto errors = on_ranks(p, [&](int r, DirectReduce& reducer) {
      DirectRank me;
      me.rank = r;
      const WaitPolicy policy = patient();
      std::mt19937 jitter(static_cast<unsigned>(r));
      for (int round = 0; round < rounds; ++round)
        for (std::size_t k = 0; k < calls.size(); ++k) {
          const Call& call = calls[k];
          Bytes in = call.op == &affine ? Bytes(call.count * affine.element_bytes)
                                        : random_floats(r, call.count, k * 100 + static_cast<std::size_t>(round));
          if (call.op == &affine && call.count > 0) fill_input(affine, r, call.count, in.data());
          Bytes out(in.size(), std::byte{0x5a});
          if (jitter() % 4 == 0) std::this_thread::yield();
          const std::byte* send = in.data();
          if (call.in_place) {
            out = in;
            send = out.data();
          }
          if (call.sliced)
            reducer.allreduce_sliced(me, send, out.data(), call.count, *call.op, policy);
          else
            reducer.allreduce(me, send, out.data(), call.count, call.op, policy);
          got[static_cast<std::size_t>(r)].push_back(out);
          // As a caller may at once: reuse both vectors. A peer still
          // reading them would see this.
          std::fill(out.begin(), out.end(), std::byte{0xa5});
          std::fill(in.begin(), in.end(), std::byte{0xa5});
        }
      if (me.calls != static_cast<std::uint32_t>(rounds * static_cast<int>(calls.size())) || me.waiting_for != -1)
        throw std::logic_error("the rank's call count or wait record is off");
    });
    for (int r = 0; r < p; ++r) CHECK(message_of(errors[static_cast<std::size_t>(r)]) == "");
    std::size_t index = 0;
    for (int round = 0; round < rounds; ++round)
      for (std::size_t k = 0; k < calls.size(); ++k, ++index) {
        const Call& call = calls[k];
        const Bytes want = call.op == &affine
                               ? reference_result(affine, p, call.count)
                               : float_reference(p, call.count, k * 100 + static_cast<std::size_t>(round));
        for (int r = 0; r < p; ++r) {
          INFO("rank " << r << ", round " << round << ", " << call.op->name << " of " << call.count << " elements"
                       << (call.in_place ? ", in place" : "") << (call.sliced ? ", sliced" : ""));
          CHECK(first_difference(got[static_cast<std::size_t>(r)][index], want) == "");  // bitwise
        }
      }
  }
}

TEST_CASE(
    "concurrency: direct allgather and reduce by address: rank-order bits read where the vectors lie, among threads "
    "and by cross-memory attach",
    "[direct]") {
  // Threads over a heap arena load their peers' vectors; over a shared
  // segment the slots take them for processes', and every read is a
  // process_vm_readv (here of this process itself, as the bcast's test does).
  const ReduceOp affine = builtin_op("affine", DType::uint32);  // not commutative; 8-byte elements
  const ReduceOp fsum = builtin_op("sum", DType::float32);
  // Empty, one element, and past the root's chunk of 128 KiB (TeamDirectReduce), odd.
  const std::size_t counts[] = {0, 1, 4099, 70001};
  over_both_arenas({1, 2, 3, 4}, "direct", [&](int p, bool processes, int r, DirectReduce& reducer) {
    DirectRank me;
    me.rank = r;
    const WaitPolicy policy = patient();
    std::vector<std::byte> chunks(2 * (std::size_t{128} << 10));  // a root's bounce
    std::uint64_t seed = 0;
    auto fail = [&](const std::string& what) { throw std::logic_error(what); };
    for (std::size_t n : counts) {
      for (bool in_place : {false, true}) {
        // Allgather of n floats per rank.
        const auto bytes = n * sizeof(float);
        Bytes want;
        ++seed;
        for (int q = 0; q < p; ++q) {
          const Bytes b = random_floats(q, n, seed);
          want.insert(want.end(), b.begin(), b.end());
        }
        Bytes mine = random_floats(r, n, seed);
        Bytes recv(want.size(), std::byte{0x5a});
        std::byte* own = recv.data() + static_cast<std::size_t>(r) * bytes;
        if (in_place && bytes > 0) std::memcpy(own, mine.data(), bytes);
        const std::size_t read = direct_allgather_by_address(reducer, me, in_place ? own : mine.data(), recv.data(), n,
                                                             sizeof(float), policy);
        if (recv != want) fail("allgather of " + std::to_string(n) + (in_place ? " in place" : "") + " differs");
        if (read != (processes ? static_cast<std::size_t>(p - 1) * bytes : 0))
          fail("allgather read " + std::to_string(read) + " bytes across processes");
        // As a caller may at once: reuse both vectors. A peer still reading them would see this.
        std::fill(recv.begin(), recv.end(), std::byte{0xa5});
        std::fill(mine.begin(), mine.end(), std::byte{0xa5});
        // A slot call between: the count and the slots' reuse are shared.
        float x = 1.0f, sum = 0.0f;
        reducer.allreduce(me, reinterpret_cast<const std::byte*>(&x), reinterpret_cast<std::byte*>(&sum), 1, &fsum,
                          policy);
        if (sum != static_cast<float>(p)) fail("the slot allreduce between differs");
      }
      for (const ReduceOp* op : {&fsum, &affine})
        for (int root : {0, p - 1, p / 2})
          for (bool in_place : {false, true}) {
            const std::size_t eb = op->element_bytes;
            Bytes send(n * eb), want;
            ++seed;
            if (op == &fsum) {
              send = random_floats(r, n, seed);
              want = float_reference(p, n, seed);
            } else {
              if (n > 0) fill_input(affine, r, n, send.data());
              want = reference_result(affine, p, n);
            }
            const Bytes untouched(n * eb, std::byte{0x5a});
            Bytes recv = untouched;
            const bool root_in_place = in_place && r == root;
            const std::size_t read = direct_reduce_by_address(
                reducer, me, send.data(), root_in_place ? send.data() : recv.data(), n, root, *op, chunks, policy);
            if (root_in_place) recv = send;
            const std::string what = op->name + " of " + std::to_string(n) + " to root " + std::to_string(root) +
                                     (in_place ? " in place" : "");
            if (const std::string d = first_difference(recv, r == root ? want : untouched); !d.empty())
              fail(what + ": " + d);
            const bool reads = processes && r == root && n > 0;
            if (read != (reads ? static_cast<std::size_t>(p - 1) * n * eb : 0))
              fail(what + ": read " + std::to_string(read) + " bytes across processes");
            std::fill(send.begin(), send.end(), std::byte{0xa5});
          }
    }
  });
}

namespace {
// The bytes rank `from` sends rank `to` in a scatter, gather or alltoall:
// each pair's block its own.
Bytes pair_block(int from, int to, std::size_t bytes, std::uint64_t seed) {
  Bytes b(bytes);
  std::mt19937_64 bits(seed * 1000003u + static_cast<std::uint64_t>(from) * 1009u + static_cast<std::uint64_t>(to));
  for (auto& x : b) x = static_cast<std::byte>(bits());
  return b;
}
}  // namespace

TEST_CASE(
    "concurrency: direct scatter, gather and alltoall: every block in its place, through the slots and by address",
    "[direct]") {
  // As the case above: by address threads load, over a shared segment every
  // read is a process_vm_readv, counted.
  const std::size_t eb = 4;
  over_both_arenas({1, 2, 3, 5}, "direct-move", [&](int p, bool processes, int r, DirectReduce& reducer) {
    const auto P = static_cast<std::size_t>(p);
    DirectRank me;
    me.rank = r;
    const WaitPolicy policy = patient();
    std::uint64_t seed = 0;
    const auto R = static_cast<std::size_t>(r);
    auto fail = [&](const std::string& what) { throw std::logic_error(what); };
    bool slots = false;  // the slots hold copies: only by address does anything cross processes
    auto check = [&](const Bytes& got, const Bytes& want, std::size_t read, std::size_t reads,
                     const std::string& what) {
      if (const std::string d = first_difference(got, want); !d.empty()) fail(what + ": " + d);
      if (read != (processes && !slots ? reads : 0)) fail(what + ": read " + std::to_string(read) + " bytes");
    };
    // Through the slots (what a rank posts fits: p blocks of 401) and by address.
    for (const std::pair<std::size_t, bool>& run : {std::pair{std::size_t{0}, true},
                                                    {std::size_t{1}, true},
                                                    {std::size_t{401}, true},
                                                    {std::size_t{0}, false},
                                                    {std::size_t{1}, false},
                                                    {std::size_t{4099}, false}}) {
      const std::size_t n = run.first, bytes = n * eb;
      slots = run.second;
      auto gather = [&](const std::byte* mine, std::byte* recv, int root) -> std::size_t {
        if (!slots) return direct_gather_by_address(reducer, me, mine, recv, n, eb, root, policy);
        direct_gather(reducer, me, mine, recv, n, eb, root, policy);
        return 0;
      };
      auto scatter = [&](const std::byte* send, std::byte* recv, int root) -> std::size_t {
        if (!slots) return direct_scatter_by_address(reducer, me, send, recv, n, eb, root, policy);
        direct_scatter(reducer, me, send, recv, n, eb, root, policy);
        return 0;
      };
      auto alltoall = [&](const std::byte* send, std::byte* recv) -> std::size_t {
        if (!slots) return direct_alltoall_by_address(reducer, me, send, recv, n, eb, policy);
        direct_alltoall(reducer, me, send, recv, n, eb, policy);
        return 0;
      };
      const std::string path = slots ? " through the slots" : " by address";
      for (int root : {0, p - 1, p / 2})
        for (bool in_place : {false, true}) {
          const std::string how =
              " of " + std::to_string(n) + " to/from root " + std::to_string(root) + (in_place ? " in place" : "");
          const bool at_root = r == root, root_in_place = in_place && at_root;
          // Gather: rank q's block at q * bytes of the root's recv.
          ++seed;
          Bytes mine = pair_block(r, root, bytes, seed), want;
          for (int q = 0; q < p; ++q) {
            const Bytes b = pair_block(q, root, bytes, seed);
            want.insert(want.end(), b.begin(), b.end());
          }
          const Bytes untouched(P * bytes, std::byte{0x5a});
          Bytes recv = untouched;
          if (root_in_place && bytes > 0) std::memcpy(recv.data() + R * bytes, mine.data(), bytes);
          std::size_t read = gather(root_in_place ? recv.data() + R * bytes : mine.data(), recv.data(), root);
          check(recv, at_root ? want : untouched, read, at_root ? (P - 1) * bytes : 0, "gather" + how + path);
          std::fill(mine.begin(), mine.end(), std::byte{0xa5});  // reused at once
          // Scatter: rank q gets block q of the root's send.
          ++seed;
          Bytes send;
          for (int q = 0; q < p && at_root; ++q) {
            const Bytes b = pair_block(root, q, bytes, seed);
            send.insert(send.end(), b.begin(), b.end());
          }
          Bytes got(bytes, std::byte{0x5a});
          read = scatter(send.data(), root_in_place ? send.data() : got.data(), root);
          if (root_in_place)
            got.assign(send.begin() + static_cast<std::ptrdiff_t>(R * bytes),
                       send.begin() + static_cast<std::ptrdiff_t>((R + 1) * bytes));
          check(got, pair_block(root, r, bytes, seed), read, at_root ? 0 : bytes, "scatter" + how + path);
          std::fill(send.begin(), send.end(), std::byte{0xa5});
        }
      // Alltoall: block q of rank r's send goes to rank q, at r * bytes.
      ++seed;
      Bytes send, want;
      for (int q = 0; q < p; ++q) {
        const Bytes out = pair_block(r, q, bytes, seed), in = pair_block(q, r, bytes, seed);
        send.insert(send.end(), out.begin(), out.end());
        want.insert(want.end(), in.begin(), in.end());
      }
      Bytes recv(P * bytes, std::byte{0x5a});
      const std::size_t read = alltoall(send.data(), recv.data());
      check(recv, want, read, (P - 1) * bytes, "alltoall of " + std::to_string(n) + path);
      if (slots) {  // in place: the post is a copy
        recv = send;
        alltoall(recv.data(), recv.data());
        check(recv, want, 0, 0, "alltoall in place of " + std::to_string(n) + path);
      }
      std::fill(send.begin(), send.end(), std::byte{0xa5});
    }
  });
}

TEST_CASE("concurrency: direct v-variants by address: blocks of every size in their places, read where they lie",
          "[direct]") {
  // Bytes rank `from` sends rank `to` (-1: the one block of an allgatherv's or gatherv's sender): some empty, all odd.
  auto size = [](int from, int to) -> std::uint64_t {
    return (from * 7 + to * 3 + 3) % 4 == 0 ? 0 : 97u * static_cast<std::uint64_t>(from + 1) + 13u * (to + 1U);
  };
  over_both_arenas({1, 2, 3, 5}, "direct-vector", [&](int p, bool processes, int r, DirectReduce& reducer) {
    DirectRank me;
    me.rank = r;
    const WaitPolicy policy = patient();
    std::uint64_t seed = 0;
    for (Collective c : {Collective::allgather, Collective::gather, Collective::scatter, Collective::alltoall})
      for (int root : {0, p - 1}) {
        ++seed;
        const bool per_receiver = c == Collective::scatter || c == Collective::alltoall;
        auto sender_block = [&](int from, int to) {
          const int whom = per_receiver ? to : -1;
          return pair_block(from, whom + 1, size(from, whom), seed);
        };
        // Rank r's input: its blocks with a gap of 5 bytes before each.
        Bytes input;
        std::vector<std::uint64_t> sc, sd, rc(static_cast<std::size_t>(p)), rd(static_cast<std::size_t>(p));
        const bool sends = c != Collective::scatter || r == root;
        for (int to = 0; sends && to < (per_receiver ? p : 1); ++to) {
          const Bytes b = sender_block(r, to);
          input.resize(input.size() + 5, std::byte{0x11});
          sd.push_back(input.size());
          sc.push_back(b.size());
          input.insert(input.end(), b.begin(), b.end());
        }
        // Rank r's receive vector, blocks in reverse rank order with gaps of 3; what it should hold.
        const bool receives = c != Collective::gather || r == root;
        Bytes want;
        for (int q = p - 1; q >= 0; --q) {
          if (!receives || (c == Collective::scatter && q != root)) continue;
          const Bytes b = sender_block(q, r);
          want.resize(want.size() + 3, std::byte{0x5a});
          rd[static_cast<std::size_t>(q)] = want.size();
          rc[static_cast<std::size_t>(q)] = b.size();
          want.insert(want.end(), b.begin(), b.end());
        }
        Bytes recv(want.size(), std::byte{0x5a});
        const std::size_t read =
            direct_vector_by_address(reducer, me, c, root, input.data(), {sc, sd}, recv.data(), {rc, rd}, policy);
        const std::string what = std::string(to_string(c)) + "v, root " + std::to_string(root);
        if (const std::string d = first_difference(recv, want); !d.empty()) throw std::logic_error(what + ": " + d);
        std::uint64_t from_others = 0;
        for (int q = 0; q < p; ++q) from_others += q == r ? 0 : rc[static_cast<std::size_t>(q)];
        if (read != (processes ? from_others : 0))
          throw std::logic_error(what + ": read " + std::to_string(read) + " bytes across processes");
        std::fill(input.begin(), input.end(), std::byte{0xa5});  // reused at once
      }
  });
}

TEST_CASE("concurrency: direct reduce: a barrier without data and an operator", "[direct]") {
  // Nobody leaves call n before everyone has entered it.
  const int p = 5;
  // (Catch's assertions are not for threads: a rank throws what it saw.)
  std::atomic<int> entered{0};
  const auto errors = on_ranks(p, [&](int r, DirectReduce& reducer) {
    DirectRank me;
    me.rank = r;
    const WaitPolicy policy = patient();
    for (int n = 1; n <= 50; ++n) {
      entered.fetch_add(1);
      reducer.allreduce(me, nullptr, nullptr, 0, nullptr, policy);
      if (entered.load() < n * p)
        throw std::logic_error("left call " + std::to_string(n) + " after " + std::to_string(entered.load()) +
                               " entries");
    }
  });
  for (const auto& e : errors) CHECK(message_of(e) == "");
}

TEST_CASE("concurrency: direct reduce: ranks reducing different sizes fail, naming both", "[direct]") {
  const ReduceOp op = builtin_op("sum", DType::int32);
  const auto errors = on_ranks(2, [&](int r, DirectReduce& reducer) {
    DirectRank me;
    me.rank = r;
    std::vector<int> v(static_cast<std::size_t>(2 + r), 1);
    reducer.allreduce(me, reinterpret_cast<const std::byte*>(v.data()), reinterpret_cast<std::byte*>(v.data()),
                      v.size(), &op, patient());
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    CHECK_THROWS_AS(std::rethrow_exception(e), ScheduleError);
    CHECK_THAT(message_of(e), Catch::Contains("size mismatch") && Catch::Contains("rank 0") &&
                                  Catch::Contains("rank 1") && Catch::Contains("2 elements") &&
                                  Catch::Contains("3 elements"));
  }
}

TEST_CASE("direct reduce: refuses what does not fit", "[direct]") {
  CHECK(DirectReduce::fits(1, 0));
  CHECK(DirectReduce::fits(DirectReduce::kMaxRanks, DirectReduce::kSlotBytes));
  CHECK_FALSE(DirectReduce::fits(DirectReduce::kMaxRanks + 1, 8));
  CHECK_FALSE(DirectReduce::fits(0, 8));
  CHECK_FALSE(DirectReduce::fits(2, DirectReduce::kSlotBytes + 1));
  // The slots hold more than an allreduce takes: allgather's and reduce-scatter's posts.
  CHECK(DirectReduce::holds(DirectReduce::kMaxRanks, DirectReduce::kPostBytes));
  CHECK_FALSE(DirectReduce::holds(2, DirectReduce::kPostBytes + 1));
  CHECK_FALSE(DirectReduce::holds(DirectReduce::kMaxRanks + 1, 8));
  HeapArena arena;
  CHECK_THROWS_AS(DirectReduce::create_shared(arena, DirectReduce::kMaxRanks + 1), UsageError);
  DirectReduce reducer(arena, DirectReduce::create_shared(arena, 1), 1, nullptr);
  const ReduceOp op = builtin_op("sum", DType::float64);
  std::vector<double> v(DirectReduce::kSlotBytes / sizeof(double) + 1, 1.0);
  DirectRank me;
  CHECK_THROWS_AS(reducer.allreduce(me, reinterpret_cast<const std::byte*>(v.data()),
                                    reinterpret_cast<std::byte*>(v.data()), v.size(), &op, patient()),
                  UsageError);
}

TEST_CASE("concurrency: direct reduce: a missing rank ends the wait at its deadline, an abort sooner", "[direct]") {
  const ReduceOp op = builtin_op("sum", DType::int32);
  SECTION("deadline") {
    HeapArena arena;
    DirectReduce reducer(arena, DirectReduce::create_shared(arena, 3), 3, nullptr);
    DirectRank me;
    WaitPolicy policy;
    policy.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    policy.timeout_message = [&] { return "waiting for rank " + std::to_string(me.waiting_for); };
    int v = 1;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(
        reducer.allreduce(me, reinterpret_cast<const std::byte*>(&v), reinterpret_cast<std::byte*>(&v), 1, &op, policy),
        "waiting for rank 1");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
  SECTION("abort") {
    std::atomic<bool> aborted{false};
    const auto t0 = std::chrono::steady_clock::now();
    const auto errors = on_ranks(2, [&](int r, DirectReduce& reducer) {
      if (r == 1) {  // never calls; aborts the "team" instead
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        aborted = true;
        return;
      }
      DirectRank me;
      me.rank = r;
      WaitPolicy policy = patient();
      policy.check = [&] {
        if (aborted) throw LinkAborted{};
      };
      int v = 1;
      reducer.allreduce(me, reinterpret_cast<const std::byte*>(&v), reinterpret_cast<std::byte*>(&v), 1, &op, policy);
    });
    REQUIRE(errors[0]);
    CHECK_THROWS_AS(std::rethrow_exception(errors[0]), LinkAborted);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
}
