// The hierarchical Comm with ranks that are threads: every collective against
// the sequential reference (in place and not, built-in, non-commutative and
// user operators, counts 0 to large; scatter and gather from several roots), over single nodes and uneven synthetic
// clusters, every grouping policy with and without multi-leader, every
// inter-node allreduce algorithm; virtual times against the simulator; a
// repeated call that allocates nothing; bad arguments and user operators of
// one name. test_comm_failures.cpp has the timeouts, errors and waits.
//
// Catch2's assertions are not thread-safe, so rank threads only record what
// they saw; the checks run on the main thread after the join.
//
// Counting allocations: this file replaces the global operator new/delete of
// the test binary with versions that forward to malloc/free and count the
// calls per thread (a thread_local counter). Forwarding keeps every other
// test's behaviour, sanitizers included (they intercept malloc/free); the
// count covers everything C++ allocates (containers, strings,
// std::function, exceptions' messages), which is what "a repeated call
// allocates nothing" promises. Being per thread, it measures exactly the
// calling rank's own work.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "plan/hierarchical.hpp"
#include "runtime/comm.hpp"
#include "tests/allocation_count.hpp"
#include "tests/comm_threads.hpp"
#include "tests/support.hpp"

namespace {
thread_local std::uint64_t t_allocations = 0;

void* counted_alloc(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* counted_alloc(std::size_t n, std::align_val_t al) {
  ++t_allocations;
  const auto a = static_cast<std::size_t>(al);
  const std::size_t rounded = n == 0 ? a : (n + a - 1) / a * a;
  if (void* p = std::aligned_alloc(a, rounded)) return p;
  throw std::bad_alloc();
}
// Out of line, so that the compiler does not see free() meet a new-expression
// once operator delete is inlined (-Wmismatched-new-delete).
[[gnu::noinline]] void release(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t al) { return counted_alloc(n, al); }
void* operator new[](std::size_t n, std::align_val_t al) { return counted_alloc(n, al); }
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, al);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, al);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }

std::uint64_t copse::testing::allocations_on_this_thread() { return t_allocations; }

using namespace copse;

