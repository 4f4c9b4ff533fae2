#pragma once
// copse over an MPI communicator. A Team is every process of the
// communicator, each contributing one or more thread ranks (hybrid
// MPI+threads: a process of T threads, each thread a copse rank); each
// thread calls collectives on its own Comm. copse ranks are numbered process
// by process in the communicator's rank order, threads in order within one:
// with T threads everywhere, process q's thread t is rank q*T + t.
//
// Threads of one process and processes of one node talk through the node's
// shared segment, nodes over MPI. With more than one thread per process the
// MPI library must provide MPI_THREAD_SERIALIZED or above (copse calls MPI
// from one thread at a time); a lower level is refused with a UsageError
// naming the level needed.
//
// Layout. Nodes are the communicator's shared-memory islands
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), or -- virtual nodes, for
// testing the inter-node path on one host -- blocks of `ranks_per_node`
// consecutive processes of MPI_COMM_WORLD (the last node may be smaller). The processes of a node
// share one Boost.Interprocess segment holding the shared-memory link and
// every rank's working window; transfers within a node go through it (large
// ones, with cross-memory attach, straight from the sender's memory),
// transfers between nodes over MPI point-to-point on a private duplicate of
// the communicator (never on the user's tags). Reduction groups come from
// hwloc over the processes' actual CPU bindings; the configured inter-node
// algorithm runs among the off-node ranks.
//
// The segment: named uniquely per job and communicator, mode 0600, space
// reserved when it is created (a full /dev/shm is a clear SystemError, never
// a SIGBUS later), and unlinked as soon as every process of the node has
// attached, so that a crash leaves nothing in /dev/shm.
//
// Collectives take the same arguments on every process, in the same order
// (MPI's rules). In place: the same pointer as send and receive buffer (see
// each call). Non-commutative operators are applied in rank order. A
// communicator whose nodes do not hold consecutive ranks is served through a
// permutation for commutative operators and by a schedule over the
// communicator's own rank order for the others.
//
// Plans: one cache per Comm (plan/plan_cache.hpp), freed with it, bounded
// (least recently used calls go first), keyed by the call, the datatype and
// the operator's identity. Every process runs the same schedule: rank 0 plans
// through the one planner (plan/planner.hpp) and broadcasts what it chose
// (form, algorithm, blocks); the others build exactly that plan.
//
// Waits have no deadline by default (MPI applications are legitimately
// imbalanced) and report whom they wait for every `wait_report`; a node peer
// that dies is noticed within seconds and every waiting rank fails with an
// error naming it. Errors are copse::Error (common/error.hpp).

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "common/reduce_op.hpp"
#include "plan/planner.hpp"
#include "runtime/comm.hpp"
#include "runtime/communicator.hpp"
#include "topology/plan.hpp"

