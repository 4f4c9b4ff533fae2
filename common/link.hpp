#pragma once
// How one rank's transfers travel. The step executor
// (intranode/step_executor.hpp) runs a rank's schedule with the step
// semantics of schedule.hpp; every transfer goes over a Link that the rank
// map chooses for the pair: the node's shared-memory link
// (intranode/link_engine.hpp) between ranks that share memory -- threads of
// one process, processes of one node -- and a network link (MPI,
// internode/mpi_link.hpp) between the others. A schedule never knows which.
//
// Every link has the same non-blocking semantics, at most one send and one
// receive in flight per rank:
//   start_send  the region [data, data + count elements) is sent as it is
//               now; the rank leaves it unchanged until test_send says done.
//   start_recv  `count` elements land in `target` when test_recv says done:
//               copied (Combine::replace) or combined by the rank's operator,
//               received ⊙ held (left) or held ⊙ received (right).
//   test_*      true once done; then c.send_end / c.recv_end hold the
//               transfer's end on the virtual clock (0 without one).
//   block       sleeps until this rank's pending send (or receive) on this
//               link may have progressed. Links that cannot sleep (a network
//               request must be polled to progress) say so in can_block(),
//               and the executor polls them instead.
//   withdraw    after a failure: take back whatever is posted; once it
//               returns, no peer touches the rank's buffers any more.
// Matching is by (source, destination) pair in program order.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cost_model.hpp"
#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"

namespace copse {

class Link;

// A rank's private side of the engine: its clock, its links' bookkeeping and
// where it is. Lives with the rank (thread stack, Comm), never in shared memory.
struct LinkRank {
  int rank = 0;
  RankClock clock;
  std::int64_t round = 0;     // which run of the rank's steps (repetition, call)
  std::string_view activity;  // optional, e.g. "allreduce": "step 3 of call 2 (allreduce)"
  Link* remote = nullptr;     // the link to ranks it shares no memory with (MPI), if any

  // Set by the executor: the run in progress and where it is.
  std::byte* y = nullptr;
  std::byte* scratch = nullptr;
  const ReduceOp* op = nullptr;
  std::size_t eb = 0;
  std::uint64_t step = 0;
  enum class Wait : std::uint8_t { none, recv, ack, barrier } waiting = Wait::none;
  int peer = -1;
  std::uint64_t wait_count = 0, wait_offset = 0;
  std::chrono::steady_clock::time_point wait_started;

  // The transfers in flight, as the links keep them.
  Transfer sending, receiving;
  std::byte* recv_target = nullptr;
  Combine recv_side = Combine::replace;
  bool send_done = true, recv_done = true;
  bool send_posted = true;  // shared-memory link: false while a send waits for the outbox to be free
  Picos send_end = 0, recv_end = 0;
  std::uint32_t recv_bell = 0;  // shared-memory link: the doorbell value last seen
  // Shared-memory link: where this rank's eager sends are copied for their
  // receivers to pull (in the arena) -- with staged sends
  // (LinkConfig::staged_sends) every send, else, without a virtual clock,
  // those that fit -- its size, and the send waiting to be copied there.
  std::byte* stage = nullptr;
  std::size_t stage_bytes = 0;
  const std::byte* send_data = nullptr;
  int staged_to = -1;  // the addressee of the send last posted from the stage (a wait for the stage waits for it)
  // The executor's: the element ranges [begin, end) of y that still hold
  // only the run's input (StepExecutor's RunInput), kept here so that a
  // repeated run reuses the vector's room.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> unwritten;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual void start_send(LinkRank& c, const Transfer& send, const std::byte* data) = 0;
  virtual bool test_send(LinkRank& c) = 0;
  virtual void start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) = 0;
  virtual bool test_recv(LinkRank& c) = 0;
  virtual bool can_block() const = 0;
  // Blocks on the pending send (what == ack) or receive (what == recv) under `policy`.
  virtual void block(LinkRank& c, LinkRank::Wait what, const WaitPolicy& policy) = 0;
  virtual void withdraw(LinkRank& c) noexcept = 0;
  // What `peer` is doing, for messages about a wait ("; rank 3 is in its
  // step 2"), or "" when this link cannot tell.
  virtual std::string peer_state(const LinkRank& c, int peer) const = 0;
};

// Applies a received region: copied for Combine::replace, else combined by
// the rank's operator. Nothing for zero elements or zero-byte elements.
void apply_received(const LinkRank& c, std::byte* dst, const std::byte* src, std::uint64_t count, Combine side);

}  // namespace copse
