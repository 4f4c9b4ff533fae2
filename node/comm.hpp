#pragma once
// The hierarchical communicator for ranks that are threads of one process
// (hybrid MPI+threads applications, and the emulated cluster).
//
// A Team owns p ranks laid out over nodes and planned into a hierarchy; each
// rank's thread calls collectives on its own Comm. Every collective is a
// schedule (node/hierarchical.hpp) executed by the same single-copy
// rendezvous link engine the emulator uses: a receiver reads the sender's
// buffer directly, so user buffers are never staged through a copy.
//
// Plan once, run many: the first call of a given shape (collective, count,
// datatype, operator, root) builds and caches that rank's schedule and its
// scratch space; a repeated call of the same shape allocates nothing.
//
// In place: pass the same pointer as send and receive buffer (allreduce,
// reduce, reduce_scatter, allgather) -- MPI_IN_PLACE semantics: allgather
// then takes this rank's contribution from recv + rank * count, and
// reduce_scatter reads all size() * count elements from recv and leaves the
// rank's reduced block in its first count elements.
//
// Buffers: allreduce copies send into recv (unless in place) and runs the
// schedule on recv; bcast runs on the buffer; allgather runs on recv. Peers
// read and write these user buffers directly. Reduce and reduce_scatter run
// on a scratch copy of send cached with the shape (send is const, and the
// schedule leaves partial results everywhere), then copy the result out.
//
// Virtual time: each collective starts every rank's clock at zero; after the
// call, virtual_time() is this rank's finish time under the team's cost
// model -- the simulator's finish time for the same hierarchical schedule.
// (The local copies in and out are not charged.)
//
// Failure: a timeout, a size mismatch or a throwing operator on any rank
// aborts the team: every rank's collective in progress (and every later one)
// throws that first error. When a collective throws, no peer touches its
// buffers any more. Bad arguments (unknown algorithm, root out of range, a
// non-commutative operator for a commutative-only algorithm) throw
// UsageError on the calling rank without aborting the team.
//
// All ranks must call the same collectives in the same order with matching
// arguments; a mismatch is detected where the schedule sizes disagree, and any
// wait longer than the team's timeout raises TimeoutError naming the peer.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/reduce_op.hpp"
#include "internode/cost_model.hpp"
#include "topology/plan.hpp"

namespace copse {

struct TeamOptions {
  std::vector<NodeSpec> nodes;             // empty: one node, this machine (hwloc), `ranks` ranks
  int ranks = 2;                           // used when `nodes` is empty
  Grouping grouping;                       // default: auto, groups of at most 4
  bool multi_leader = false;
  std::string allreduce = "dual-root";     // inter-node algorithms among the off-node ranks
  std::string reduce = "binary-tree";
  std::string bcast = "binary-tree";
  std::string barrier = "dual-root";        // a one-element allreduce of zero-byte elements
  std::string allgather = "binary-tree";    // these two need a tree algorithm (binomial, binary-tree)
  std::string reduce_scatter = "binary-tree";
  int blocks = 0;                          // 0: autotuned per shape with the cost model
  CostModel model;                         // virtual time (and block autotuning)
  std::chrono::milliseconds wait_timeout{60000};
};

class Comm;

class Team {
 public:
  explicit Team(TeamOptions options);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const;
  const HierarchyPlan& plan() const;
  Comm& comm(int rank);  // the calling thread must act as this rank

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
