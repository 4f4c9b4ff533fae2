// copse::mpi::Team and Comm under mpirun, checked against the sequential
// reference. One program holds every case, so that one mpirun (start-up
// costs about half a second) runs a whole np/layout combination:
//
//   copse_mpi_tests all [--ranks-per-node K]
//       the seven entry points; sum, max and a non-commutative user operator
//       (affine maps composed in rank order); int32, int64, float, double;
//       counts 0, 1, p-1, p+1, 1000 and 2^20+3; in place; roots other than
//       0; MPI_COMM_WORLD, a dup, a split in reverse order and a round-robin
//       split (with virtual nodes: nodes of non-consecutive ranks); repeated
//       calls reusing plans and a bounded plan cache; bitwise identical float
//       allreduce on random data; a slow rank (MPI keeps progressing, waits
//       are reported); a deadline; mismatched counts failing with both sizes
//       named; a thread level too low for thread ranks refused; edge()
//       with SLT and PRR and rank 1 late: right results, every rank planned
//       from the same predictions, rank 1 last; cross-memory attach on
//       (large messages read from node peers' memory, or the kernel's
//       refusal named) and off.
//   copse_mpi_tests hybrid --threads T0,T1,... [--ranks-per-node K]
//       process q brings Tq thread ranks (MPI_THREAD_MULTIPLE when every
//       process has the same count, else MPI_THREAD_SERIALIZED, so both
//       locking paths run); every thread runs the matrix on its own Comm,
//       and edge() with PRR and copse rank 1 late.
//   copse_mpi_tests death | death-direct
//       np 4, virtual nodes of 3 (death-direct: np 3, one node, a vector
//       the direct reduce takes): process 1 is killed while it waits in an
//       allreduce; every other process must fail with an error naming it
//       (tests/mpi/process_death.sh checks what they print).
//
// Every process checks its own results; the exit status is 1 if any check
// failed anywhere. libcopse_mpi.so also holds the interposition library, so
// the test's own MPI calls are PMPI_ ones: they must not go through copse.

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/mpi_comm.hpp"
#include "transport/direct_reduce.hpp"

// Not `using namespace copse`: copse::Comm (threads) would clash with copse::mpi::Comm.
using copse::builtin_op;
using copse::DirectReduce;
using copse::DType;
using copse::Error;
using copse::ErrorKind;
using copse::fill_input;
using copse::ReduceOp;
using copse::reference_result;
using copse::to_string;
using copse::UsageError;
using copse::user_op;
using copse::mpi::Comm;
using copse::mpi::CommOptions;
using copse::mpi::Team;

namespace {

int g_world = 0;
std::atomic<long> g_checks{0};
std::atomic<long> g_failures{0};

void fail(const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "FAIL (MPI rank %d): %s\n", g_world, what.c_str());
}

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) fail(what);
}

// ---- operators --------------------------------------------------------------------

// The non-commutative operator, as an application would write it: affine
// maps x -> a*x + b as pairs (a, b), composed "first, then second" with
// wrap-around integer arithmetic. Named "affine" so that fill_input gives it
// the inputs whose reference is exact.
template <class T>
ReduceOp affine_user_op(DType dtype) {
  return user_op("affine", dtype, false, 2 * sizeof(T), [](const void* a, void* b, std::size_t n) {
    using U = std::make_unsigned_t<T>;
    const T* x = static_cast<const T*>(a);
    T* y = static_cast<T*>(b);
    for (std::size_t i = 0; i < n; ++i) {
      const U a1 = static_cast<U>(x[2 * i]), b1 = static_cast<U>(x[2 * i + 1]);
      const U a2 = static_cast<U>(y[2 * i]), b2 = static_cast<U>(y[2 * i + 1]);
      y[2 * i] = static_cast<T>(static_cast<U>(a1 * a2));
      y[2 * i + 1] = static_cast<T>(static_cast<U>(a2 * b1 + b2));
    }
  });
}

struct OpCase {
  const char* name;
  DType dtype;
};