namespace {

using Bytes = std::vector<std::byte>;

using copse::testing::check_no_errors;
using copse::testing::message_of;
using copse::testing::on_every_rank;
using copse::testing::options_for;

// A rank's record of wrong results (the first few), checked after the join.
struct Log {
  std::vector<std::string> wrong;
  void expect(const std::string& what, const std::byte* got, const std::byte* want, std::size_t bytes) {
    if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return;
    std::size_t i = 0;
    while (got[i] == want[i]) ++i;
    if (wrong.size() < 5)
      wrong.push_back(what + ": first wrong byte " + std::to_string(i) + " of " + std::to_string(bytes));
  }
};

// A non-commutative user operator: 2x2 matrices of uint32 (wrapping), b = a * b.
ReduceOp matrix_op() {
  return user_op("mat2", DType::uint32, false, 16, [](const void* a, void* b, std::size_t n) {
    const auto* x = static_cast<const std::uint32_t*>(a);
    auto* y = static_cast<std::uint32_t*>(b);
    for (std::size_t i = 0; i < n; ++i, x += 4, y += 4) {
      const std::uint32_t r0 = x[0] * y[0] + x[1] * y[2], r1 = x[0] * y[1] + x[1] * y[3];
      const std::uint32_t r2 = x[2] * y[0] + x[3] * y[2], r3 = x[2] * y[1] + x[3] * y[3];
      y[0] = r0, y[1] = r1, y[2] = r2, y[3] = r3;
    }
  });
}

struct Workload {
  ReduceOp op;
  std::uint64_t n;
  Bytes allreduce;       // reference_result over n elements
  Bytes reduce_scatter;  // reference_result over p * n elements
};

std::vector<Workload> workloads(int p, const std::vector<ReduceOp>& ops, const std::vector<std::uint64_t>& counts) {
  std::vector<Workload> w;
  for (const ReduceOp& op : ops)
    for (std::uint64_t n : counts)
      w.push_back(
          Workload{op, n, reference_result(op, p, n), reference_result(op, p, n * static_cast<std::uint64_t>(p))});
  return w;
}

// Scatter from and gather to two roots each, and alltoall, against the
// inputs they move; in place (at the root) when asked. Off the root a
// scatter's send and a gather's recv are null: MPI leaves them insignificant.
void moving_collectives(Comm& comm, const Workload& w, bool in_place, const std::string& tag, Log& log) {
  const ReduceOp& op = w.op;
  const int p = comm.size(), r = comm.rank();
  const std::size_t bytes = w.n * op.element_bytes, scalars = bytes / dtype_size(op.dtype);
  const auto pz = static_cast<std::size_t>(p), rz = static_cast<std::size_t>(r);
  Bytes mine(bytes);
  fill_input(op, r, w.n, mine.data());
  for (int root : {0, p - 1}) {
    Bytes all(pz * bytes), got(bytes, std::byte{0xA5});
    fill_input(op, root, w.n * pz, all.data());
    Bytes send = r == root ? all : Bytes();
    const bool here = in_place && r == root;
    comm.scatter(r == root ? send.data() : nullptr, here ? send.data() : got.data(), scalars, op.dtype, root);
    if (here)
      log.expect(tag + "scatter in place from " + std::to_string(root), send.data(), all.data(), pz * bytes);
    else
      log.expect(tag + "scatter from " + std::to_string(root), got.data(), all.data() + rz * bytes, bytes);
  }
  Bytes want(pz * bytes);
  for (int q = 0; q < p; ++q) fill_input(op, q, w.n, want.data() + static_cast<std::size_t>(q) * bytes);
  for (int root : {p / 2, p - 1}) {
    Bytes all(pz * bytes, std::byte{0xA5});
    if (in_place && r == root) {
      if (bytes) std::memcpy(all.data() + rz * bytes, mine.data(), bytes);
      comm.gather(all.data(), all.data(), scalars, op.dtype, root);
    } else {
      comm.gather(mine.data(), r == root ? all.data() : nullptr, scalars, op.dtype, root);
    }
    if (r == root) log.expect(tag + "gather to " + std::to_string(root), all.data(), want.data(), pz * bytes);
  }
  Bytes send(pz * bytes), got(pz * bytes, std::byte{0xA5}), theirs(pz * bytes);
  fill_input(op, r, w.n * pz, send.data());
  for (int q = 0; q < p; ++q) {  // block r of rank q's blocks
    fill_input(op, q, w.n * pz, theirs.data());
    if (bytes) std::memcpy(want.data() + static_cast<std::size_t>(q) * bytes, theirs.data() + rz * bytes, bytes);
  }
  comm.alltoall(send.data(), in_place ? send.data() : got.data(), scalars, op.dtype);
  log.expect(tag + "alltoall", (in_place ? send : got).data(), want.data(), pz * bytes);
}

// Every collective on one rank, in place and not, recording wrong results.
void every_collective(Comm& comm, const std::vector<Workload>& work, Log& log) {
  const int p = comm.size(), r = comm.rank();
  for (const Workload& w : work) {
    const ReduceOp& op = w.op;
    const std::size_t eb = op.element_bytes, bytes = w.n * eb;
    const std::size_t scalars = bytes / dtype_size(op.dtype);  // bcast and allgather count datatype values
    const auto pz = static_cast<std::size_t>(p), rz = static_cast<std::size_t>(r);
    Bytes mine(bytes), out(bytes), copy(bytes);
    fill_input(op, r, w.n, mine.data());
    for (bool in_place : {false, true}) {
      const std::string tag = op.name + " n=" + std::to_string(w.n) + (in_place ? " in place" : "") + ": ";
      // allreduce
      copy = mine;
      if (in_place) {
        comm.allreduce(copy.data(), copy.data(), w.n, op);
        log.expect(tag + "allreduce", copy.data(), w.allreduce.data(), bytes);
      } else {
        std::fill(out.begin(), out.end(), std::byte{0xA5});
        comm.allreduce(copy.data(), out.data(), w.n, op);
        log.expect(tag + "allreduce", out.data(), w.allreduce.data(), bytes);
        log.expect(tag + "allreduce left its send buffer alone", copy.data(), mine.data(), bytes);
      }
      // reduce to several roots; recv is untouched off the root
      for (int root : {0, p / 2, p - 1}) {
        copy = mine;
        std::fill(out.begin(), out.end(), std::byte{0xA5});
        Bytes poison(bytes, std::byte{0xA5});
        if (in_place && r == root) {
          comm.reduce(copy.data(), copy.data(), w.n, op, root);
          log.expect(tag + "reduce to " + std::to_string(root), copy.data(), w.allreduce.data(), bytes);
        } else {
          comm.reduce(copy.data(), out.data(), w.n, op, root);
          log.expect(tag + "reduce to " + std::to_string(root), out.data(),
                     r == root ? w.allreduce.data() : poison.data(), bytes);
          log.expect(tag + "reduce left its send buffer alone", copy.data(), mine.data(), bytes);
        }
      }
      // bcast from several roots
      for (int root : {0, p - 1}) {
        Bytes want(bytes);
        fill_input(op, root, w.n, want.data());
        Bytes buffer(bytes, std::byte{0xA5});
        if (r == root) buffer = want;
        comm.bcast(buffer.data(), scalars, op.dtype, root);
        log.expect(tag + "bcast from " + std::to_string(root), buffer.data(), want.data(), bytes);
      }
      // allgather
      {
        Bytes want(pz * bytes), all(pz * bytes, std::byte{0xA5});
        for (int q = 0; q < p; ++q) fill_input(op, q, w.n, want.data() + static_cast<std::size_t>(q) * bytes);
        if (in_place) {
          if (bytes) std::memcpy(all.data() + rz * bytes, mine.data(), bytes);
          comm.allgather(all.data(), all.data(), scalars, op.dtype);
        } else {
          comm.allgather(mine.data(), all.data(), scalars, op.dtype);
        }
        log.expect(tag + "allgather", all.data(), want.data(), pz * bytes);
      }
      // reduce_scatter
      {
        Bytes send(pz * bytes);
        fill_input(op, r, w.n * pz, send.data());
        const std::byte* want = w.reduce_scatter.data() + rz * bytes;
        if (in_place) {
          comm.reduce_scatter_block(send.data(), send.data(), w.n, op);
          log.expect(tag + "reduce_scatter", send.data(), want, bytes);
        } else {
          std::fill(out.begin(), out.end(), std::byte{0xA5});
          comm.reduce_scatter_block(send.data(), out.data(), w.n, op);
          log.expect(tag + "reduce_scatter", out.data(), want, bytes);
        }
      }
      moving_collectives(comm, w, in_place, tag, log);
    }
  }
}

void run_every_collective(Team& team, const std::vector<Workload>& work) {
  std::vector<Log> logs(static_cast<std::size_t>(team.size()));
  const auto errors =
      on_every_rank(team, [&](Comm& c) { every_collective(c, work, logs[static_cast<std::size_t>(c.rank())]); });
  check_no_errors(errors);
  for (std::size_t r = 0; r < logs.size(); ++r)
    for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
}

std::vector<ReduceOp> all_kinds_of_ops() {
  return {builtin_op("sum", DType::int32), builtin_op("affine", DType::uint32), builtin_op("sum", DType::float64),
          builtin_op("max", DType::int8), matrix_op()};
}

}  // namespace