namespace copse::mpi {

// CommOptionsBase (runtime/comm_options.hpp), the thread Team's: algorithms
// per collective, blocks (0: chosen by rank 0 for everyone), cost model,
// grouping, form, arrival estimates (Comm::edge with an arrival-aware
// allreduce), waits (none: no deadline; default report: one line on stderr). A form other than flat, leader,
// multi-leader or lanes (auto) chooses among the forms this team can plan (the one set up, flat, lanes).
struct CommOptions : CommOptionsBase {
  // 0: nodes are the communicator's shared-memory islands; K > 0: virtual
  // nodes of K consecutive processes of MPI_COMM_WORLD within each island
  // (the last may be smaller). A process's node does not depend on the
  // communicator, as a host's would not.
  int ranks_per_node = 0;
  // Each rank's window in the node's segment: its stage, where its sends to
  // node peers are copied for them to pull. Without cross-memory attach a
  // collective whose vector is larger than half a window runs in pieces of
  // half a window (allgather and reduce_scatter: pieces of every block). The
  // default, 4 MiB, keeps pieces (2 MiB) long enough that a piece's start-up
  // (a few microseconds per tree level) is a few percent of its copy time,
  // while a node of 64 ranks reserves 256 MiB of /dev/shm per communicator.
  std::size_t window_bytes = std::size_t{4} << 20;
  // Cross-memory attach: the processes of a node read each other's large
  // messages (16 KiB and more) straight out of the sender's buffer with
  // process_vm_readv -- one copy instead of two through the window, and no
  // pieces for the window's sake. `on`: wherever a probe at set-up finds
  // every process of the communicator able to read its node peers' memory
  // (the kernel may forbid it: Yama's ptrace_scope, containers, other
  // users). `allgather`: there, for an allgather's sends of 256 KiB and
  // more alone, when some node holds more ranks than cores or the vector
  // exceeds half a window (runtime/mpi_team_state.hpp's AttachUse says
  // why). `automatic`: as `on` where the probe also finds the kernel's copy
  // of 1 MiB taking at most 1.5 times a local memcpy (it replaces the
  // window's two copies, one often made in parallel by the sender; on some
  // virtual machines it is several times slower), else as `allgather`.
  // `off`: every message goes through the window. Team::cross_memory_attach
  // says whether any collective uses it, and its note which and why not.
  enum class Attach { automatic, on, allgather, off };
  Attach cross_memory_attach = Attach::automatic;
  std::size_t plan_cache = 64;  // shapes kept per Comm (least recently used go first)
  // A form this communicator's nodes cannot take -- lanes on nodes of
  // unequal size -- runs as the leader form instead of failing every call.
  // Off here (the C++ API refuses it, UsageError at the call); the
  // configuration's options turn it on (mpi/options.cpp): one
  // hierarchy.form serves every communicator of a program, and a
  // sub-communicator's nodes may be uneven where the world's are not.
  bool form_falls_back = false;
};

// One thread rank's communicator: the same type, and so the same C++ API,
// as the thread Team's (runtime/communicator.hpp). Here: edge() sends this
// rank's predicted phase length to every other rank (p - 1 eight-byte
// MPI_Isend on copse's private communicator; never blocks) and the
// allreduce receives everyone's -- call it only in a phase that an
// allreduce ends (an edge() with no allreduce after it leaves its messages
// unread); virtual_time() is 0 (no virtual clock).
using Comm = copse::Comm;

class Team {
 public:
  // Collective over `comm` (every process calls it, each with the number of
  // thread ranks it brings, at least 1). `comm` must be an
  // intracommunicator; it is duplicated, not kept.
  Team(MPI_Comm comm, CommOptions options = {}, int threads = 1);
  ~Team();  // frees the duplicate and the segment (not collective)
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const;  // copse ranks in all
  // Every copse rank's node, process (= MPI rank), thread and MPI rank.
  const RankMap& layout() const;
  // The hierarchy, over the ranks renumbered node by node (the communicator's
  // own numbering when its nodes hold consecutive ranks).
  const HierarchyPlan& plan() const;
  // Whether the node's processes read large messages from each other's
  // memory (CommOptions::cross_memory_attach, agreed at set-up); if not,
  // why ("off" when not asked for, else the probe's failure as this process
  // saw it, or that another process's probe failed).
  bool cross_memory_attach() const;
  const std::string& cross_memory_attach_note() const;
  // Bytes this process's ranks have read by cross-memory attach so far.
  std::uint64_t attached_bytes() const;
  // Whether some node holds more ranks than can run at once (agreed at
  // set-up from the processes' affinity masks): waits then give up their
  // core, and a broadcast streams through the node's ring rather than being
  // read where cross-memory attach serves allgathers alone.
  bool oversubscribed() const;
  // The calling thread must act as this thread rank of this process.
  Comm& comm(int thread = 0);
  // The Team's duplicate of its communicator, which copse's own messages
  // use. The MPI interposer starts there the library's call of a
  // nonblocking collective it defers once that call is queued: in the
  // queue's order, the same on every process, and never among the
  // application's own collectives on its communicator.
  MPI_Comm duplicate() const;
  // The one planner (plan/planner.hpp) the Comms plan with: over the ranks
  // renumbered node by node, with the hierarchy above (a non-commutative
  // operator on nodes of non-consecutive ranks plans flat, in the
  // communicator's order, instead).
  const Planner& planner() const;
  // The plan the Comm of this process's thread rank `thread` runs for `key`
  // (CommOptions::call_key's, root in the communicator's numbering, count
  // per piece): the compiled plan in its cache, rank 0's as every rank
  // agreed on it; null before the Comm has made a call of that key (or once
  // it was evicted). Unlike the thread Team's, it plans nothing (planning is
  // an agreement among all ranks, made by a call) and leaves the cache's
  // order alone. From the thread acting as that rank, between its calls.
  std::shared_ptr<const CompiledPlan> compiled_plan(const CallKey& key, int thread = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace copse::mpi