ReduceOp make_op(const OpCase& c) {
  if (std::strcmp(c.name, "affine") == 0)
    return c.dtype == DType::int32 ? affine_user_op<std::int32_t>(c.dtype) : affine_user_op<std::int64_t>(c.dtype);
  return builtin_op(c.name, c.dtype);
}

const OpCase kOps[] = {{"sum", DType::int32},   {"sum", DType::int64},   {"sum", DType::float32},
                       {"sum", DType::float64}, {"max", DType::int32},   {"max", DType::int64},
                       {"max", DType::float32}, {"max", DType::float64}, {"affine", DType::int32},
                       {"affine", DType::int64}};
const DType kTypes[] = {DType::int32, DType::int64, DType::float32, DType::float64};

// ---- data ---------------------------------------------------------------------------

using Bytes = std::vector<std::byte>;

Bytes input(const ReduceOp& op, int rank, std::uint64_t n) {
  Bytes x(static_cast<std::size_t>(n * op.element_bytes));
  fill_input(op, rank, n, x.data());
  return x;
}

Bytes poison(std::size_t bytes) { return Bytes(bytes, std::byte{0xA5}); }

ReduceOp data_op(DType t) { return builtin_op("max", t); }  // only for fill_input's data

std::string where(const Comm& c, const std::string& what) {
  return what + " on rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size());
}

// First differing element, for the message.
void compare(const Comm& c, const std::string& what, const std::byte* got, const std::byte* want, std::size_t bytes,
             std::size_t eb) {
  ++g_checks;
  if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return;
  std::size_t e = 0;
  while (std::memcmp(got + e * eb, want + e * eb, eb) == 0) ++e;
  fail(where(c, what) + ": wrong at element " + std::to_string(e));
}

std::string label(const char* collective, const ReduceOp& op, std::uint64_t n, bool in_place, int root = -1) {
  std::ostringstream m;
  m << collective << " " << op.name << " " << to_string(op.dtype) << " n=" << n << (in_place ? " in place" : "");
  if (root >= 0) m << " root " << root;
  return m.str();
}

// ---- one check per entry point ------------------------------------------------------

void check_allreduce(Comm& c, const ReduceOp& op, std::uint64_t n, bool in_place) {
  const std::size_t bytes = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), n), y = poison(bytes);
  if (in_place)
    c.allreduce(x.data(), x.data(), n, op);
  else
    c.allreduce(x.data(), y.data(), n, op);
  const Bytes want = reference_result(op, c.size(), n);
  compare(c, label("allreduce", op, n, in_place), (in_place ? x : y).data(), want.data(), bytes, op.element_bytes);
}

void check_reduce(Comm& c, const ReduceOp& op, std::uint64_t n, int root, bool in_place) {
  const std::size_t bytes = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), n), y = poison(bytes);
  const bool here = in_place && c.rank() == root;  // MPI: in place at the root only
  c.reduce(x.data(), here ? x.data() : (c.rank() == root ? y.data() : nullptr), n, op, root);
  if (c.rank() != root) return;
  const Bytes want = reference_result(op, c.size(), n);
  compare(c, label("reduce", op, n, here, root), (here ? x : y).data(), want.data(), bytes, op.element_bytes);
}

void check_bcast(Comm& c, DType t, std::uint64_t n, int root) {
  const ReduceOp op = data_op(t);
  const Bytes want = input(op, root, n);
  Bytes x = c.rank() == root ? want : poison(want.size());
  c.bcast(x.data(), n, t, root);
  compare(c, label("bcast", op, n, false, root), x.data(), want.data(), want.size(), op.element_bytes);
}

void check_allgather(Comm& c, DType t, std::uint64_t n, bool in_place) {
  const ReduceOp op = data_op(t);
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  const auto p = static_cast<std::size_t>(c.size());
  Bytes want;
  for (int r = 0; r < c.size(); ++r) {
    const Bytes x = input(op, r, n);
    want.insert(want.end(), x.begin(), x.end());
  }
  Bytes y = poison(p * block);
  const Bytes mine = input(op, c.rank(), n);
  if (in_place) {
    std::copy(mine.begin(), mine.end(),
              y.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c.rank()) * block));
    c.allgather(y.data(), y.data(), n, t);
  } else {
    c.allgather(mine.data(), y.data(), n, t);
  }
  compare(c, label("allgather", op, n, in_place), y.data(), want.data(), want.size(), op.element_bytes);
}