TEST_CASE("concurrency: comm: every collective, every operator kind, one node of 1 to 8 ranks and 13 on two nodes",
          "[comm]") {
  for (const std::vector<int>& layout : std::vector<std::vector<int>>{{1}, {2}, {3}, {4}, {5}, {8}, {5, 8}}) {
    Team team(options_for(layout));
    INFO("layout of " << team.size() << " ranks:\n" << team.plan().describe());
    run_every_collective(team, workloads(team.size(), all_kinds_of_ops(), {0, 1, 2, 7, 100}));
  }
}

// Two ranks on a machine of two or more cores have a core each: their link
// then leaves every message of 16 KiB and more to its receiver, so that the
// halves of an exchange move at once (link_engine.cpp, deliver_if_waited_for).
TEST_CASE("concurrency: comm: every collective, two ranks, counts past the receiver-moves threshold", "[comm]") {
  Team team(options_for({2}));
  run_every_collective(team, workloads(team.size(), all_kinds_of_ops(), {4095, 4096, 16387, 100003}));
}

TEST_CASE("concurrency: comm: uneven nodes (5, 8, 1), every grouping, with and without multi-leader", "[comm]") {
  const std::vector<ReduceOp> ops = {builtin_op("affine", DType::int32), builtin_op("sum", DType::int64)};
  for (const char* grouping : {"auto", "core", "l3", "package", "size:2", "size:3"})
    for (bool multi : {false, true}) {
      Team team(options_for({5, 8, 1}, grouping, multi));
      INFO("grouping " << grouping << (multi ? ", multi-leader" : "") << "\n" << team.plan().describe());
      run_every_collective(team, workloads(team.size(), ops, {0, 1, 13, 64}));
    }
}

