#pragma once
// One rank's communicator, the same C++ API for both runtimes: a thread
// Team's ranks (copse::Team, runtime/comm.hpp) and an MPI Team's
// (copse::mpi::Team, runtime/mpi_comm.hpp; copse::mpi::Comm is this type)
// -- declared once, so that the two agree (same names, same signatures)
// and code is written once for both. Implemented once, over the runtime core
// (runtime/rank_core.hpp): the accessors are the core's, and each collective
// goes to the core's runtime (its buffers, its plans' agreement, its links).
//
// Every collective takes the same arguments on every rank, in the same
// order. In place: pass the same pointer as send and receive buffer
// (allreduce; reduce at the root; allgather, whose contribution is then
// already at recv + rank * count; reduce_scatter_block and reduce_scatter,
// whose whole input is then in recv and whose result goes to its front;
// scatter at the root, whose block then stays in send; gather at the root,
// whose block is then already at recv + root * count; alltoall, whose
// blocks to send are then in recv and are replaced by those received).

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/cost_model.hpp"
#include "common/reduce_op.hpp"
#include "runtime/request.hpp"

namespace copse {

class RankCore;
class VectorDeferral;  // runtime/pending.hpp

class Comm {
 public:
  int rank() const;  // this rank's number among size()
  int size() const;