void check_reduce_scatter_block(Comm& c, const ReduceOp& op, std::uint64_t n, bool in_place) {
  const auto p = static_cast<std::uint64_t>(c.size());
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), p * n), y = poison(block);
  if (in_place)
    c.reduce_scatter_block(x.data(), x.data(), n, op);
  else
    c.reduce_scatter_block(x.data(), y.data(), n, op);
  const Bytes all = reference_result(op, c.size(), p * n);
  compare(c, label("reduce_scatter_block", op, n, in_place), (in_place ? x : y).data(),
          all.data() + static_cast<std::size_t>(c.rank()) * block, block, op.element_bytes);
}

// Blocks of base, base+1, base+2, base, ... elements (and none for rank 1
// when base is 0).
void check_reduce_scatter(Comm& c, const ReduceOp& op, std::uint64_t base, bool in_place) {
  const int p = c.size();
  std::vector<int> counts;
  std::uint64_t total = 0, mine_at = 0;
  for (int v = 0; v < p; ++v) {
    counts.push_back(static_cast<int>(base + static_cast<std::uint64_t>(v % 3)));
    if (v == c.rank()) mine_at = total;
    total += static_cast<std::uint64_t>(counts.back());
  }
  const std::size_t eb = op.element_bytes;
  const std::size_t mine = static_cast<std::size_t>(counts[static_cast<std::size_t>(c.rank())]) * eb;
  Bytes x = input(op, c.rank(), total), y = poison(mine);
  if (in_place)
    c.reduce_scatter(x.data(), x.data(), counts.data(), op);
  else
    c.reduce_scatter(x.data(), y.data(), counts.data(), op);
  const Bytes all = reference_result(op, p, total);
  compare(c, label("reduce_scatter", op, base, in_place), (in_place ? x : y).data(),
          all.data() + static_cast<std::size_t>(mine_at) * eb, mine, eb);
}

// Nobody leaves the barrier before the last rank (which comes 30 ms late)
// has entered it. steady_clock is CLOCK_MONOTONIC, one clock for the host.
void check_barrier(Comm& c) {
  using Clock = std::chrono::steady_clock;
  const int late = c.size() - 1;
  if (c.rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::int64_t entered = Clock::now().time_since_epoch().count();
  c.barrier();
  const std::int64_t left = Clock::now().time_since_epoch().count();
  c.bcast(&entered, 1, DType::int64, late);
  expect(left >= entered, where(c, "barrier: left before the last rank entered"));
}

// ---- the matrix -------------------------------------------------------------------------

template <class F>
void guarded(Comm& c, const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(where(c, what) + ": " + e.what());
  }
}

// Every entry point at every count with every operator and type (reductions)
// or type (data movement), in place on alternate calls, roots cycling.
// `small` trims it to a few operators for the sub-communicators.
void run_matrix(Comm& c, bool small) {
  const int p = c.size();
  const std::uint64_t counts[] = {0, 1, static_cast<std::uint64_t>(p - 1), static_cast<std::uint64_t>(p + 1), 1000};
  int i = 0;
  for (std::uint64_t n : counts)
    for (const OpCase& oc : kOps) {
      if (small && std::strcmp(oc.name, "affine") != 0 && oc.dtype != DType::float64 && n != 1) continue;
      const ReduceOp op = make_op(oc);
      const bool in_place = (i++ % 2) != 0;
      const int root = (i * 5 + 1) % p;
      guarded(c, "matrix", [&] {
        check_allreduce(c, op, n, in_place);
        check_reduce(c, op, n, root, !in_place);
        check_reduce_scatter_block(c, op, n, in_place);
        check_reduce_scatter(c, op, n, !in_place);
      });
    }
  for (std::uint64_t n : counts)
    for (DType t : kTypes) {
      if (small && t != DType::int64) continue;
      const int root = (i++ * 3 + 2) % p;
      guarded(c, "matrix", [&] {
        check_bcast(c, t, n, root);
        check_allgather(c, t, n, (i % 2) != 0);
      });
    }
  guarded(c, "barrier", [&] { check_barrier(c); });
}