TEST_CASE("concurrency: comm: every inter-node allreduce algorithm, large and odd counts", "[comm]") {
  const ReduceOp affine = builtin_op("affine", DType::uint64), sum = builtin_op("sum", DType::float32);
  for (const AlgorithmInfo& algo : algorithms()) {
    if (algo.collective != Collective::allreduce) continue;
    for (bool multi : {false, true}) {
      TeamOptions o = options_for({3, 4, 2}, "size:2", multi);
      o.allreduce = algo.name;
      Team team(std::move(o));
      const ReduceOp& op = algo.needs_commutative ? sum : affine;
      const int p = team.size();
      for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{999}, std::uint64_t{100003}}) {
        const Bytes want = reference_result(op, p, n);
        std::vector<Log> logs(static_cast<std::size_t>(p));
        const auto errors = on_every_rank(team, [&](Comm& c) {
          Bytes send(n * op.element_bytes), recv(n * op.element_bytes);
          for (int rep = 0; rep < 2; ++rep) {
            fill_input(op, c.rank(), n, send.data());
            c.allreduce(send.data(), recv.data(), n, op);
            logs[static_cast<std::size_t>(c.rank())].expect("allreduce", recv.data(), want.data(), recv.size());
          }
        });
        INFO(algo.name << (multi ? ", multi-leader" : "") << ", n = " << n);
        check_no_errors(errors);
        for (std::size_t r = 0; r < logs.size(); ++r)
          for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
      }
    }
  }
}

TEST_CASE("concurrency: comm: a team on this machine (hwloc), default options", "[comm]") {
  TeamOptions o;
  o.ranks = 3;
  Team team(std::move(o));
  REQUIRE(team.size() == 3);
  run_every_collective(
      team, workloads(3, {builtin_op("sum", DType::int32), builtin_op("affine", DType::int16)}, {0, 5, 4096}));
}

