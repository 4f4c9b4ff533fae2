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
// In place: pass the same pointer as send and receive buffer (allreduce,
// reduce, reduce_scatter, allgather) -- MPI_IN_PLACE semantics: allgather
// then takes this rank's contribution from recv + rank * count, and
// reduce_scatter reads all size() * count elements from recv and leaves the
// rank's reduced block in its first count elements.
//
// Buffers: allreduce runs the schedule on recv, reading send where recv has
// not been written yet (no up-front copy); bcast runs on the buffer;
// allgather runs on recv. Peers read and write these user buffers directly.
// Reduce and reduce_scatter run on a scratch buffer cached with the shape
// (send is const, and the schedule leaves partial results everywhere),
// reading send the same way, then copy the result out.
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

class Comm;

class Team {
 public:
  explicit Team(TeamOptions options);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const;
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

class Comm {
 public:
  int rank() const;
  int size() const;

  void allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root);  // recv used at root
  void bcast(void* buffer, std::size_t count, DType dtype, int root);
  void barrier();
  // recv holds size() * count elements, rank r's contribution at r * count.
  void allgather(const void* send, void* recv, std::size_t count, DType dtype);
  // send holds size() * count elements; recv gets this rank's reduced block of count.
  void reduce_scatter(const void* send, void* recv, std::size_t count, const ReduceOp& op);

  Picos virtual_time() const;  // this rank's virtual clock after its last collective

  // Progress report for the next allreduce (Proficz 2018, §3): this rank has
  // done `fraction` (in (0, 1]) of its computation phase -- the time since
  // its previous collective returned. With an arrival-aware allreduce
  // (TeamOptions::allreduce "slt" or "prr"), the first edge() of a phase
  // publishes this rank's predicted arrival; after the warm-up
  // (ArrivalOptions::warmup allreduces, run with the team's default
  // algorithm), each allreduce waits until every rank has published (a rank
  // that made no edge() publishes its arrival) and is planned in predicted
  // order, the latest last. Cheap and harmless with other algorithms (it
  // only feeds the estimator). Never blocks. See plan/arrival_monitor.hpp.
  void edge(double fraction);
  // The predictions (picoseconds after the earliest, every rank's the same)
  // this rank's last allreduce was planned from; empty if it was not planned
  // by arrival.
  const std::vector<Picos>& planned_arrival() const;

 private:
  friend class Team;
  struct Impl;
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;

 public:
  ~Comm();
  Comm(Comm&&) noexcept;
};

}  // namespace copse