// Vectors of over 2^20 elements (pieces of a 4 MiB window), once per entry
// point: 2^20+3 elements for allreduce, reduce and bcast; blocks of
// 2^20/p+3 for allgather and the reduce-scatters, whose vectors hold p blocks.
void run_large(Comm& c) {
  const std::uint64_t n = (std::uint64_t{1} << 20) + 3;
  const int p = c.size();
  const std::uint64_t block = (std::uint64_t{1} << 20) / static_cast<std::uint64_t>(p) + 3;
  guarded(c, "large", [&] {
    check_allreduce(c, builtin_op("sum", DType::float32), n, true);
    check_reduce(c, make_op({"affine", DType::int32}), n, p - 1, false);
    check_bcast(c, DType::float64, n, p / 2);
    check_allgather(c, DType::int32, block, false);
    check_reduce_scatter_block(c, builtin_op("max", DType::int64), block, true);
    check_reduce_scatter(c, builtin_op("sum", DType::int32), block, false);
  });
}

// Random, inexact floats: every rank must end with the same bits.
void check_bitwise(Comm& c) {
  guarded(c, "bitwise", [&] {
    for (std::uint64_t n : {std::uint64_t{1000}, std::uint64_t{70001}}) {
      std::mt19937 rng(1234U + static_cast<unsigned>(c.rank()));
      std::uniform_real_distribution<float> value(-1.0F, 1.0F);
      std::vector<float> x(n);
      for (float& v : x) v = value(rng) * 1e3F;
      c.allreduce(x.data(), x.data(), n, builtin_op("sum", DType::float32));
      std::uint64_t hash = 1469598103934665603ULL;
      for (float v : x) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &v, 4);
        hash = (hash ^ bits) * 1099511628211ULL;
      }
      std::vector<std::uint64_t> all(static_cast<std::size_t>(c.size()));
      c.allgather(&hash, all.data(), 1, DType::uint64);
      for (std::uint64_t h : all) expect(h == hash, where(c, "float allreduce not bitwise identical on every rank"));
    }
  });
}

// The same shapes again hit the cache; more shapes than it holds evict.
// (Vectors past the direct reduce's slots: smaller ones on one node are
// not schedules, and plan nothing.)
void check_plan_cache(Comm& c) {
  guarded(c, "plan cache", [&] {
    const ReduceOp op = builtin_op("sum", DType::int32);
    const std::uint64_t first = DirectReduce::kSlotBytes / sizeof(std::int32_t) + 1;
    for (int round = 0; round < 2; ++round)
      for (std::uint64_t n = first; n < first + 10; ++n) check_allreduce(c, op, n, false);
    expect(c.cached_plans() == 4,
           where(c, "the plan cache holds " + std::to_string(c.cached_plans()) + " shapes, not 4"));
    check_allreduce(c, op, first + 9, true);
    expect(c.cached_plans() == 4, where(c, "a cached shape changed the cache's size"));
  });
}

// ---- modes ------------------------------------------------------------------------------

struct Args {
  std::string mode;
  int ranks_per_node = 0;
  std::vector<int> threads;
};

Args parse(int argc, char** argv) {
  Args a;
  a.mode = argc > 1 ? argv[1] : "all";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--ranks-per-node") {
      a.ranks_per_node = std::stoi(argv[i + 1]);
    } else if (key == "--threads") {
      std::stringstream list(argv[i + 1]);
      for (std::string t; std::getline(list, t, ',');) a.threads.push_back(std::stoi(t));
    }
  }
  return a;
}

CommOptions options_for(const Args& a) {
  CommOptions o;
  o.ranks_per_node = a.ranks_per_node;
  o.wait_report = std::chrono::seconds(5);  // a hang says where it is, well within CTest's timeout
  return o;
}