TEST_CASE("concurrency: comm: virtual time equals the simulator's for the same hierarchical schedule", "[comm]") {
  TeamOptions o = options_for({5, 8, 1}, "size:2");
  o.blocks = 4;
  o.virtual_clock = true;
  Team team(o);
  const int p = team.size();
  const ReduceOp op = builtin_op("sum", DType::int32);
  const std::uint64_t n = 5000;
  std::vector<Picos> finish(static_cast<std::size_t>(p));
  const auto errors = on_every_rank(team, [&](Comm& c) {
    Bytes buf(n * 4);
    fill_input(op, c.rank(), n, buf.data());
    c.allreduce(buf.data(), buf.data(), n, op);
    c.allreduce(buf.data(), buf.data(), n, op);  // every call starts the clocks at zero
    finish[static_cast<std::size_t>(c.rank())] = c.virtual_time();
  });
  check_no_errors(errors);
  auto plan = std::make_shared<const HierarchyPlan>(team.plan());
  SimulationOptions sim;
  sim.model = o.model;
  sim.layout = RankMap::from_nodes(plan->node_of);
  sim.element_bytes = 4;
  const SimulationResult expected =
      simulate(plan_hierarchical(plan, find_algorithm(Collective::allreduce, o.allreduce), Shape{p, n, 4, 0}), p, sim);
  CHECK(finish == expected.finish);
}

TEST_CASE("concurrency: comm: barrier holds every rank until all have arrived", "[comm]") {
  Team team(options_for({3, 4}, "size:2"));
  const int p = team.size();
  std::atomic<int> arrived{0};
  std::vector<int> bad(static_cast<std::size_t>(p), 0);
  const int rounds = 40;
  const auto errors = on_every_rank(team, [&](Comm& c) {
    for (int i = 0; i < rounds; ++i) {
      arrived.fetch_add(1);
      c.barrier();
      // Everyone has arrived for round i; nobody can be past round i+1's barrier.
      const int seen = arrived.load();
      if (seen < p * (i + 1) || seen > p * (i + 2) - 1) ++bad[static_cast<std::size_t>(c.rank())];
    }
  });
  check_no_errors(errors);
  CHECK(bad == std::vector<int>(static_cast<std::size_t>(p), 0));
}

TEST_CASE("concurrency: comm: a repeated call of the same shape allocates nothing", "[comm]") {
  Team team(options_for({5, 8, 1}, "auto"));
  const int p = team.size();
  const ReduceOp sum = builtin_op("sum", DType::float64), affine = builtin_op("affine", DType::uint32);
  // A non-commutative user operator too (2 x 2 matrix products, b = a b):
  // user_op (common/reduce_op.cpp) combines `right` through a copy, which
  // whichever thread combines a transfer (sender or receiver, whoever
  // arrives second) makes on its stack.
  const ReduceOp mat = user_op("matmul", DType::uint32, false, 16, [](const void* a, void* b, std::size_t k) {
    const auto* x = static_cast<const std::uint32_t*>(a);
    auto* y = static_cast<std::uint32_t*>(b);
    for (std::size_t i = 0; i < k; ++i, x += 4, y += 4) {
      const std::uint32_t m[4] = {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3], x[2] * y[0] + x[3] * y[2],
                                  x[2] * y[1] + x[3] * y[3]};
      std::copy(m, m + 4, y);
    }
  });
  const std::size_t n = 3001;
  std::vector<std::uint64_t> first(static_cast<std::size_t>(p)), second(static_cast<std::size_t>(p));
  const auto errors = on_every_rank(team, [&](Comm& c) {
    const auto pz = static_cast<std::size_t>(p);
    Bytes a(pz * n * 16), b(pz * n * 16);
    fill_input(sum, c.rank(), n, a.data());
    auto all_collectives = [&] {
      c.allreduce(a.data(), b.data(), n, sum);
      c.allreduce(b.data(), b.data(), n, affine);
      c.allreduce(a.data(), b.data(), n, mat);
      c.reduce(a.data(), b.data(), n, affine, 2);
      c.bcast(a.data(), n, DType::float64, p - 1);
      c.barrier();
      c.allgather(a.data(), b.data(), n, DType::int32);
      c.reduce_scatter_block(a.data(), b.data(), n, affine);
      c.scatter(a.data(), b.data(), n, DType::float64, 3);
      c.gather(b.data(), a.data(), n, DType::float64, 4);
      c.alltoall(a.data(), b.data(), n / 2, DType::int32);
    };
    const std::uint64_t t0 = t_allocations;
    all_collectives();  // plans, materialises and carves scratch: allocates
    const std::uint64_t t1 = t_allocations;
    all_collectives();
    all_collectives();
    const std::uint64_t t2 = t_allocations;
    first[static_cast<std::size_t>(c.rank())] = t1 - t0;
    second[static_cast<std::size_t>(c.rank())] = t2 - t1;
  });
  check_no_errors(errors);
  CHECK(second == std::vector<std::uint64_t>(static_cast<std::size_t>(p), 0));
  CHECK(first[0] > 0);  // the counter does count
}

