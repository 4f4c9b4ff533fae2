// The thread Comm's nonblocking and persistent forms of every collective
// (runtime/pending.hpp; runtime/comm.cpp's ThreadCall): on teams of 1, 2, 3,
// 5 and 8 ranks and on several nodes, counts 0, 1, p - 1, p + 1 and 1000
// (2^20 + 3 for a few), roots other than 0, in place and not, all ten
// outstanding at once. Each round leaves every buffer exactly as the blocking
// round does, and the blocking round's results are the sequential
// reference's (a non-commutative operator, so that order counts); inexact
// floats come out bit for bit as the blocking call's; a persistent start
// allocates nothing.
//
// Catch2's assertions are not thread-safe: rank threads record what they
// saw, the checks run on the main thread after the join.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "runtime/comm.hpp"
#include "tests/allocation_count.hpp"
#include "tests/comm_threads.hpp"

namespace copse::testing {
namespace {

using NbBytes = std::vector<std::byte>;

enum class NbForm { blocking, nonblocking, persistent };

// The collectives of a round: the ten with nonblocking and persistent forms
// (runtime/communicator.hpp) -- MPI's, reduce_scatter twice (equal blocks,
// and a count per rank) -- as the interposer names them; not the v-variants.
using NbKind = MpiCollective;
const std::vector<NbKind>& nb_every_kind() {
  static const std::vector<NbKind> kinds(kMpiCollectives.begin(),
                                         kMpiCollectives.begin() + static_cast<int>(MpiCollective::alltoall) + 1);
  return kinds;
}
std::string nb_name(NbKind k) { return std::string(to_string(k)); }

// A rank's input: elements of the operator (its element_bytes each).
using NbFill = void (*)(const ReduceOp& op, int rank, std::uint64_t count, void* out);

// Inexact doubles (sums of them round differently in another order).
void nb_inexact(const ReduceOp&, int rank, std::uint64_t count, void* out) {
  auto* d = static_cast<double*>(out);
  for (std::uint64_t i = 0; i < count; ++i) d[i] = 1.0 / (3.0 + rank + 0.37 * static_cast<double>(i % 977)) + 1e-9 * i;
}

// What a round runs: the operator, its input, n elements per call (per
// block for the collectives of blocks) and the roots.
struct NbRound {
  ReduceOp op;
  NbFill fill = fill_input;
  std::uint64_t n = 0;
  bool in_place = false;
  std::vector<NbKind> kinds = nb_every_kind();
};

// One call's buffers on one rank.
struct NbCall {
  NbKind kind{};
  int root = 0;
  std::vector<int> counts;  // reduce_scatter: rank v's block
  NbBytes send, recv;
  bool in_place = false;  // this rank passes recv as send
};

int nb_root(NbKind k, int p) { return k == NbKind::gather || k == NbKind::bcast ? p / 2 : p - 1; }

// reduce_scatter's counts: unequal, zero for every third rank.
std::vector<int> nb_counts(int p, std::uint64_t n) {
  std::vector<int> counts(static_cast<std::size_t>(p));
  for (int v = 0; v < p; ++v) counts[static_cast<std::size_t>(v)] = v % 3 == 1 ? 0 : static_cast<int>(n) + v;
  return counts;
}

std::uint64_t nb_total(const std::vector<int>& counts) {
  std::uint64_t t = 0;
  for (int c : counts) t += static_cast<std::uint64_t>(c);
  return t;
}

// Sizes `b` to `bytes` filled with `value` (keeping its storage: a persistent
// call holds the address).
void nb_poison(NbBytes& b, std::size_t bytes) {
  b.resize(bytes);
  std::fill(b.begin(), b.end(), std::byte{0xA5});
}
void nb_input(NbBytes& b, const NbRound& w, int rank, std::uint64_t count) {
  b.resize(count * w.op.element_bytes);
  if (count) w.fill(w.op, rank, count, b.data());
}

// The buffers of `c` as the call starts on rank r of p (in place where the
// round asks and MPI allows it).
void nb_prepare(NbCall& c, const NbRound& w, int p, int r) {
  const std::uint64_t n = w.n, pn = static_cast<std::uint64_t>(p) * n;
  const std::size_t eb = w.op.element_bytes, bytes = n * eb;
  const bool root = r == c.root;
  switch (c.kind) {
    case NbKind::allreduce:
    case NbKind::reduce:
      c.in_place = w.in_place && (c.kind == NbKind::allreduce || root);
      nb_input(c.in_place ? c.recv : c.send, w, r, n);
      if (!c.in_place) nb_poison(c.recv, bytes);
      return;
    case NbKind::bcast:
      if (root)
        nb_input(c.recv, w, r, n);
      else
        nb_poison(c.recv, bytes);
      return;
    case NbKind::barrier: return;
    case NbKind::allgather:
    case NbKind::gather:
      c.in_place = w.in_place && (c.kind == NbKind::allgather || root);
      nb_input(c.send, w, r, n);
      if (c.kind == NbKind::gather && !root) return c.recv.clear();  // insignificant off the root
      nb_poison(c.recv, p * bytes);
      if (c.in_place && bytes) std::memcpy(c.recv.data() + static_cast<std::size_t>(r) * bytes, c.send.data(), bytes);
      return;
    case NbKind::reduce_scatter_block:
    case NbKind::reduce_scatter:
    case NbKind::alltoall: {
      const bool counted = c.kind == NbKind::reduce_scatter;
      const std::uint64_t in = counted ? nb_total(c.counts) : pn;
      const std::uint64_t out = counted ? static_cast<std::uint64_t>(c.counts[static_cast<std::size_t>(r)])
                                : c.kind == NbKind::alltoall ? pn
                                                             : n;
      c.in_place = w.in_place;
      nb_input(c.in_place ? c.recv : c.send, w, r, in);
      if (!c.in_place) nb_poison(c.recv, out * eb);
      return;
    }
    case NbKind::scatter:
      c.in_place = w.in_place && root;
      if (root) nb_input(c.send, w, r, pn);
      nb_poison(c.recv, bytes);
      return;
    default: return;  // the v-variants: in no round
  }
}

// Calls c in form f: the blocking call returns an empty Request.
Request nb_issue(Comm& comm, NbCall& c, const ReduceOp& op, std::uint64_t n, NbForm f) {
  const bool now = f == NbForm::nonblocking, init = f == NbForm::persistent;
  void* recv = c.recv.empty() ? nullptr : c.recv.data();
  const void* send = c.in_place ? recv : c.send.empty() ? nullptr : c.send.data();
  if (c.kind == NbKind::scatter && c.in_place) send = recv = c.send.data();  // at the root: its block stays in send
  const std::size_t scalars = n * op.element_bytes / dtype_size(op.dtype);   // the data collectives count values
  const DType t = op.dtype;
  switch (c.kind) {
    case NbKind::allreduce:
      if (now) return comm.iallreduce(send, recv, n, op);
      if (init) return comm.allreduce_init(send, recv, n, op);
      return comm.allreduce(send, recv, n, op), Request();
    case NbKind::reduce:
      if (now) return comm.ireduce(send, recv, n, op, c.root);
      if (init) return comm.reduce_init(send, recv, n, op, c.root);
      return comm.reduce(send, recv, n, op, c.root), Request();
    case NbKind::bcast:
      if (now) return comm.ibcast(recv, scalars, t, c.root);
      if (init) return comm.bcast_init(recv, scalars, t, c.root);
      return comm.bcast(recv, scalars, t, c.root), Request();
    case NbKind::barrier:
      if (now) return comm.ibarrier();
      if (init) return comm.barrier_init();
      return comm.barrier(), Request();
    case NbKind::allgather:
      if (now) return comm.iallgather(send, recv, scalars, t);
      if (init) return comm.allgather_init(send, recv, scalars, t);
      return comm.allgather(send, recv, scalars, t), Request();
    case NbKind::reduce_scatter_block:
      if (now) return comm.ireduce_scatter_block(send, recv, n, op);
      if (init) return comm.reduce_scatter_block_init(send, recv, n, op);
      return comm.reduce_scatter_block(send, recv, n, op), Request();
    case NbKind::reduce_scatter:
      if (now) return comm.ireduce_scatter(send, recv, c.counts.data(), op);
      if (init) return comm.reduce_scatter_init(send, recv, c.counts.data(), op);
      return comm.reduce_scatter(send, recv, c.counts.data(), op), Request();
    case NbKind::scatter:
      if (now) return comm.iscatter(send, recv, scalars, t, c.root);
      if (init) return comm.scatter_init(send, recv, scalars, t, c.root);
      return comm.scatter(send, recv, scalars, t, c.root), Request();
    case NbKind::gather:
      if (now) return comm.igather(send, recv, scalars, t, c.root);
      if (init) return comm.gather_init(send, recv, scalars, t, c.root);
      return comm.gather(send, recv, scalars, t, c.root), Request();
    case NbKind::alltoall:
      if (now) return comm.ialltoall(send, recv, scalars, t);
      if (init) return comm.alltoall_init(send, recv, scalars, t);
      return comm.alltoall(send, recv, scalars, t), Request();
    default: break;  // the v-variants: in no round
  }
  return {};
}

// A rank's record of what it saw wrong (the first few), checked after the join.
struct NbLog {
  std::vector<std::string> wrong;
  void expect(bool good, const std::string& what) {
    if (!good && wrong.size() < 8) wrong.push_back(what);
  }
  void same(const NbBytes& got, const std::byte* want, std::size_t bytes, const std::string& what) {
    expect(got.size() >= bytes && (bytes == 0 || std::memcmp(got.data(), want, bytes) == 0), what);
  }
};

// The sequential reference of a round's reductions, computed once for every rank.
struct NbReference {
  NbBytes n, pn, counted;  // over n, p * n and reduce_scatter's total elements
};

NbReference nb_reference(const NbRound& w, int p) {
  const auto pn = static_cast<std::uint64_t>(p) * w.n;
  return {reference_result(w.op, p, w.n), reference_result(w.op, p, pn),
          reference_result(w.op, p, nb_total(nb_counts(p, w.n)))};
}

// The blocking round's buffers of `c` on rank r against the sequential reference.
void nb_check_reference(const NbCall& c, const NbRound& w, const NbReference& ref, int p, int r, NbLog& log) {
  const std::size_t eb = w.op.element_bytes, bytes = w.n * eb;
  const auto pz = static_cast<std::size_t>(p), rz = static_cast<std::size_t>(r);
  const std::string what = nb_name(c.kind) + " against the sequential reference";
  const bool root = r == c.root;
  NbBytes theirs, want;
  auto blocks_of_everyone = [&](std::uint64_t each, std::size_t pick) {  // block `pick` of every rank's input
    want.resize(pz * bytes);
    for (int q = 0; q < p; ++q) {
      nb_input(theirs, w, q, each);
      if (bytes) std::memcpy(want.data() + static_cast<std::size_t>(q) * bytes, theirs.data() + pick * bytes, bytes);
    }
    return want.data();
  };
  switch (c.kind) {
    case NbKind::allreduce: return log.same(c.recv, ref.n.data(), bytes, what);
    case NbKind::reduce:
      if (root) return log.same(c.recv, ref.n.data(), bytes, what);
      return log.expect(std::all_of(c.recv.begin(), c.recv.end(), [](std::byte b) { return b == std::byte{0xA5}; }),
                        what + ": recv untouched off the root");
    case NbKind::bcast: nb_input(theirs, w, c.root, w.n); return log.same(c.recv, theirs.data(), bytes, what);
    case NbKind::barrier: return;
    case NbKind::allgather: return log.same(c.recv, blocks_of_everyone(w.n, 0), pz * bytes, what);
    case NbKind::gather:
      if (root) log.same(c.recv, blocks_of_everyone(w.n, 0), pz * bytes, what);
      return;
    case NbKind::reduce_scatter_block: return log.same(c.recv, ref.pn.data() + rz * bytes, bytes, what);
    case NbKind::reduce_scatter: {
      std::uint64_t at = 0;
      for (std::size_t v = 0; v < rz; ++v) at += static_cast<std::uint64_t>(c.counts[v]);
      return log.same(c.recv, ref.counted.data() + at * eb, static_cast<std::size_t>(c.counts[rz]) * eb, what);
    }
    case NbKind::scatter:
      nb_input(theirs, w, c.root, static_cast<std::uint64_t>(p) * w.n);
      if (c.in_place) return log.same(c.send, theirs.data(), pz * bytes, what + ": the root's send untouched");
      return log.same(c.recv, theirs.data() + rz * bytes, bytes, what);
    case NbKind::alltoall:
      return log.same(c.recv, blocks_of_everyone(static_cast<std::uint64_t>(p) * w.n, rz), pz * bytes, what);
    default: return;  // the v-variants: in no round
  }
}

// One rank's rounds: blocking (against the reference), nonblocking (all
// outstanding at once) and persistent (started twice), each leaving every
// buffer as the blocking round did.
void nb_rounds(Comm& comm, const NbRound& w, const NbReference* ref, NbLog& log) {
  const int p = comm.size(), r = comm.rank();
  std::vector<NbCall> calls;
  for (NbKind k : w.kinds) calls.push_back(NbCall{k, nb_root(k, p), nb_counts(p, w.n), {}, {}, false});
  auto prepare = [&] {
    for (NbCall& c : calls) nb_prepare(c, w, p, r);
  };
  prepare();
  for (NbCall& c : calls) nb_issue(comm, c, w.op, w.n, NbForm::blocking);
  const std::vector<NbCall> blocking = calls;
  if (ref)
    for (const NbCall& c : blocking) nb_check_reference(c, w, *ref, p, r, log);
  auto same_as_blocking = [&](const std::string& form) {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::string what = nb_name(calls[i].kind) + " " + form + ": as the blocking call";
      log.expect(calls[i].send == blocking[i].send && calls[i].recv == blocking[i].recv, what);
    }
  };

