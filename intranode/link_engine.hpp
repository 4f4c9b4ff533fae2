#pragma once
// The link engine: executes one rank's schedule over single-copy rendezvous
// links whose state lives in a node arena (intranode/arena.hpp).
//
// The same code serves
//   (a) the emulator's rank threads (node/emulator.cpp, over a HeapArena),
//   (b) user threads calling Comm (node/comm.cpp, over a HeapArena), and
//   (c) ranks that are processes mapping one ShmArena (the MPI work; see
//       tests/test_arena_processes.cpp).
//
// A link is a rendezvous, and whichever side arrives second moves the data,
// in one copy straight between the two ranks' working buffers (combining
// into the receiver's buffer, or staging through the receiver's scratch when
// the step's own send still needs the region). Acks carry the transfer's end
// time, which feeds each rank's RankClock exactly as the simulator does, so
// virtual times equal the simulator's. Every wait has a deadline; a timeout
// raises TimeoutError naming the rank, the step, the peer and what the peer
// is doing. The first failure aborts the whole engine: every other rank's
// wait ends with LinkAborted.
//
// Buffers: a rank's working buffer and scratch must be reachable by an arena
// offset. For threads (HeapArena) that is any memory of the process, so the
// working buffer may be the user's own buffer (single copy, no staging). For
// processes (ShmArena) it must lie in the segment: the caller copies the
// input in and the result out.
//
// Layout in the arena (create_shared): a header (abort flag, barrier
// counter), then one outbox, one inbox and one progress record per rank, each
// on its own cache line(s).

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/cost_model.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"
#include "intranode/arena.hpp"

namespace copse {

struct LinkConfig {
  int ranks = 1;
  CostModel model;           // level 0: same node, level 1: other node
  int ranks_per_node = 1;    // link levels: consecutive ranks per node ...
  std::vector<int> node_of;  // ... or, if not empty, each rank's node
  bool name_nodes = false;   // timeout messages say "rank r (node n)"
  // A wait longer than this fails with TimeoutError naming peer and step;
  // none: a rank waits as long as its peer takes (an application's ranks may
  // legitimately arrive far apart), and says whom it waits for every
  // `report_every` (if non-zero) through on_wait_report.
  std::optional<std::chrono::milliseconds> wait_timeout;
  std::chrono::milliseconds report_every{0};
  std::function<void(const std::string&)> on_wait_report;
  const char* round_name = "repetition";  // what one run of a rank's steps is called in messages
  // Called by a rank that fails (not by those merely aborted), before it
  // aborts the engine, so that every rank woken by the abort can find the
  // error. May be called more than once, from several ranks: keep the first.
  std::function<void(std::exception_ptr)> on_failure;
};

// A rank's private side of the engine: its clock and where it is. Lives with
// the rank (thread stack, Comm), never in the arena.
struct LinkRank {
  int rank = 0;
  RankClock clock;
  std::int64_t round = 0;     // which run of the rank's steps (repetition, call)
  std::string_view activity;  // optional, e.g. "allreduce": "step 3 of call 2 (allreduce)"
  // Set by the engine.
  std::uint64_t step = 0;
  enum class Wait : std::uint8_t { none, recv, ack, barrier } waiting = Wait::none;
  int peer = -1;
  std::uint64_t wait_count = 0, wait_offset = 0;
  std::chrono::steady_clock::time_point wait_started;
  // The run in progress (set by run()).
  std::byte* y = nullptr;
  std::byte* scratch = nullptr;
  const ReduceOp* op = nullptr;
  std::size_t eb = 0;
};

// Materialises `rank`'s steps of `plan` into `out` (appending), checking every
// peer and region against p ranks and an `elements`-element vector. Returns
// the scratch elements the rank needs for staging (0 if no step's send and
// receive regions overlap). Throws ScheduleError naming rank, step and region.
std::uint64_t compile_steps(const SchedulePlan& plan, int rank, int ranks, std::uint64_t elements,
                            std::vector<Step>& out);

class LinkEngine {
 public:
  // Places and initialises the shared link state for `ranks` ranks in
  // `arena`; returns its offset (to hand to the other processes' engines).
  static Arena::Offset create_shared(Arena& arena, int ranks);