  void allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  // recv is used at the root only.
  void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root);
  void bcast(void* buffer, std::size_t count, DType dtype, int root);
  void barrier();
  // recv holds size() * count elements, rank r's contribution at r * count.
  void allgather(const void* send, void* recv, std::size_t count, DType dtype);
  // send holds size() * count elements; recv gets this rank's reduced block of count.
  void reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  // Blocks of different sizes: rank r gets counts[r] elements (size() counts,
  // none negative), send holds the blocks one after another. Runs as
  // reduce_scatter_block over blocks of the largest count, the others padded.
  void reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op);
  // The data-movement collectives (flat schedules, issue 19). Scatter: send,
  // at the root only, holds size() * count elements, rank r's block at
  // r * count; recv gets this rank's count.
  void scatter(const void* send, void* recv, std::size_t count, DType dtype, int root);
  // Gather: send holds this rank's count elements; recv, at the root only,
  // gets size() * count, rank r's at r * count.
  void gather(const void* send, void* recv, std::size_t count, DType dtype, int root);
  // Alltoall: send holds size() * count elements, the block for rank d at
  // d * count; recv gets size() * count, the block from rank s at s * count.
  void alltoall(const void* send, void* recv, std::size_t count, DType dtype);
  // The v-variants (issue 19), shaped as MPI's: blocks of unequal counts
  // (none negative, zeros allowed) at displacements in elements (null: packed
  // in rank order). Served through the equal-block collectives above over
  // blocks of the largest count (runtime/vector_collectives.cpp), which
  // gatherv, scatterv and alltoallv first agree on in one small allreduce.
  // Allgatherv: rank r's counts[r] elements go to recv + displs[r]
  // everywhere; in place (send == recv), they are already there.
  void allgatherv(const void* send, void* recv, const int* counts, const int* displs, DType dtype);
  // Gatherv: this rank's `count` elements to the root's recv + displs[r];
  // counts and displs are read at the root only. In place at the root: its
  // block is already at recv + displs[root].
  void gatherv(const void* send, std::size_t count, void* recv, const int* counts, const int* displs, DType dtype,
               int root);
  // Scatterv: the root's counts[r] elements at send + displs[r] to rank r's
  // recv (`count` elements); counts and displs are read at the root only.
  // In place at the root: its block stays in send.
  void scatterv(const void* send, const int* counts, const int* displs, void* recv, std::size_t count, DType dtype,
                int root);
  // Alltoallv: send_counts[d] elements at send + send_displs[d] to rank d,
  // recv_counts[s] from rank s to recv + recv_displs[s]. In place (send ==
  // recv): the blocks to send are recv's, by the receive counts and displacements.
  void alltoallv(const void* send, const int* send_counts, const int* send_displs, void* recv, const int* recv_counts,
                 const int* recv_displs, DType dtype);

  // This rank's virtual clock after its last collective (the thread Team's
  // TeamOptions::virtual_clock; 0 without a virtual clock, and after a
  // collective served by the direct reduce).
  Picos virtual_time() const;
  // Calls in this rank's plan cache (an MPI Comm's: at most
  // CommOptions::plan_cache).
  std::size_t cached_plans() const;
  // The hierarchy form of this rank's calls from now on (none: the team's
  // configured one), for the collectives that take one; every rank of the
  // team sets the same before a call. Lanes on nodes of unequal size keep
  // the configured form. The interposer sets a decision-table row's form
  // (config/decision_table.hpp) before each call it serves.
  void set_form(std::optional<Form> form);
  // Likewise the pipeline block count of this rank's calls from now on (0:
  // the team's configured collectives.blocks); a count above what a call's
  // vector holds plans as many blocks as it can. The interposer sets a
  // row's `blocks` so. UsageError for a negative count.
  void set_blocks(int blocks);

  // Progress report for the next allreduce (Proficz 2018, §3): this rank has
  // done `fraction` (in (0, 1]) of its computation phase -- the time since
  // its previous collective returned. With an arrival-aware allreduce
  // ("slt" or "prr"), the first edge() of a phase publishes this rank's
  // predicted arrival; after the warm-up (ArrivalOptions::warmup
  // allreduces, run with the team's default algorithm), each allreduce waits
  // until every rank has published (a rank that made no edge() publishes
  // its arrival) and is planned in predicted order, the latest last. Cheap
  // and harmless with other algorithms (it only feeds the estimator). Never
  // blocks. See plan/arrival_monitor.hpp; each runtime says how the
  // predictions travel.
  void edge(double fraction);
  // The predictions (picoseconds after the earliest, in rank order) this
  // rank's last allreduce was planned from; empty if it was not planned by
  // arrival.
  const std::vector<Picos>& planned_arrival() const;

  // Nonblocking (issue 19): each starts its collective and returns at once,
  // waiting for no other rank; Request::test progresses it, Request::wait
  // finishes it. Arguments as the blocking call's; the buffers (and `op`)
  // must stay until it is done. Several may be outstanding: they complete
  // in the order started, and a blocking collective first completes them.
  // No direct shared-memory path serves them (runtime/pending.hpp).
  Request iallreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  Request ireduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root);
  Request ibcast(void* buffer, std::size_t count, DType dtype, int root);
  Request ibarrier();
  Request iallgather(const void* send, void* recv, std::size_t count, DType dtype);
  Request ireduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  Request ireduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op);
  Request iscatter(const void* send, void* recv, std::size_t count, DType dtype, int root);
  Request igather(const void* send, void* recv, std::size_t count, DType dtype, int root);
  Request ialltoall(const void* send, void* recv, std::size_t count, DType dtype);
  // The v-variants, the MPI Comm's only for now: first an agreement on the
  // largest count (an allreduce progressed as the call), then the
  // equal-block call over padded blocks. `deferral` (the MPI interposer's)
  // may give the call to another once every rank's part is known.
  Request iallgatherv(const void* send, void* recv, const int* counts, const int* displs, DType dtype,
                      std::shared_ptr<VectorDeferral> deferral = {});
  Request igatherv(const void* send, std::size_t count, void* recv, const int* counts, const int* displs, DType dtype,
                   int root, std::shared_ptr<VectorDeferral> deferral = {});
  Request iscatterv(const void* send, const int* counts, const int* displs, void* recv, std::size_t count, DType dtype,
                    int root, std::shared_ptr<VectorDeferral> deferral = {});
  Request ialltoallv(const void* send, const int* send_counts, const int* send_displs, void* recv,
                     const int* recv_counts, const int* recv_displs, DType dtype,
                     std::shared_ptr<VectorDeferral> deferral = {});
  // Persistent: planned now (every rank calls it, in the same order as its
  // collectives), run by each Request::start, which plans and allocates nothing.
  Request allreduce_init(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  Request reduce_init(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root);
  Request bcast_init(void* buffer, std::size_t count, DType dtype, int root);
  Request barrier_init();
  Request allgather_init(const void* send, void* recv, std::size_t count, DType dtype);
  Request reduce_scatter_block_init(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  Request reduce_scatter_init(const void* send, void* recv, const int* counts, const ReduceOp& op);
  Request scatter_init(const void* send, void* recv, std::size_t count, DType dtype, int root);
  Request gather_init(const void* send, void* recv, std::size_t count, DType dtype, int root);
  Request alltoall_init(const void* send, void* recv, std::size_t count, DType dtype);
  // The v-variants' (the MPI Comm's): the largest count agreed now, waiting
  // for every rank, as the plans are.
  Request allgatherv_init(const void* send, void* recv, const int* counts, const int* displs, DType dtype);
  Request gatherv_init(const void* send, std::size_t count, void* recv, const int* counts, const int* displs,
                       DType dtype, int root);
  Request scatterv_init(const void* send, const int* counts, const int* displs, void* recv, std::size_t count,
                        DType dtype, int root);
  Request alltoallv_init(const void* send, const int* send_counts, const int* send_displs, void* recv,
                         const int* recv_counts, const int* recv_displs, DType dtype);
  // Waits until every outstanding nonblocking call of this rank is done.
  void wait_outstanding();
  // Progresses them without waiting; true once none is left.
  bool test_outstanding();

  // Made by a Team (a RankCore is a runtime's, private to it).
  explicit Comm(std::unique_ptr<RankCore> core);
  Comm(Comm&&) noexcept;
  Comm& operator=(Comm&&) noexcept;
  ~Comm();

 private:
  std::unique_ptr<RankCore> core_;
  RankCore& ready();  // the core, its outstanding nonblocking calls done
};

}  // namespace copse