TEST_CASE("comm refuses bad arguments with a UsageError, and the team stays usable", "[comm]") {
  TeamOptions bad = options_for({2});
  bad.allreduce = "no-such-algorithm";
  CHECK_THROWS_AS(Team(bad), UsageError);
  TeamOptions ring = options_for({1});
  ring.allreduce = "ring";  // commutative only
  Team team(ring);
  std::vector<int> v(4, 1);
  CHECK_THROWS_WITH(team.comm(0).allreduce(v.data(), v.data(), 2, builtin_op("affine", DType::int32)),
                    Catch::Contains("commutative"));
  CHECK_THROWS_AS(team.comm(0).bcast(v.data(), 4, DType::int32, 2), UsageError);
  CHECK_THROWS_AS(team.comm(0).reduce(v.data(), v.data(), 4, builtin_op("sum", DType::int32), -1), UsageError);
  CHECK_THROWS_AS(team.comm(1), UsageError);
  CHECK(team.comm(0).rank() == 0);
  CHECK(team.comm(0).size() == 1);
  // One rank needs no other thread: the team still works.
  team.comm(0).allreduce(v.data(), v.data(), 4, builtin_op("sum", DType::int32));
  CHECK(v == std::vector<int>(4, 1));
}

TEST_CASE("comm: two user operators of one name are two operators (the plan cache keys by identity)", "[comm]") {
  TeamOptions ring = options_for({2});
  ring.allreduce = "ring";  // commutative only
  Team team(ring);
  const ReduceOp add = user_op("mine", DType::int32, true, 4, [](const void* a, void* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) static_cast<int*>(b)[i] += static_cast<const int*>(a)[i];
  });
  // Same name, same shape, but not commutative: ring must refuse it, even
  // though a shape of that name is cached already.
  const ReduceOp ordered = user_op("mine", DType::int32, false, 4, [](const void* a, void* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) static_cast<int*>(b)[i] += static_cast<const int*>(a)[i];
  });
  // And a third of the same name that multiplies: its own function must run.
  const ReduceOp times = user_op("mine", DType::int32, true, 4, [](const void* a, void* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) static_cast<int*>(b)[i] *= static_cast<const int*>(a)[i];
  });
  CHECK(add.identity != ordered.identity);
  CHECK(builtin_op("sum", DType::int32).identity == builtin_op("sum", DType::int32).identity);
  CHECK(builtin_op("sum", DType::int32).identity != builtin_op("sum", DType::int64).identity);

  std::vector<std::vector<int>> sums(2), products(2);
  std::vector<std::string> refused(2);
  const auto errors = on_every_rank(team, [&](Comm& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    sums[r].assign(8, c.rank() + 2);
    c.allreduce(sums[r].data(), sums[r].data(), 8, add);
    std::vector<int> v(8, 1);
    try {
      c.allreduce(v.data(), v.data(), 8, ordered);
    } catch (const UsageError& e) {
      refused[r] = e.what();
    }
    products[r].assign(8, c.rank() + 2);
    c.allreduce(products[r].data(), products[r].data(), 8, times);
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_FALSE(errors[static_cast<std::size_t>(r)]);
    CHECK_THAT(refused[static_cast<std::size_t>(r)], Catch::Contains("needs a commutative operator"));
    CHECK(sums[static_cast<std::size_t>(r)] == std::vector<int>(8, 2 + 3));
    CHECK(products[static_cast<std::size_t>(r)] == std::vector<int>(8, 2 * 3));
  }
}
