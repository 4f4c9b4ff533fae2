#pragma once
// The hierarchical communicator for ranks that are threads of one process
// (hybrid MPI+threads applications, and the emulated cluster).
//
// A Team owns p ranks laid out over nodes and planned into a hierarchy; each
// rank's thread calls collectives on its own Comm. Every collective is a
// schedule (plan/hierarchical.hpp) executed by the same single-copy
// rendezvous link engine the emulator uses: a receiver reads the sender's
// buffer directly, so user buffers are never staged through a copy.
//
// Plan once, run many: the first call of a given shape (collective, count,
// datatype, operator, root) builds and caches that rank's schedule and its
// scratch space; a repeated call of the same shape allocates nothing. The
// operator counts by identity (ReduceOp::identity), not by name.
//
// The collectives and accessors are the Comm's
// (runtime/communicator.hpp), the same as the MPI Comm's. In place: pass the
// same pointer as send and receive buffer (MPI_IN_PLACE semantics).
//
// Buffers: allreduce runs the schedule on recv, reading send where recv has
// not been written yet (no up-front copy); bcast runs on the buffer;
// allgather runs on recv. Peers read and write these user buffers directly.
// Reduce and reduce_scatter_block run on a scratch buffer cached with the
// shape (send is const, and the schedule leaves partial results
// everywhere), reading send the same way, then copy the result out;
// reduce_scatter with unequal counts copies the blocks in, padded. Scatter,
// gather and alltoall run on a cached working vector in the schedule's
// layout, the blocks copied in and out (runtime/rank_core.hpp, MovedBlocks).
//
// Nonblocking and persistent (Comm::iallreduce ... Comm::alltoall_init):
// every collective, run by the same code as the blocking call's schedule
// (ThreadCall, over the same cached entry), progressed a step at a time from
// its Request -- bit for bit the blocking call's result where that one runs
// its schedule too. They never take the direct paths below but for a small
// allreduce or a barrier of one node (RankCore::direct_call): those wait
// for every rank of the node. A persistent call is planned at its init.
//
// Small vectors: on one node without a virtual clock, an allreduce of at
// most DirectReduce::kSlotBytes and every barrier run in one round through
// the direct shared-memory reduce (transport/direct_reduce.hpp) -- each rank
// posts its vector and reduces all of them in rank order -- where the
// selection would choose (an algorithm named in the options runs as named).
//
// Virtual time (TeamOptions::virtual_clock): each collective starts every
// rank's clock at zero; after the call, virtual_time() is this rank's finish
// time under the team's cost model -- the simulator's finish time for the
// same hierarchical schedule. (The local copies in and out are not charged.)
//
// Failure: a timeout, a size mismatch or a throwing operator on any rank
// aborts the team: every rank's collective in progress (and every later one)
// throws that first error. When a collective throws, no peer touches its
// buffers any more. Bad arguments (unknown algorithm, root out of range, a
// non-commutative operator for a commutative-only algorithm) throw
// UsageError on the calling rank without aborting the team.
//
// All ranks must call the same collectives in the same order with matching
// arguments; a mismatch is detected where the schedule sizes disagree. A rank
// that never comes is reported (TeamOptions::wait_report) or, with a
// wait_timeout, fails every rank's collective with TimeoutError naming it.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cost_model.hpp"
#include "common/reduce_op.hpp"
#include "plan/arrival_monitor.hpp"
#include "plan/planner.hpp"
#include "runtime/comm_options.hpp"
#include "runtime/communicator.hpp"
#include "topology/plan.hpp"

namespace copse {

// CommOptionsBase (runtime/comm_options.hpp): planning (algorithms per
// collective, blocks, cost model, grouping, form), arrival estimates, waits.
struct TeamOptions : CommOptionsBase {
  std::vector<NodeSpec> nodes;  // empty: one node, this machine (hwloc), `ranks` ranks
  int ranks = 2;                // used when `nodes` is empty
  // Keep every rank's virtual clock (Comm::virtual_time). Off, a message
  // carries no times, and one of a few bytes is eager: copied beside the
  // link's words and done at once, without waiting for its receiver.
  bool virtual_clock = false;
};

class Team {
 public:
  explicit Team(TeamOptions options);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const;
  const RankMap& layout() const;      // every rank's node
  const HierarchyPlan& plan() const;  // the hierarchy of the configured form (flat, auto: one leader)
  Comm& comm(int rank);               // the calling thread must act as this rank
  // The team's compiled plan for `key` (planned once, shared by every rank's
  // Comm): what a collective of that key runs. Its `algorithm` must outlive
  // the team's use of it (a registry name or a literal).
  std::shared_ptr<const CompiledPlan> compiled_plan(const CallKey& key);
  const Planner& planner() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace copse