  prepare();
  std::vector<Request> started;
  for (NbCall& c : calls) started.push_back(nb_issue(comm, c, w.op, w.n, NbForm::nonblocking));
  // Waiting for the last one started completes every one before it; so
  // does a blocking collective.
  if (w.in_place)
    comm.barrier();
  else
    started.back().wait();
  log.expect(std::all_of(started.begin(), started.end(), [](const Request& q) { return q.done(); }),
             w.in_place ? "nonblocking: completed by a blocking collective" : "nonblocking: completed in order");
  same_as_blocking("nonblocking");

  prepare();
  std::vector<Request> persistent;
  for (NbCall& c : calls) persistent.push_back(nb_issue(comm, c, w.op, w.n, NbForm::persistent));
  for (int round = 0; round < 2; ++round) {
    prepare();  // the same storage: the calls hold its addresses
    for (Request& q : persistent) q.start();
    // A test progresses without waiting (spinning on it would starve the
    // other ranks' threads of the machine's few cores); the wait finishes.
    for (Request& q : persistent) q.test();
    for (Request& q : persistent) q.wait();
    same_as_blocking("persistent, start " + std::to_string(round + 1));
  }
}

void nb_team_rounds(Team& team, const NbRound& w, bool reference) {
  const int p = team.size();
  const NbReference ref = reference ? nb_reference(w, p) : NbReference{};
  std::vector<NbLog> logs(static_cast<std::size_t>(p));
  check_no_errors(on_every_rank(
      team, [&](Comm& c) { nb_rounds(c, w, reference ? &ref : nullptr, logs[static_cast<std::size_t>(c.rank())]); }));
  for (std::size_t r = 0; r < logs.size(); ++r)
    for (const std::string& wrong : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << wrong);
}

const std::vector<std::vector<int>>& nb_layouts() {
  static const std::vector<std::vector<int>> layouts{{1}, {2}, {3}, {5}, {8}, {3, 2, 3}};
  return layouts;
}

}  // namespace

