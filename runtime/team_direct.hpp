#pragma once
// A team rank's side of the direct shared-memory reduce
// (transport/direct_reduce.hpp; its broadcast, allgather and reduce-scatter
// beside it), written once for the thread Team
// (runtime/comm.hpp) and the MPI Team (runtime/mpi_comm.hpp): its call count, its
// wait policy -- made once, so that a call allocates nothing -- and one call
// run the way the link engine runs a schedule: published for peers' wait
// messages, worded as the engine's waits ("rank 3, direct reduce of call 7
// (allreduce): timed out after 200 ms waiting for rank 0 to post its
// vector; rank 0 has not started its schedule"), ended by the engine's
// abort or the death of the peer's process (LinkConfig::peer_gone).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/link.hpp"
#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"
#include "runtime/team_wait.hpp"
#include "transport/direct_gather.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/direct_vector.hpp"
#include "transport/link_engine.hpp"

namespace copse {

class TeamDirectReduce {
 public:
  // For the rank of `link` (its index among `reducer`'s ranks is its rank:
  // the team is one node). The arguments must outlive this object.
  TeamDirectReduce(LinkEngine& engine, DirectReduce& reducer, LinkRank& link,
                   std::optional<std::chrono::milliseconds> timeout, std::chrono::milliseconds report_every,
                   WaitReporter report);
  TeamDirectReduce(const TeamDirectReduce&) = delete;
  TeamDirectReduce& operator=(const TeamDirectReduce&) = delete;

  // One call of collective `c` (allreduce; barrier without an operator), as
  // the run numbered link.round (the caller sets it); `sliced`: an
  // allreduce through DirectReduce::allreduce_sliced (threads only). A
  // failure here fails the engine, unless it is aborted already, and
  // propagates.
  void run(Collective c, const void* send, void* recv, std::size_t count, const ReduceOp* op, bool sliced = false);
  // One broadcast of `bytes` from `root` through the direct reduce's ring
  // (DirectReduce::bcast), as run() runs a reduction.
  void bcast(void* buffer, std::size_t bytes, int root);
  // An allgather and a reduce-scatter through the direct reduce's slots
  // (transport/direct_gather.hpp), as run() runs a reduction; `by_address`:
  // each reads the peers' blocks where they lie (direct_allgather_by_address,
  // direct_reduce_scatter_by_address).
  void allgather(const void* mine, void* recv, std::size_t count, std::size_t element_bytes, bool by_address = false);
  void reduce_scatter(const void* send, void* recv, std::size_t total, std::size_t from, std::size_t count,
                      const ReduceOp& op, bool by_address = false);
  // A reduce to `root` through the same slots, or `by_address`
  // (direct_reduce_by_address).
  void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root, bool by_address = false);
  // A scatter, gather or alltoall (`c`; `root` ignored by alltoall) of
  // blocks of `count` elements through the same slots (direct_scatter and
  // its neighbours), or `by_address` (direct_scatter_by_address ...); in
  // place as Comm's (runtime/communicator.hpp): an alltoall in place (send
  // == recv) by address shares a copy of its blocks.
  void move(Collective c, const void* send, void* recv, std::size_t count, std::size_t element_bytes, int root,
            bool by_address);
  // A v-variant of `c` by address (direct_vector_by_address's arguments);
  // an alltoall in place (input == recv) shares a copy of recv's blocks.
  void vector(Collective c, int root, const void* input, VectorLayout sent, void* recv, VectorLayout received);
  // A call through the slots that must not wait when it starts (a
  // nonblocking or persistent one; transport/direct_gather.hpp's SlotCall):
  // start() posts this rank's part and returns the call's number --
  // without `wait`, none while a one-sided call before it is not settled
  // (DirectReduce::ready_to_post); finish() completes it once the posts it
  // reads are in (with `wait`: waiting for them) and says whether it did.
  // Failures as run()'s.
  std::optional<std::uint32_t> start(const SlotCall& c, bool wait);
  bool finish(std::uint32_t call, const SlotCall& c, bool wait);

 private:
  // Runs body() as call link.round of collective `c`: published, under the
  // wait policy, failures failing the engine.
  template <class Body>
  void guarded(Collective c, Body&& body);
  // A call of `c` begun: published for peers' wait messages.
  void begin(Collective c);
  // The wait policy's deadline from now (with a timeout).
  void arm_deadline();
  // body(), a failure failing the engine (unless it is aborted already) and propagating.
  template <class Body>
  decltype(auto) failing(Body&& body);

  LinkEngine& engine_;
  DirectReduce& reducer_;
  LinkRank& link_;
  std::optional<std::chrono::milliseconds> timeout_;
  DirectRank direct_;
  WaitPolicy policy_;
  // An alltoall in place by address: the first `bytes` of recv, its blocks
  // to send, copied into bounce_ for the peers to read, since this rank
  // overwrites them in recv as they read.
  const std::byte* blocks_to_share(const std::byte* recv, std::size_t bytes);

  // A chunk of a reduce's or reduce-scatter's reads by address: within the
  // L2 cache with its sum.
  static constexpr std::size_t kChunkBytes = 128 << 10;
  // The bounce's first two chunks of elements of `element_bytes`, for a
  // fold by address (direct_gather.hpp), with `after` bytes more beyond them.
  std::span<std::byte> fold_chunks(std::size_t element_bytes, std::size_t after = 0);
  // The chunks of a reduce or reduce-scatter by address (and after them an
  // in-place reduce-scatter's result), or an alltoall's blocks to send in
  // place, made at the first (kept: a call of that size allocates nothing
  // after it).
  std::vector<std::byte> bounce_;
};

}  // namespace copse
