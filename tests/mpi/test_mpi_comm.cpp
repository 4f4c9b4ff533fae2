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
//   copse_mpi_tests matrix [--ranks-per-node K]
//       the same without the per-feature checks (slow rank, deadline,
//       mismatch, thread level, edge(), cross-memory attach): the data matrix
//       at another shape. Those checks are two thirds sleeps and a
//       p-independent path; the suite runs them at one shape per layout
//       kind (CMakeLists.txt) and the matrix at every shape.
//   copse_mpi_tests hybrid --threads T0,T1,... [--ranks-per-node K]
//       process q brings Tq thread ranks (MPI_THREAD_MULTIPLE when every
//       process has the same count, else MPI_THREAD_SERIALIZED, so both
//       locking paths run); every thread runs the matrix on its own Comm,
//       and edge() with PRR and copse rank 1 late.
//   copse_mpi_tests death | death-direct [--victim R] [--ranks-per-node K]
//       np 4, virtual nodes of 3 (death-direct: np 3, one node, a vector
//       the direct reduce takes): process R (default 1) is killed while it
//       waits in an allreduce; every other process must fail with an error
//       naming it (tests/mpi/process_death.sh checks what they print).
//       --ranks-per-node 0: the hosts' own nodes.
//
// Every process checks its own results; the exit status is 1 if any check
// failed anywhere. libcopse_mpi.so also holds the interposition library, so
// the test's own MPI calls are PMPI_ ones: they must not go through copse.

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_checks.hpp"
#include "runtime/rank_core.hpp"
#include "runtime/read_choice.hpp"
#include "tests/heap_policy.hpp"

