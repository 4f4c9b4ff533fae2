#pragma once
// The one executor of schedule.hpp's step semantics on real data. For each
// step of a rank's schedule it starts the step's send and receive, each over
// the link the rank map chooses for the pair (common/link.hpp): the node's
// shared-memory link (LinkEngine) between ranks that share memory, the rank's
// remote link (MPI) to the others -- so one step may receive from a node peer
// through shared memory while it sends off-node over MPI, which is what lets
// a combined tree pipeline across the levels. Then it waits for both, stages
// the receive (lands it in the rank's scratch and applies it afterwards)
// when the step's send still needs the region (the send transmits the region
// as it was when the step began) or when it combines over a link that cannot
// combine in place (Link::combines_in_place: the MPI link) -- the one
// staging layer, whatever the links -- applies the local copy and advances the virtual clock (when the engine keeps
// one: the emulator's virtual times equal the simulator's; real runs pay nothing).
//
// Waiting: while only shared-memory transfers are pending the rank spins
// briefly, then sleeps on the link's futex word; while a network request is
// open it never sleeps on a futex alone but polls it, yielding the core
// between polls, so that MPI keeps progressing. Every wait follows the
// executor's deadline and report settings (ExecutorConfig::waits), and at
// least every kWaitSleepSlice asks ExecutorConfig::peer_gone whether the peers it waits for
// can still answer (a process of the node that died fails the wait).
//
// Failure: on any error (timeout, size mismatch, a throwing operator,
// another rank's abort) the error goes to ExecutorConfig::on_failure and the
// shared-memory engine (if any) is aborted, the rank's posted transfers are
// withdrawn -- once run() returns, no other rank touches its buffers -- and
// the error propagates (LinkAborted for another rank's failure).

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "common/link.hpp"
#include "transport/link_engine.hpp"

namespace copse {

// y's first contents, when they are another buffer's (an out-of-place
// collective's input). Rather than the caller copying all of it into y
// first, the run sends straight from `data` what y has not written yet and
// copies a region into y only when a receive combines into it; a region a
// receive replaces is never copied. At return y holds what it would have
// held had it started as a copy of `data`. Say T = 2 ranks allreduce by
// halves: each sends the half it gives away from `data`, copies only the
// half it keeps before reducing into it, and receives the other half whole
// -- half a copy where the up-front copy was a whole one. `data` must be
// memory the links can send from (any memory for thread ranks and for
// staged sends, LinkConfig::staged_sends), and must not overlap y.
// `result_read` false says the caller discards y (a reduce's non-root works
// in private memory): the regions no step wrote are then not copied in at
// the end -- a leaf of the reduction tree, which only sends, copies nothing.
struct RunInput {
  const std::byte* data = nullptr;  // none: y holds the input already
  std::uint64_t count = 0;          // elements
  bool result_read = true;
};

// The events a run records (algorithms/timeline.hpp).
struct TimelineEvent;
using Timeline = std::vector<TimelineEvent>;

// A run in progress (StepExecutor::start, then advance until it says done):
// where the rank is in its steps, so that a caller that must not block (a
// nonblocking collective, progressed from MPI_Test) can post a step's
// transfers, come back later to test them, and go on. Owned by the caller,
// private to the rank, like its LinkRank; it holds no memory of its own.
struct StepRun {
  std::span<const Step> steps;
  std::byte* y = nullptr;
  std::byte* scratch = nullptr;
  Timeline* timeline = nullptr;
  RunInput input;
  std::size_t next = 0;  // the step in progress
  // Within it: its transfers go in one part (both at once where the ports
  // allow) or two (one port: send or receive first); `posted` while the
  // part's transfers are in flight.
  std::uint8_t part = 0;
  bool begun = false, posted = false;
  bool active = false;  // started and neither done nor failed
  bool send_first = false, staged = false;
  Link* out = nullptr;  // the step's links
  Link* in = nullptr;
  // The timeline's notes of the transfers in flight (ready times, wall clock).
  Picos send_ready = 0, recv_ready = 0;
  std::int64_t send_wall = 0, recv_wall = 0, work_wall = 0;
};

class StepExecutor {
 public:
  // Runs under `config` over the shared-memory link `local` (to ranks that
  // share memory with the running one) and the rank's `remote` link (to the
  // others), either of which may be absent (a transfer that needs it is a
  // ScheduleError). All three outlive the executor.
  StepExecutor(const ExecutorConfig& config, LinkEngine* local, Link* remote = nullptr)
      : local_(local), remote_(remote), config_(config) {}
  // Over `local` and under its settings.
  explicit StepExecutor(LinkEngine& local, Link* remote = nullptr) : StepExecutor(local.settings(), &local, remote) {}