TEST_CASE("concurrency: nonblocking: every collective, nonblocking and persistent, as the blocking call", "[comm]") {
  for (const std::vector<int>& nodes : nb_layouts()) {
    Team team(options_for(nodes));
    const int p = team.size();
    for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, static_cast<std::uint64_t>(p - 1),
                            static_cast<std::uint64_t>(p + 1), std::uint64_t{1000}})
      for (bool in_place : {false, true}) {
        INFO(nodes.size() << " nodes, p = " << p << ", n = " << n << (in_place ? ", in place" : ""));
        nb_team_rounds(team, NbRound{builtin_op("affine", DType::uint32), fill_input, n, in_place}, true);
      }
  }
}

TEST_CASE("concurrency: nonblocking: inexact floats, bit for bit as the blocking call on every rank", "[comm]") {
  // With a virtual clock no direct path serves the blocking calls: they run
  // the schedules the nonblocking ones run, in the same order of operations.
  for (const std::vector<int>& nodes : nb_layouts()) {
    TeamOptions o = options_for(nodes);
    o.virtual_clock = true;
    Team team(o);
    const int p = team.size();
    const std::uint64_t n = 1000 + static_cast<std::uint64_t>(p);
    INFO(nodes.size() << " nodes, p = " << p);
    NbRound w{builtin_op("sum", DType::float64),
              nb_inexact,
              n,
              false,
              {NbKind::allreduce, NbKind::reduce, NbKind::reduce_scatter_block, NbKind::reduce_scatter}};
    nb_team_rounds(team, w, false);
    // And every rank's allreduce is the same sum, near the sequential one.
    std::vector<NbBytes> got(static_cast<std::size_t>(p));
    check_no_errors(on_every_rank(team, [&](Comm& c) {
      NbBytes in;
      nb_input(in, w, c.rank(), n);
      NbBytes& out = got[static_cast<std::size_t>(c.rank())];
      out.resize(in.size());
      c.iallreduce(in.data(), out.data(), n, w.op).wait();
    }));
    for (const NbBytes& g : got) CHECK(g == got[0]);
    double worst = 0;
    NbBytes in;
    for (std::uint64_t i = 0; i < n; ++i) {
      double sum = 0, mine = 0;
      for (int q = 0; q < p; ++q) {
        nb_input(in, w, q, n);
        double x;
        std::memcpy(&x, in.data() + i * sizeof x, sizeof x);
        sum += x;
      }
      std::memcpy(&mine, got[0].data() + i * sizeof mine, sizeof mine);
      worst = std::max(worst, std::abs(mine - sum) / sum);
    }
    CHECK(worst < 1e-12);
  }
}