namespace mpi_tests {
namespace {

// ---- modes ------------------------------------------------------------------------------

struct Args {
  std::string mode;
  int ranks_per_node = 0;
  bool ranks_per_node_given = false;
  int victim = 1;  // death: the process killed
  std::vector<int> threads;
};

Args parse(int argc, char** argv) {
  Args a;
  a.mode = argc > 1 ? argv[1] : "all";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--ranks-per-node") {
      a.ranks_per_node = std::stoi(argv[i + 1]);
      a.ranks_per_node_given = true;
    } else if (key == "--victim") {
      a.victim = std::stoi(argv[i + 1]);
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
  if (c.size() < 2) return;  // nobody to wait for rank 0
  if (c.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  guarded(c, "slow rank",
          [&] { check_allreduce(c, builtin_op("sum", DType::float64), std::uint64_t{1} << 18, false); });
  int mine = reports.load(), all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, comm);
  expect(all > 0, where(c, "nobody reported waiting for the slow rank 0 (last report: " + sample + ")"));
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
// phase (rank 1 sleeps 200 ms longer, edge(0.5) half way: more than an
// oversubscribed, sanitized process may lose to the scheduler) and an
// allreduce.
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
      for (int it = 0; it < 3; ++it) {  // the warm-up, then two calls planned by arrival
        const auto phase = std::chrono::milliseconds(c.rank() == 1 ? 201 : 1);
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

// Where cross-memory attach serves allgathers alone (the kernel's read is
// slow, or asked for), a one-node team's direct broadcast streams every
// vector through its ring, and its direct reduce and allgather go through
// the slots or the schedules, none reading by address -- unless the set-up
// timed the read faster than the ring too (`reads`: its note says so), when
// the broadcast's readers, the reduce's root (of a team of at most
// RankCore::kReduceByAddressRanks) and every allgather and reduce-scatter
// rank read. A gather's
// root reads every block where it lies either way (one read replaces copies
// made one after another). Reads count where there are node peers in other
// processes (`peers`). Right results every way.
// `reads`: the probe found the read faster than the ring. `chosen`: the
// calls choose by their own times after it (runtime/read_choice.hpp): each
// kind's first ReadChoice::kTrialCalls calls copy, the next as many read.
void check_direct_reads(Comm& c, const Team& team, bool peers, bool reads, bool chosen) {
  const int p = c.size(), me = c.rank();
  auto read_since = [&](std::uint64_t before) { return team.attached_bytes() > before; };
  auto say = [&](const std::string& what, bool read) {
    return where(c, what + (read ? " read" : " not read") + " by cross-memory attach" +
                        (team.oversubscribed() ? " (oversubscribed)" : " (a core each)"));
  };
  for (const std::size_t bytes : {std::size_t{256} << 10, std::size_t{4} << 20})
    for (int call = 0; call <= (chosen ? copse::ReadChoice::kTrialCalls : 0); ++call) {
      std::vector<std::uint8_t> v(bytes);
      for (std::size_t i = 0; i < bytes; ++i) v[i] = me == 0 ? static_cast<std::uint8_t>(i * 7 + 3) : 0;
      const std::uint64_t before = team.attached_bytes();
      c.bcast(v.data(), bytes, DType::uint8, 0);
      bool right = true;
      for (std::size_t i = 0; i < bytes; ++i) right = right && v[i] == static_cast<std::uint8_t>(i * 7 + 3);
      const std::string what = "bcast of " + std::to_string(bytes) + " bytes, call " + std::to_string(call + 1);
      expect(right, where(c, what + ": wrong bytes"));
      const bool read = read_since(before);
      const bool reading = chosen ? call == copse::ReadChoice::kTrialCalls : reads;
      expect(read == (reading && me != 0), say(what, read));
    }
  reads = reads && !chosen;        // the reduce's and the allgather's first calls copy when chosen
  const std::size_t n = 16 << 10;  // floats: 64 KiB a rank, beyond the slots
  std::vector<float> mine(n), all(n * static_cast<std::size_t>(p)), sum(n);
  for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(me * 1000 + static_cast<int>(i % 997));
  std::uint64_t before = team.attached_bytes();
  c.reduce(mine.data(), sum.data(), n, builtin_op("sum", DType::float32), 0);
  bool right = true;
  for (std::size_t i = 0; me == 0 && i < n; ++i)
    right = right && sum[i] == static_cast<float>(1000 * p * (p - 1) / 2 + p * static_cast<int>(i % 997));
  expect(right, where(c, "reduce of 64 KiB: wrong sums"));
  bool read = read_since(before);
  expect(read == (reads && me == 0 && p <= copse::RankCore::kReduceByAddressRanks), say("reduce of 64 KiB", read));
  auto check_blocks = [&](const std::string& what, bool here) {
    bool ok = true;
    for (std::size_t r = 0; here && r < static_cast<std::size_t>(p); ++r)
      for (std::size_t i = 0; i < n; ++i)
        ok = ok && all[r * n + i] == static_cast<float>(static_cast<int>(r) * 1000 + static_cast<int>(i % 997));
    expect(ok, where(c, what + ": wrong blocks"));
  };
  before = team.attached_bytes();
  c.allgather(mine.data(), all.data(), n, DType::float32);
  check_blocks("allgather of 64 KiB", true);
  read = read_since(before);
  expect(read == (reads && peers), say("allgather of 64 KiB", read));
  // Every rank's vector of p blocks of 64 KiB, all alike: each rank reads
  // and sums its block of the others'.
  std::vector<float> vector(all.size()), block(n);
  for (std::size_t i = 0; i < vector.size(); ++i) vector[i] = mine[i % n];
  before = team.attached_bytes();
  c.reduce_scatter_block(vector.data(), block.data(), n, builtin_op("sum", DType::float32));
  right = true;
  for (std::size_t i = 0; i < n; ++i)
    right = right && block[i] == static_cast<float>(1000 * p * (p - 1) / 2 + p * static_cast<int>(i % 997));
  expect(right, where(c, "reduce_scatter_block of 64 KiB: wrong sums"));
  read = read_since(before);
  expect(read == (reads && peers), say("reduce_scatter_block of 64 KiB", read));
  std::fill(all.begin(), all.end(), 0.0f);
  const int root = p - 1;
  before = team.attached_bytes();
  c.gather(mine.data(), all.data(), n, DType::float32, root);
  check_blocks("gather of 64 KiB", me == root);
  read = read_since(before);
  expect(read == (me == root && peers), say("gather of 64 KiB", read));
}

// Cross-memory attach (CommOptions::cross_memory_attach). On, a process
// with node peers in other processes reads their large messages out of
// their memory -- the bytes it read say so, so that a silent fallback to the
// window fails here -- unless the kernel refuses it (the note then names
// process_vm_readv). For allgathers, the same for an allgather of a vector
// larger than half a window, and no other collective's but a one-node
// team's direct paths (check_direct_reads). Automatic, as on,
// or for allgathers with the probe's reason (slower than the window's
// copies), or off with the probe's reason (refused). Off, every message
// goes through the window. Right results every way, on vectors that the
// window alone cuts into pieces.
void check_cross_memory_attach(MPI_Comm comm, const Args& a) {
  using Attach = CommOptions::Attach;
  for (Attach mode : {Attach::on, Attach::allgather, Attach::automatic, Attach::off}) {
    CommOptions o = options_for(a);
    o.cross_memory_attach = mode;
    Team team(comm, o);
    Comm& c = team.comm();
    const std::string& note = team.cross_memory_attach_note();
    if (mode != Attach::off && !team.cross_memory_attach()) {
      expect(note.find("process_vm_readv") != std::string::npos || note.find("another process") != std::string::npos,
             where(c, "cross-memory attach is off, but the probe says no reason: " + note));
      if (g_world == 0) std::fprintf(stderr, "note: no cross-memory attach here (%s)\n", note.c_str());
      if (mode == Attach::on || mode == Attach::allgather) continue;
    }
    const bool on = team.cross_memory_attach();
    if (mode == Attach::off) expect(!on, where(c, "cross-memory attach off"));
    // For allgathers alone where asked, or where the probe timed the kernel's read slow.
    const bool allgathers = note.rfind("allgather only", 0) == 0;
    if (mode == Attach::allgather) expect(note == "allgather only (asked for)", where(c, "note: " + note));
    if (mode == Attach::on) expect(note == "on", where(c, "cross-memory attach note: " + note));
    if (mode == Attach::off) expect(note == "off (not asked for)", where(c, "cross-memory attach note: " + note));
    if (mode == Attach::automatic && on && !allgathers) expect(note == "on", where(c, "note: " + note));
    bool peers = false;  // node peers in other processes
    const auto& layout = team.layout();
    for (int r = 0; r < layout.ranks(); ++r)
      peers = peers || (layout.node(r) == layout.node(c.rank()) && layout.process(r) != layout.process(c.rank()));
    const std::uint64_t before = team.attached_bytes();
    run_large(c, false);  // the matrix's run_large has moved data with attach on
    const bool read = team.attached_bytes() > before;
    expect(read == (on && peers), where(c, std::string("large messages ") + (read ? "" : "not ") +
                                               "read by cross-memory attach with it " + (on ? "on" : "off")));
    if (allgathers) {  // no other collective reads
      const std::uint64_t after = team.attached_bytes();
      check_allreduce(c, builtin_op("sum", DType::float32), (std::uint64_t{1} << 20) + 3, true);
      expect(team.attached_bytes() == after,
             where(c, "cross-memory attach for allgathers alone read an allreduce's messages"));
      bool one_node = true;
      for (int r = 0; r < layout.ranks(); ++r) one_node = one_node && layout.node(r) == layout.node(0);
      if (one_node)
        check_direct_reads(c, team, peers, note.find("the read beat the ring") != std::string::npos,
                           note.find("by its own times") != std::string::npos);
    }
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

void run_feature_checks(const Args& a, MPI_Comm dup, MPI_Comm reverse, MPI_Comm round_robin);

// The data matrix on the world and three sub-communicators; with `features`,
// the per-feature checks after it.
void run_all(const Args& a, bool features) {
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
    run_vector(c, p == 2 || p == 5);
    phase("vector");
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
    run_vector(team.comm(), false);
    check_bitwise(team.comm());
    phase("sub-communicator");
  }
  if (features) run_feature_checks(a, dup, reverse, round_robin);
  for (MPI_Comm* sub : {&dup, &reverse, &round_robin}) PMPI_Comm_free(sub);
}

// The per-feature checks, on the sub-communicators run_all made.
void run_feature_checks(const Args& a, MPI_Comm dup, MPI_Comm reverse, MPI_Comm round_robin) {
  MPI_Comm world = MPI_COMM_WORLD;
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
            const auto phase = std::chrono::milliseconds(c.rank() == 1 ? 201 : 1);
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

// The victim (process 1 unless --victim) is killed in the middle of an
// allreduce: it has sent its part of the first piece and waits for that
// piece's result, which cannot come before the next process (800 ms late)
// arrives; the pieces after it need the victim's data, which never comes.
// (With cross-memory attach the allreduce runs whole, not in pieces, and
// the peer that comes to read the victim's posted part finds its process
// gone.) On one host node 0 is processes 0-2, node 1 process 3. Every other
// process prints how it failed, one line each, for process_death.sh.
// `direct`: one node, and an allreduce small enough for the direct reduce
// (death-direct); else virtual nodes of 3 (or --ranks-per-node) and one
// that runs in pieces.
void run_death(const Args& a, bool direct) {
  CommOptions o;
  o.ranks_per_node = direct ? 0 : a.ranks_per_node_given ? a.ranks_per_node : 3;
  o.window_bytes = 64 << 10;  // pieces of 32 KiB: the allreduce below runs in 13
  o.wait_report = std::chrono::seconds(2);
  Team team(MPI_COMM_WORLD, o);
  Comm& c = team.comm();
  const ReduceOp op = builtin_op("sum", DType::int32);
  const std::uint64_t n = direct ? 100 : 100000;
  Bytes x = input(op, c.rank(), n);
  c.allreduce(x.data(), x.data(), n, op);  // everyone is set up and has planned
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::printf("copse-death: pid %d is MPI rank %d on host %s\n", static_cast<int>(getpid()), g_world, host);
  std::fflush(stdout);
  PMPI_Barrier(MPI_COMM_WORLD);
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  if (g_world == a.victim)
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }).detach();
  if (g_world == (a.victim + 1) % p) std::this_thread::sleep_for(std::chrono::milliseconds(800));
  // A direct reduce needs nothing of a peer once it has posted: the victim
  // must die before it posts.
  if (direct && g_world == a.victim) std::this_thread::sleep_for(std::chrono::seconds(10));
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
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::_Exit(0);
}

}  // namespace
}  // namespace mpi_tests

int main(int argc, char** argv) {
  copse::testing::keep_freed_memory();
  using namespace mpi_tests;
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
    if (a.mode == "all" || a.mode == "matrix")
      run_all(a, a.mode == "all");
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