  // Runs `steps` (a compile_steps result) for rank `c.rank` on the working
  // buffer `y` with `scratch` (room for the staging elements compile_steps
  // reported, compiled with these links' combines_in_place), elements of op.element_bytes bytes combined by op.combine
  // (never called for Combine::replace or zero-byte elements). Drives
  // c.clock from its current state (reset it for a fresh start). Publishes
  // c.round and the step for other ranks' error messages.
  // With a `timeline` (and the virtual clock on) it appends the rank's sends,
  // receives and local work, in virtual time by the simulator's rule
  // (algorithms/timeline.hpp) and in wall time from post to completion; this
  // rank's vector only, so recording takes no lock. With an `input`, y
  // starts as that (see RunInput) rather than as it is.
  // start() and advance(wait = true): the one code path.
  void run(LinkRank& c, std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op,
           Timeline* timeline = nullptr, RunInput input = {});

  // The same run in parts: start() sets `run` up (and waits for nothing);
  // each advance() goes as far as it can -- posting a step's transfers,
  // testing them, applying the step, the next -- and returns true once the
  // run is over. With `wait` it waits for the transfers as run() does
  // (returning true); without, it returns false as soon as a posted
  // transfer is not yet done. Failures are run()'s: the run is over, the
  // rank's transfers withdrawn, the error thrown. Virtual times and the
  // timeline are the same whichever way the run is advanced. The executor,
  // `c`, `steps`, the buffers and `op` must outlive the run.
  void start(StepRun& run, LinkRank& c, std::span<const Step> steps, std::byte* y, std::byte* scratch,
             const ReduceOp& op, Timeline* timeline = nullptr, RunInput input = {});
  bool advance(StepRun& run, LinkRank& c, bool wait);

  // Whether `rank`'s receives from `peer` travel over a link that combines in
  // place (true when there is no such link: the run fails there anyway).
  // What compile_steps needs (CombinesInPlace) to size the scratch for
  // the receives run() stages.
  bool combines_in_place(int rank, int peer) const;

 private:
  Link* link_between(int rank, int peer) const;  // null: none
  Link& link_to(const LinkRank& c, int peer) const;
  // Waits until the started send (on `send`, if any) and receive (on `recv`,
  // if any) are both done.
  void finish(LinkRank& c, Link* send, Link* recv);
  void poll_wait(LinkRank& c, Link* send, Link* recv);
  WaitPolicy policy(LinkRank& c, Deadline deadline) const;
  void withdraw(LinkRank& c) noexcept;
  // After a failure here: on_failure, then the shared-memory engine's abort.
  void fail(std::exception_ptr error) noexcept;
  bool aborted() const { return local_ && local_->aborted(); }
  void note_wait(LinkRank& c, LinkRank::Wait what) const;
  // The peer a wait for the pending receive (or send) depends on.
  int waited_for(const LinkRank& c, LinkRank::Wait what) const;
  // Throws SystemError naming the peer of the pending receive (or send) when
  // ExecutorConfig::peer_gone says it can no longer answer.
  void check_peer(LinkRank& c, LinkRank::Wait what) const;
  std::string describe_wait(const LinkRank& c, const Link& link, std::string_view how) const;
  // advance()'s body, outside its failure handling.
  bool step_on(StepRun& run, LinkRank& c, bool wait);
  void begin_step(StepRun& run, LinkRank& c);
  void end_step(StepRun& run, LinkRank& c);
  // Without a clock the port model does not matter: both operations of a
  // step always run at once.
  bool bidirectional() const { return !config_.virtual_clock || config_.model.ports() == Ports::bidirectional; }

  LinkEngine* local_;
  Link* remote_;
  const ExecutorConfig& config_;
};

}  // namespace copse