MPI_Comm split(MPI_Comm comm, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  PMPI_Comm_split(comm, 0, key, &out);
  return out;
}

// Ranks call allreduce with different counts: every rank must fail, and the
// message must name the ranks and both sizes.
void check_mismatch(MPI_Comm comm, const Args& a) {
  int p = 0, me = 0;
  PMPI_Comm_size(comm, &p);
  PMPI_Comm_rank(comm, &me);
  if (p < 2) return;
  Team team(comm, options_for(a));
  Comm& c = team.comm();
  const ReduceOp op = builtin_op("sum", DType::int32);
  const std::uint64_t n = c.rank() == 1 ? 11 : 10;
  Bytes x = input(op, c.rank(), n);
  try {
    c.allreduce(x.data(), x.data(), n, op);
    fail(where(c, "allreduce with mismatched counts returned"));
  } catch (const Error& e) {
    const std::string m = e.what();
    expect(e.kind() == ErrorKind::schedule && m.find("rank 1") != std::string::npos &&
               m.find("11 elements") != std::string::npos && m.find("10 elements") != std::string::npos,
           where(c, std::string("mismatched counts: unexpected error: ") + e.what()));
  }
}

// A rank that comes late: the others wait (polling MPI, reporting whom they
// wait for) and the result is right.
void check_slow_rank(MPI_Comm comm, const Args& a) {
  CommOptions o = options_for(a);
  o.wait_report = std::chrono::milliseconds(100);
  std::atomic<int> reports{0};
  std::mutex mutex;
  std::string sample;
  o.on_wait_report = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mutex);
    if (m.find("still blocked after") != std::string::npos && m.find("waiting for rank") != std::string::npos)
      ++reports;
    sample = m;
  };
  Team team(comm, o);
  Comm& c = team.comm();
  if (c.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  guarded(c, "slow rank",
          [&] { check_allreduce(c, builtin_op("sum", DType::float64), std::uint64_t{1} << 18, false); });
  int mine = reports.load(), all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, comm);
  expect(c.size() < 2 || all > 0,
         where(c, "nobody reported waiting for the slow rank 0 (last report: " + sample + ")"));
}

