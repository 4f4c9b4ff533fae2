#pragma once
// How one rank's transfers travel. The step executor
// (exec/step_executor.hpp) runs a rank's schedule with the step
// semantics of schedule.hpp; every transfer goes over a Link that the rank
// map chooses for the pair: the node's shared-memory link
// (transport/link_engine.hpp) between ranks that share memory -- threads of
// one process, processes of one node -- and a network link (MPI,
// transport/mpi_link.hpp) between the others. A schedule never knows which.
//
// Every link has the same non-blocking semantics, at most one send and one
// receive in flight per rank:
//   start_send  the region [data, data + count elements) is sent as it is
//               now; the rank leaves it unchanged until test_send says done.
//   start_recv  `count` elements land in `target` when test_recv says done:
//               copied (Combine::replace) or combined by the rank's operator,
//               received ⊙ held (left) or held ⊙ received (right) -- the
//               latter only on a link that combines_in_place(); the
//               executor lands the others' combining receives in the rank's
//               scratch (replace) and combines them itself.
//   test_*      true once done; then c.send_end / c.recv_end hold the
//               transfer's end on the virtual clock (0 without one).
//   block       sleeps until this rank's pending send (or receive) on this
//               link may have progressed. Links that cannot sleep (a network
//               request must be polled to progress) say so in can_block(),
//               and the executor polls them instead.
//   withdraw    after a failure: take back whatever is posted; once it
//               returns, no peer touches the rank's buffers any more.
// Matching is by (source, destination) pair in program order.
//
// What the executor runs under (clock, waits, peer liveness, failure) is its
// own configuration (ExecutorConfig, below), not a link's: an MPI-only rank
// runs with no shared-memory link at all.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"

namespace copse {

// How long a rank's waits may last and what they say meanwhile.
struct WaitSettings {
  // A wait longer than this fails with TimeoutError naming peer and step;
  // none: a rank waits as long as its peer takes (an application's ranks may
  // legitimately arrive far apart), and says whom it waits for every
  // `report_every` (if non-zero) through on_report.
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds report_every{0};
  std::function<void(const std::string&)> on_report;
  const char* round_name = "repetition";  // what one run of a rank's steps is called in messages
};

// Waits named `round_name` in messages, failing after `timeout` (if set),
// reporting every `report_every` (if non-zero) through `on_report`.
WaitSettings wait_settings(std::optional<std::chrono::milliseconds> timeout, const char* round_name,
                           std::chrono::milliseconds report_every = {},
                           std::function<void(const std::string&)> on_report = {});

// What the step executor (exec/step_executor.hpp) runs under, whatever
// links it drives; every rank of one run shares it. The shared-memory link
// keeps a copy too: its acknowledgements carry virtual-clock ends, its
// barrier follows the waits, and its failures go to the same sink.
struct ExecutorConfig {
  RankMap layout;  // the ranks (layout.ranks()), their nodes and processes
  // Keep every rank's virtual clock (the emulator, the thread Team) under
  // `model` (level 0: same node, level 1: other node): each transfer's end
  // time travels with its ack. Real runs switch it off and pay nothing for it.
  bool virtual_clock = true;
  CostModel model;
  WaitSettings waits;
  // Whether `peer` can still answer: "" while it can, else why not (e.g.
  // "process 2 (pid 4711) has died"). A waiting rank asks it about the peers
  // it waits for at least every kWaitSleepSlice and fails with a SystemError
  // naming the peer when the answer is not empty. Unset: peers never die
  // (threads of one process).
  std::function<std::string(int peer)> peer_gone;
  // Called by a rank that fails (not by those merely aborted), before it
  // aborts the run, so that every rank woken by the abort can find the
  // error. May be called more than once, from several ranks: keep the first.
  std::function<void(std::exception_ptr)> on_failure;
};

// The one way every caller assembles an ExecutorConfig: a virtual clock
// under `clock` when given (else none), the waits, and optionally the
// failure sink and the peers' liveness.
ExecutorConfig executor_config(RankMap layout, std::optional<CostModel> clock, WaitSettings waits,
                               std::function<void(std::exception_ptr)> on_failure = {},
                               std::function<std::string(int)> peer_gone = {});

class Link;

// A rank's private side of a run: its clock, its links' common bookkeeping
// and where it is. Lives with the rank (thread stack, Comm), never in shared
// memory. What one transport alone needs per rank it keeps itself (the
// shared-memory link's stage and doorbell: LinkEngine's per-rank state).
struct LinkRank {
  int rank = 0;
  RankClock clock;
  std::int64_t round = 0;     // which run of the rank's steps (repetition, call)
  std::string_view activity;  // optional, e.g. "allreduce": "step 3 of call 2 (allreduce)"
  // Set by the runtime for each run: the fewest bytes a send of this run
  // takes by cross-memory attach where the link has it (LinkConfig::
  // cross_memory_attach); 0: the link's own bound (its attach_from_bytes).
  std::uint64_t attach_from = 0;

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
  Picos send_end = 0, recv_end = 0;
  // What every link's start_send / start_recv records first.
  void begin_send(const Transfer& t) {
    sending = t;
    send_done = false;
    send_end = 0;
  }
  void begin_recv(const Transfer& t, std::byte* target, Combine side) {
    receiving = t;
    recv_target = target;
    recv_side = side;
    recv_done = false;
    recv_end = 0;
  }
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
  // Whether start_recv may be asked to combine into its target (the
  // shared-memory link moves the data itself and combines as it copies). A
  // link that cannot (MPI: a message must land somewhere before anyone can
  // combine it) is only ever asked to replace: the executor stages its
  // combining receives, and compile_steps sizes the scratch for them. One
  // staging layer, the executor's, for every link.
  virtual bool combines_in_place() const = 0;
  // Blocks on the pending send (what == ack) or receive (what == recv) under `policy`.
  virtual void block(LinkRank& c, LinkRank::Wait what, const WaitPolicy& policy) = 0;
  virtual void withdraw(LinkRank& c) noexcept = 0;
  // What `peer` is doing, for messages about a wait ("; rank 3 is in its
  // step 2"), or "" when this link cannot tell.
  virtual std::string peer_state(const LinkRank& c, int peer) const = 0;
  // The rank a wait for the pending receive (what == recv) or send (ack)
  // depends on: its peer, unless the link queues the transfer behind another
  // one (the shared-memory link's stage).
  virtual int awaited(const LinkRank& c, LinkRank::Wait what) const {
    return what == LinkRank::Wait::recv ? c.receiving.peer : c.sending.peer;
  }
};

// Applies a received region: copied for Combine::replace, else combined by
// the rank's operator. Nothing for zero elements or zero-byte elements.
void apply_received(const LinkRank& c, std::byte* dst, const std::byte* src, std::uint64_t count, Combine side);

}  // namespace copse