  // Attaches to shared state created by create_shared (in this process or,
  // for a ShmArena, in another one). The arena must outlive the engine.
  LinkEngine(Arena& arena, Arena::Offset shared, LinkConfig config);
  LinkEngine(const LinkEngine&) = delete;
  LinkEngine& operator=(const LinkEngine&) = delete;
  ~LinkEngine();

  const LinkConfig& config() const { return config_; }
  Arena& arena() const { return arena_; }

  // Runs `steps` (a compile_steps result) for rank `c.rank` on the working
  // buffer `y` with `scratch` (room for the staging elements compile_steps
  // reported), elements of op.element_bytes bytes combined by op.combine
  // (never called for Combine::replace or zero-byte elements). Drives
  // c.clock from its current state (reset it for a fresh start). Publishes
  // c.round and the step for other ranks' error messages.
  //
  // On any failure (timeout, size mismatch, a throwing operator, another
  // rank's abort) the engine is aborted, this rank's posted link words are
  // withdrawn -- once it returns, no other rank touches y or scratch any more
  // -- and the error propagates (LinkAborted for another rank's failure).
  void run(LinkRank& c, std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op);

  // A barrier among `participants` arrivals (ranks calling barrier(), plus
  // outside threads calling arrive()). Waits up to twice the timeout plus
  // 100 ms, so that a stuck step reports itself before the ranks that
  // finished give up on it.
  //
  // The barrier's word counts generations modulo 2^31 (next_generation), so
  // that its top bit only ever means "aborted", however many barriers pass.
  void barrier(LinkRank& c, std::uint32_t participants);
  void arrive(std::uint32_t participants);
  static std::uint32_t next_generation(std::uint32_t word);

  // Ends every rank's waits with LinkAborted (idempotent, never throws).
  void abort() noexcept;
  bool aborted() const;

 private:
  struct Outbox;
  struct Inbox;
  struct Progress;
  struct Shared;

  bool post(LinkRank& c, const Transfer& send, Picos& end);
  Picos await_ack(LinkRank& c, const Transfer& send);
  Picos receive(LinkRank& c, const Step& step, std::byte* target, Combine side);
  Picos pull(LinkRank& c, const Transfer& recv, Outbox& ob, std::byte* target, Combine side);
  void ring(Inbox& inbox);
  static void apply(const LinkRank& c, std::byte* dst, const std::byte* src, std::uint64_t count, Combine side);
  void fail(std::exception_ptr error) noexcept;
  void withdraw(LinkRank& c) noexcept;
  std::uint32_t block(LinkRank& c, const std::atomic<std::uint32_t>& word, std::uint32_t old, Deadline deadline);
  // "rank 3 (node 1), step 2 of call 5 (allreduce): HOW waiting for rank 0 to
  // send ...; rank 0 is in its step 1", HOW being e.g. "timed out after 500 ms".
  std::string describe_wait(const LinkRank& c, std::string_view how) const;
  std::chrono::milliseconds barrier_patience() const;
  std::string size_mismatch(int src, std::uint64_t sent, int dst, std::uint64_t received, std::uint64_t offset) const;
  Deadline deadline_from_now() const {
    return config_.wait_timeout ? std::chrono::steady_clock::now() + *config_.wait_timeout : Deadline::max();
  }
  int level(int a, int b) const { return link_level(a, b, config_.ranks_per_node, config_.node_of); }

  Arena& arena_;
  LinkConfig config_;
  FutexScope scope_;
  bool bidirectional_;
  Shared* shared_;
  Outbox* outbox_;
  Inbox* inbox_;
  Progress* progress_;
};

}  // namespace copse