// With a deadline, a rank that does not come fails everyone's collective
// with a TimeoutError naming whom they waited for (rank 0 comes 600 ms late
// and finds the team failed).
void check_deadline(MPI_Comm comm, const Args& a) {
  CommOptions o = options_for(a);
  o.wait_timeout = std::chrono::milliseconds(200);
  Team team(comm, o);
  Comm& c = team.comm();
  if (c.size() < 2) return;
  if (c.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const ReduceOp op = builtin_op("sum", DType::int64);
  Bytes x = input(op, c.rank(), 100);
  try {
    c.allreduce(x.data(), x.data(), 100, op);
    fail(where(c, "an allreduce past its deadline returned"));
  } catch (const Error& e) {
    const std::string m = e.what();
    expect(e.kind() == ErrorKind::timeout && m.find("timed out after 200 ms waiting for rank") != std::string::npos,
           where(c, std::string("deadline: unexpected error: ") + e.what()));
  }
}

// Thread ranks need MPI_THREAD_SERIALIZED; this run initialised FUNNELED.
void check_thread_level_refused(MPI_Comm comm, const Args& a) {
  try {
    Team team(comm, options_for(a), 2);
    fail("a Team of 2 thread ranks per process was made at MPI_THREAD_FUNNELED");
  } catch (const UsageError& e) {
    expect(std::string(e.what()).find("MPI_THREAD_SERIALIZED") != std::string::npos,
           std::string("thread level refusal: ") + e.what());
  }
}

// Comm::edge with an arrival-aware allreduce: iterations of a computation
// phase (rank 1 sleeps 80 ms longer, edge(0.5) half way) and an allreduce.
// After the warm-up (1 call) every rank planned from rank 0's vector, in
// which rank 1 is the latest; every result is right.
void check_arrival(MPI_Comm comm, const Args& a) {
  for (const char* algorithm : {"slt", "prr"}) {
    CommOptions o = options_for(a);
    o.allreduce = algorithm;
    o.arrival.warmup = 1;
    o.arrival.resolution = 2'000'000'000;  // 2 ms
    o.wait_timeout = std::chrono::milliseconds(60000);
    Team team(comm, o);
    Comm& c = team.comm();
    const int p = c.size();
    const ReduceOp op = builtin_op("sum", DType::int64);
    guarded(c, std::string("arrival ") + algorithm, [&] {
      for (int it = 0; it < 4; ++it) {
        const auto phase = std::chrono::milliseconds(c.rank() == 1 ? 81 : 1);
        std::this_thread::sleep_for(phase / 2);
        c.edge(0.5);
        std::this_thread::sleep_for(phase / 2);
        check_allreduce(c, op, 1000 + static_cast<std::uint64_t>(it), false);
        std::vector<copse::Picos> planned = c.planned_arrival(), first = planned;
        first.resize(static_cast<std::size_t>(p));
        PMPI_Bcast(first.data(), p, MPI_INT64_T, 0, comm);
        const std::string what = std::string("arrival ") + algorithm + " iteration " + std::to_string(it);
        expect(planned.empty() == (it < 1), where(c, what + ": planned by arrival only after the warm-up"));
        if (it < 1) continue;
        expect(planned == first, where(c, what + ": planned from another vector than rank 0's"));
        bool latest = true;
        for (int r = 0; r < p && p > 1; ++r)
          if (r != 1 && planned[static_cast<std::size_t>(r)] >= planned[1]) latest = false;
        expect(latest, where(c, what + ": rank 1 is not the latest"));
      }
    });
  }
}

// Cross-memory attach (CommOptions::cross_memory_attach). On, a process
// with node peers in other processes reads their large messages out of
// their memory -- the bytes it read say so, so that a silent fallback to the
// window fails here -- unless the kernel refuses it (the note then names
// process_vm_readv). Automatic, the same, or off with the probe's reason
// (refused, or slower than the window's copies). Off, every message goes
// through the window. Right results every way, on vectors that the window
// alone cuts into pieces.
void check_cross_memory_attach(MPI_Comm comm, const Args& a) {
  using Attach = CommOptions::Attach;
  for (Attach mode : {Attach::on, Attach::automatic, Attach::off}) {
    CommOptions o = options_for(a);
    o.cross_memory_attach = mode;
    Team team(comm, o);
    Comm& c = team.comm();
    const std::string& note = team.cross_memory_attach_note();
    if (mode != Attach::off && !team.cross_memory_attach()) {
      expect(note.find("process_vm_readv") != std::string::npos || note.find("another process") != std::string::npos,
             where(c, "cross-memory attach is off, but the probe says no reason: " + note));
      if (g_world == 0) std::fprintf(stderr, "note: no cross-memory attach here (%s)\n", note.c_str());
      if (mode == Attach::on) continue;
    }
    const bool on = team.cross_memory_attach();
    if (mode == Attach::off) expect(!on, where(c, "cross-memory attach off"));
    if (on || mode == Attach::off)
      expect(note == (on ? "on" : "off (not asked for)"), where(c, "cross-memory attach note: " + note));
    bool peers = false;  // node peers in other processes
    const auto& layout = team.layout();
    for (int r = 0; r < layout.ranks(); ++r)
      peers = peers || (layout.node(r) == layout.node(c.rank()) && layout.process(r) != layout.process(c.rank()));
    const std::uint64_t before = team.attached_bytes();
    run_large(c);
    const bool read = team.attached_bytes() > before;
    expect(read == (on && peers), where(c, std::string("large messages ") + (read ? "" : "not ") +
                                               "read by cross-memory attach with it " + (on ? "on" : "off")));
  }
}

// TEST_MPI_PHASES=1: world rank 0 says how long each phase took.
void phase(const char* name) {
  static auto last = std::chrono::steady_clock::now();
  const auto now = std::chrono::steady_clock::now();
  if (g_world == 0 && std::getenv("TEST_MPI_PHASES"))
    std::fprintf(stderr, "phase %-28s %.3f s\n", name, std::chrono::duration<double>(now - last).count());
  last = now;
}

void run_all(const Args& a) {
  MPI_Comm world = MPI_COMM_WORLD;
  int p = 0;
  PMPI_Comm_size(world, &p);
  {
    CommOptions o = options_for(a);
    o.plan_cache = 4;
    Team team(world, o);
    check_plan_cache(team.comm());
  }
  phase("plan cache");
  {
    // Cross-memory attach wherever the kernel allows it, whether or not it
    // pays here (automatic, the default, may turn it off), so that the
    // matrix runs on it; the sub-communicators below take the default.
    CommOptions o = options_for(a);
    o.cross_memory_attach = CommOptions::Attach::on;
    Team team(world, o);
    Comm& c = team.comm();
    run_matrix(c, false);
    phase("matrix");
    run_large(c);
    phase("large");
    check_bitwise(c);
    phase("bitwise");
    run_matrix(c, true);  // again: every plan from the cache
    phase("small matrix, cached");
  }
  // Sub-communicators: a dup, the reverse order, evens then odds.
  MPI_Comm dup = MPI_COMM_NULL;
  PMPI_Comm_dup(world, &dup);
  MPI_Comm reverse = split(world, p - 1 - g_world);
  MPI_Comm round_robin = split(world, (g_world % 2) * p + g_world);
  for (MPI_Comm sub : {dup, reverse, round_robin}) {
    Team team(sub, options_for(a));
    run_matrix(team.comm(), true);
    check_bitwise(team.comm());
    phase("sub-communicator");
  }
  check_mismatch(reverse, a);
  phase("mismatch");
  check_slow_rank(round_robin, a);
  phase("slow rank");
  check_deadline(dup, a);
  phase("deadline");
  check_thread_level_refused(world, a);
  phase("thread level");
  check_arrival(reverse, a);
  phase("arrival");
  check_cross_memory_attach(round_robin, a);
  phase("cross-memory attach");
  for (MPI_Comm* sub : {&dup, &reverse, &round_robin}) PMPI_Comm_free(sub);
}

void run_hybrid(const Args& a) {
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  if (static_cast<int>(a.threads.size()) != p) {
    fail("--threads needs one count per process");
    return;
  }
  const int t = a.threads[static_cast<std::size_t>(g_world)];
  {
    // edge() from thread ranks: copse rank 1 late; right results, planned
    // from predictions after the warm-up with rank 1 the latest.
    CommOptions o = options_for(a);
    o.allreduce = "prr";
    o.arrival.warmup = 1;
    o.arrival.resolution = 2'000'000'000;
    Team team(MPI_COMM_WORLD, o, t);
    std::vector<std::thread> threads;
    for (int i = 0; i < t; ++i)
      threads.emplace_back([&team, i] {
        Comm& c = team.comm(i);
        guarded(c, "hybrid arrival", [&] {
          for (int it = 0; it < 3; ++it) {
            const auto phase = std::chrono::milliseconds(c.rank() == 1 ? 61 : 1);
            std::this_thread::sleep_for(phase / 2);
            c.edge(0.5);
            std::this_thread::sleep_for(phase / 2);
            check_allreduce(c, builtin_op("sum", DType::int64), 500, true);
            const auto& planned = c.planned_arrival();
            expect(planned.empty() == (it < 1), where(c, "hybrid arrival: planned by arrival after the warm-up"));
            bool latest = !planned.empty();
            for (std::size_t r = 0; r < planned.size() && c.size() > 1; ++r)
              if (r != 1 && planned[r] >= planned[1]) latest = false;
            if (it >= 1 && c.size() > 1) expect(latest, where(c, "hybrid arrival: rank 1 is not the latest"));
          }
        });
      });
    for (auto& th : threads) th.join();
  }
  for (MPI_Comm comm : {MPI_COMM_WORLD}) {
    Team team(comm, options_for(a), t);
    std::vector<std::thread> threads;
    for (int i = 0; i < t; ++i)
      threads.emplace_back([&team, i] {
        Comm& c = team.comm(i);
        run_matrix(c, false);
        run_large(c);
        check_bitwise(c);
        run_matrix(c, true);
      });
    for (auto& th : threads) th.join();
  }
}

// Process 1 is killed in the middle of an allreduce: it has sent its part of
// the first piece and waits for that piece's result, which cannot come before
// process 2 (800 ms late) arrives; the pieces after it need process 1's data,
// which never comes. (With cross-memory attach the allreduce runs whole, not
// in pieces, and the peer that comes to read process 1's posted part finds
// its process gone.) Node 0 is processes 0-2, node 1 process 3. Every other
// process prints how it failed, one line each, for process_death.sh.
// `direct`: one node, and an allreduce small enough for the direct reduce
// (death-direct); else virtual nodes of 3 and one that runs in pieces.
void run_death(const Args&, bool direct) {
  CommOptions o;
  o.ranks_per_node = direct ? 0 : 3;
  o.window_bytes = 64 << 10;  // pieces of 32 KiB: the allreduce below runs in 13
  Team team(MPI_COMM_WORLD, o);
  Comm& c = team.comm();
  const ReduceOp op = builtin_op("sum", DType::int32);
  const std::uint64_t n = direct ? 100 : 100000;
  Bytes x = input(op, c.rank(), n);
  c.allreduce(x.data(), x.data(), n, op);  // everyone is set up and has planned
  std::printf("copse-death: pid %d is MPI rank %d\n", static_cast<int>(getpid()), g_world);
  std::fflush(stdout);
  PMPI_Barrier(MPI_COMM_WORLD);
  if (g_world == 1)
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }).detach();
  if (g_world == 2) std::this_thread::sleep_for(std::chrono::milliseconds(800));
  // A direct reduce needs nothing of a peer once it has posted: rank 1 must
  // die before it posts.
  if (direct && g_world == 1) std::this_thread::sleep_for(std::chrono::seconds(10));
  const auto start = std::chrono::steady_clock::now();
  try {
    c.allreduce(x.data(), x.data(), n, op);
    std::printf("copse-death: MPI rank %d: the allreduce returned\n", g_world);
  } catch (const std::exception& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("copse-death: MPI rank %d failed after %.2f s: %s\n", g_world, s, e.what());
  }
  std::fflush(stdout);
  // MPI cannot finish a job with a dead process, so leave without
  // MPI_Finalize -- but not at once: mpirun ends the whole job as soon as
  // one process leaves that way, and the others must have had their chance
  // to notice the death themselves.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  int required = MPI_THREAD_FUNNELED;
  if (a.mode == "hybrid") {
    const bool same = std::all_of(a.threads.begin(), a.threads.end(), [&](int t) { return t == a.threads.front(); });
    required = same ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, required, &provided);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world);
  const auto start = std::chrono::steady_clock::now();
  try {
    if (provided < required) fail("MPI does not provide the thread level this test needs");
    if (a.mode == "all")
      run_all(a);
    else if (a.mode == "hybrid")
      run_hybrid(a);
    else if (a.mode == "death-direct")
      run_death(a, true);
    else if (a.mode == "death")
      run_death(a, false);
    else
      fail("unknown mode " + a.mode);
  } catch (const std::exception& e) {
    fail(std::string("uncaught: ") + e.what());
  }
  long counts[2] = {g_checks.load(), g_failures.load()}, totals[2] = {0, 0};
  PMPI_Reduce(counts, totals, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  if (g_world == 0)
    std::printf("copse_mpi_tests %s (np %d%s): %ld checks, %ld failed, %.1f s\n", a.mode.c_str(), p,
                a.ranks_per_node ? (", virtual nodes of " + std::to_string(a.ranks_per_node)).c_str() : "", totals[0],
                totals[1], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const int status = g_world == 0 && totals[1] > 0 ? 1 : 0;
  MPI_Finalize();
  return status;
}