TEST_CASE("nonblocking: 2^20 + 3 elements, nonblocking and persistent, as the blocking call", "[comm]") {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{2}, {1, 2}}) {
    Team team(options_for(nodes));
    INFO(nodes.size() << " nodes, p = " << team.size());
    NbRound w{builtin_op("sum", DType::int32),
              fill_input,
              (std::uint64_t{1} << 20) + 3,
              false,
              {NbKind::allreduce, NbKind::reduce, NbKind::bcast, NbKind::allgather, NbKind::reduce_scatter_block,
               NbKind::alltoall}};
    nb_team_rounds(team, w, true);
  }
}

TEST_CASE("concurrency: nonblocking: a persistent start allocates nothing", "[comm]") {
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{3}, {2, 3}}) {
    Team team(options_for(nodes));
    const int p = team.size();
    const NbRound w{builtin_op("affine", DType::uint32), fill_input, 777, false};
    std::vector<std::uint64_t> init(static_cast<std::size_t>(p)), during(static_cast<std::size_t>(p), 1);
    check_no_errors(on_every_rank(team, [&](Comm& comm) {
      std::vector<NbCall> calls;
      for (NbKind k : w.kinds) calls.push_back(NbCall{k, nb_root(k, p), nb_counts(p, w.n), {}, {}, false});
      for (NbCall& c : calls) nb_prepare(c, w, p, comm.rank());
      std::vector<Request> persistent;
      persistent.reserve(calls.size());
      const std::uint64_t made = allocations_on_this_thread();
      for (NbCall& c : calls) persistent.push_back(nb_issue(comm, c, w.op, w.n, NbForm::persistent));
      const std::uint64_t before = allocations_on_this_thread();
      init[static_cast<std::size_t>(comm.rank())] = before - made;
      for (int round = 0; round < 3; ++round) {
        for (Request& q : persistent) q.start();
        for (Request& q : persistent) q.wait();
      }
      during[static_cast<std::size_t>(comm.rank())] = allocations_on_this_thread() - before;
    }));
    INFO(nodes.size() << " nodes, p = " << p);
    CHECK(during == std::vector<std::uint64_t>(static_cast<std::size_t>(p), 0));
    CHECK(init[0] > 0);  // the counter does count: the init plans and allocates
  }
}

TEST_CASE("nonblocking: a root that is not a rank is refused at the call, and the team stays usable", "[comm]") {
  Team team(options_for({2}));
  std::vector<int> refused(2, 0), good(2, 0);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    std::int32_t value = c.rank() == 1 ? 42 : 0;
    try {
      c.ibcast(&value, 1, DType::int32, 2);
    } catch (const UsageError&) {
      refused[static_cast<std::size_t>(c.rank())] = 1;
    }
    c.ibcast(&value, 1, DType::int32, 1).wait();
    good[static_cast<std::size_t>(c.rank())] = value == 42;
  }));
  CHECK(refused == std::vector<int>{1, 1});
  CHECK(good == std::vector<int>{1, 1});
}

}  // namespace copse::testing
