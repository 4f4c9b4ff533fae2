#pragma once
// The shared-memory link: single-copy rendezvous between ranks whose link
// state lives in one node arena (transport/arena.hpp) -- threads of one
// process over a HeapArena, processes of one node over a ShmArena. It is one
// of the links the step executor (exec/step_executor.hpp) drives; see
// common/link.hpp for the semantics every link shares.
//
// The same code serves
//   (a) the emulator's rank threads (emulator/emulator.cpp, over a HeapArena),
//   (b) user threads calling Comm (runtime/comm.cpp, over a HeapArena), and
//   (c) ranks that are processes mapping one ShmArena (the MPI layer; see
//       tests/test_arena_processes.cpp).
//
// A link is a rendezvous, and whichever side arrives second moves the data,
// in one copy straight between the two ranks' working buffers (combining
// into the receiver's buffer). With the virtual clock kept, acks carry the
// transfer's end time, which feeds each rank's RankClock exactly as the
// simulator does, so virtual times equal the simulator's. The first failure
// aborts the whole engine: every other rank's wait ends with LinkAborted.
//
// Buffers: a rank's working buffer and scratch must be reachable by an arena
// offset. For threads (HeapArena) that is any memory of the process, so the
// working buffer may be the user's own buffer (single copy, no staging).
// Processes (ShmArena) run with staged sends (LinkConfig::staged_sends): a
// send is copied into the sender's stage in the segment and pulled from
// there by its receiver, so working buffers stay private (the user's own);
// with cross-memory attach (LinkConfig::cross_memory_attach) large sends
// skip the stage, and their receiver reads them straight out of the
// sender's private buffer.
//
// Layout in the arena (create_shared): a header (abort flag, barrier
// counter), then kStageSlots outboxes, one inbox and one progress record per
// rank, each on its own cache line(s).

#include <algorithm>
#include <atomic>
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
#include "common/link.hpp"
#include "common/rank_map.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"
#include "transport/arena.hpp"

namespace copse {

// LinkConfig::attach_from_bytes when no send goes by cross-memory attach
// unless its run asks (LinkRank::attach_from).
constexpr std::size_t kNeverAttach = ~std::size_t{0};

// Whether every rank of a host can run at once on a core of its own: `ranks`
// of one engine, `ranks_on_host` of every engine on the host (0: those
// alone), `cores` that run at once. The engine's waits follow it, and so
// does the MPI team's use of cross-memory attach.
inline bool ranks_fit_cores(int ranks, int ranks_on_host, int cores) { return std::max(ranks, ranks_on_host) <= cores; }

// What only the shared-memory transport needs, beside the run's
// ExecutorConfig (common/link.hpp): which ranks its arena serves and how
// their sends travel.
struct LinkConfig {
  // The ranks whose link state this engine's arena holds, ascending -- in an
  // MPI run, the ranks of one node; empty: every rank of the layout. Each
  // member has a slot (its index here) in the shared state; create_shared
  // must have been called with members.size() (or layout.ranks()) ranks.
  std::vector<int> members;
  // Staged sends (processes of a node, without a virtual clock): a send is
  // copied into the sender's stage (LinkEngine::set_stage, in the arena) as
  // soon as the part of the stage it takes is free -- the stage holds
  // LinkEngine::kStageSlots posts at once, so a send waits only for the
  // receiver of the post that many sends back -- and is done then; the receiver
  // pulls it from there into any memory of its own. Working buffers and
  // scratch may then be private memory (the user's own buffers), and no
  // acknowledgement travels back. Otherwise (the default) a transfer is a
  // rendezvous straight between the two ranks' buffers, which must lie in
  // the arena.
  bool staged_sends = false;
  // Cross-memory attach (with staged sends; Linux): a send of at least
  // `attach_from_bytes` (or one larger than the sender's stage) is not
  // copied into the stage: the sender posts its buffer's own address, and its
  // receiver reads it straight out of the sender's process with
  // process_vm_readv -- one copy instead of two, and no stage bound on the
  // message size. Such a send is a rendezvous again: done once its receiver
  // has read it. Smaller sends stay eager through the stage. Whoever sets it
  // must know that every member's process may read every other's memory
  // (the MPI layer probes it once per team, runtime/mpi_comm.cpp); a read the
  // kernel refuses anyway fails the engine with a SystemError.
  // A run may set its own bound instead (LinkRank::attach_from): the MPI
  // team attaches only an allgather's sends where the kernel's read is
  // slow (runtime/mpi_team_state.hpp), with kNeverAttach here.
  bool cross_memory_attach = false;
  std::size_t attach_from_bytes = std::size_t{16} << 10;
  // With cross_memory_attach: whether the read beat the copies it would
  // replace -- timed at most 1.5 local copies, or faster than the direct
  // broadcast's ring (the MPI team's probe, runtime/mpi_team_state.hpp).
  // Only then do a node's processes read by address where those copies run
  // on both cores at once -- the direct broadcast
  // (transport/direct_bcast.hpp), the direct allgather and reduce
  // (runtime/rank_core.cpp); otherwise those stream through the slots and
  // the schedules.
  bool fast_attach = true;
  // Ranks running on this machine, of this engine and others (virtual nodes
  // of one host each have an engine): with more than its cores, waiting
  // processes poll, yielding the core, instead of spinning. 0: the engine's
  // own ranks.
  int ranks_on_host = 0;
  // How many of the host's ranks can run at once, each on a core of its
  // own, as the node's processes agreed from their affinity masks
  // (common/cores.hpp's concurrent_ranks; the MPI set-up exchanges them):
  // the same answer on every process, whatever its own mask. 0: this
  // process's own mask's cores.
  int concurrent_ranks = 0;
};

// Whether the link that carries `rank`'s receives from `peer` combines in
// place (Link::combines_in_place; StepExecutor::combines_in_place answers it
// for the executor's links).
using CombinesInPlace = std::function<bool(int peer)>;

// Materialises `rank`'s steps of `plan` into `out` (appending), checking every
// peer and region against p ranks and an `elements`-element vector. Returns
// the scratch elements the rank needs for staging: the largest receive the
// executor stages (stages_receive), 0 if none. `in_place` says which peers'
// links combine in place; unset: all of them (every link is the
// shared-memory one), so only receives that overlap their step's send are
// staged. Throws ScheduleError naming rank, step and region.
std::uint64_t compile_steps(const SchedulePlan& plan, int rank, int ranks, std::uint64_t elements,
                            std::vector<Step>& out, const CombinesInPlace& in_place = {});

// Reads `bytes` at `address` in process `pid` into `to` with
// process_vm_readv (Linux cross-memory attach), resuming after partial
// reads. Returns 0, or the errno of the read that failed (EFAULT for one that
// made no progress). Never throws.
int cross_memory_read(int pid, std::uint64_t address, void* to, std::size_t bytes) noexcept;

// Whether a step's send and receive regions overlap (its receive must then be
// staged: the send transmits the region as it was when the step began).
inline bool overlaps(const Transfer& a, const Transfer& b) {
  return a.count > 0 && b.count > 0 && a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

// Whether the executor lands step `s`'s receive in the rank's scratch and
// applies it to the working vector once the step's transfers are done: when
// the step's send may still read the region (`send_in_flight`: the send is
// not done before the receive starts) and overlaps it, or when the receive
// combines over a link that cannot combine in place (`combines_in_place`).
inline bool stages_receive(const Step& s, bool combines_in_place, bool send_in_flight = true) {
  if (!s.recv || s.recv.count == 0) return false;
  return (send_in_flight && s.send && overlaps(s.send, s.recv)) ||
         (s.combine != Combine::replace && !combines_in_place);
}

class LinkEngine final : public Link {
 public:
  // Outboxes per rank, and parts of its stage: with staged sends, how many
  // of a rank's sends may wait in its stage for their receivers at once
  // (link_words.hpp, "Stage slots").
  static constexpr int kStageSlots = 2;

  // Places and initialises the shared link state for `ranks` ranks (the
  // engines' members) in `arena`; returns its offset (to hand to the other
  // processes' engines).
  static Arena::Offset create_shared(Arena& arena, int ranks);
  // How waits spin (or poll): `fits`, while the ranks fit their
  // cores (link_engine.cpp says why).
  static SpinPolicy spin_for(bool fits) {
    return {fits ? std::chrono::nanoseconds(std::chrono::milliseconds(2)) : std::chrono::nanoseconds(0),
            fits ? std::chrono::nanoseconds(0) : std::chrono::nanoseconds(std::chrono::milliseconds(20))};
  }

  // Attaches to shared state created by create_shared (in this process or,
  // for a ShmArena, in another one). The arena must outlive the engine.
  // `settings` are the run's (its ranks, clock, waits, failure sink),
  // `config` the transport's own.
  LinkEngine(Arena& arena, Arena::Offset shared, ExecutorConfig settings, LinkConfig config = {});
  LinkEngine(const LinkEngine&) = delete;
  LinkEngine& operator=(const LinkEngine&) = delete;
  ~LinkEngine() override;

  const ExecutorConfig& settings() const { return settings_; }
  const LinkConfig& config() const { return config_; }
  // LinkConfig::fast_attach for the calls from now on: the MPI team's calls
  // choose it call by call (runtime/read_choice.hpp), the same on every rank,
  // between calls of the one thread rank of each process.
  void set_fast_attach(bool on) { config_.fast_attach = on; }
  Arena& arena() const { return arena_; }

  // Where `rank` (a member) copies its eager sends for their receivers to
  // pull: `bytes` bytes in the arena -- with staged sends every send, else,
  // without a virtual clock, those that fit. None (the default): no stage.
  // With staged sends it is cut into kStageSlots parts (of whole cache
  // lines): sends that fit a part overlap their receivers' pulls; a larger
  // one (up to `bytes`) takes the whole stage, waiting for it to be empty.
  void set_stage(int rank, std::byte* stage, std::size_t bytes);

  // The Link (common/link.hpp). Data pointers must lie in the arena.
  void start_send(LinkRank& c, const Transfer& send, const std::byte* data) override;
  bool test_send(LinkRank& c) override;
  void start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) override;
  bool test_recv(LinkRank& c) override;
  bool can_block() const override { return true; }
  bool combines_in_place() const override { return true; }  // whoever moves the data combines as it copies
  void block(LinkRank& c, LinkRank::Wait what, const WaitPolicy& policy) override;
  void withdraw(LinkRank& c) noexcept override;
  std::string peer_state(const LinkRank& c, int peer) const override;
  int awaited(const LinkRank& c, LinkRank::Wait what) const override;

  // Where a rank is, for other ranks' messages: `round` begun, at `step`, or done.
  void publish_start(const LinkRank& c);
  void publish_step(const LinkRank& c);
  void publish_done(const LinkRank& c);

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
  std::chrono::milliseconds barrier_patience() const;

  // Records `error` through on_failure, then aborts (never throws).
  void fail(std::exception_ptr error) noexcept;
  // Ends every rank's waits with LinkAborted (idempotent, never throws).
  void abort() noexcept;
  bool aborted() const;
  FutexScope scope() const { return scope_; }
  // How this engine's waits spin (null: wait.cpp's default), for waits on
  // other words of the same ranks (transport/direct_reduce.hpp).
  const SpinPolicy* spin_policy() const { return spin(); }
  // Bytes this process's ranks have read from other processes by
  // cross-memory attach (LinkConfig::cross_memory_attach), so far.
  std::uint64_t attached_bytes() const { return attached_bytes_.load(std::memory_order_relaxed); }
  // Bytes read by cross-memory attach beside the engine's links (the direct broadcast's), counted with theirs.
  void count_attached(std::uint64_t bytes) { attached_bytes_.fetch_add(bytes, std::memory_order_relaxed); }

 private:
  struct Outbox;
  struct Inbox;
  struct Progress;
  struct Shared;
  // A member rank's private state in this transport, in this process (its
  // own cache line: each is written by its rank's thread alone).
  struct alignas(64) RankState {
    bool send_posted = true;      // false while a send waits for an outbox to be free
    std::uint32_t recv_bell = 0;  // the doorbell value last seen
    std::byte* stage = nullptr;   // see set_stage
    std::size_t stage_bytes = 0;
    std::size_t part_bytes = 0;            // each outbox's part of the stage
    const std::byte* send_data = nullptr;  // the send waiting to be posted
    int posted_in = 0;                     // the outbox of the send last posted
    int whole = -1;  // the outbox of a post that took the whole stage, until a later one into the stage saw it idle
    // Per outbox: the addressee of the send last posted there (a send that
    // waits for the outbox waits for it).
    int staged_to[kStageSlots] = {};
    // Per member slot, with staged sends: the posts sent to it and received
    // from it so far (outbox.seq; link_words.hpp, "Stage slots").
    std::vector<std::uint32_t> sent, received;
    // With cross-memory attach: where a combining receive reads its attached
    // send, a chunk at a time (read_attached). Sized once by set_stage, so
    // that no call after a rank's set-up allocates (a persistent call's
    // starts must not); only an element wider than a chunk grows it.
    std::vector<std::byte> bounce;
  };
  RankState& own(const LinkRank& c) { return own_[slot(c.rank)]; }
  const RankState& own(const LinkRank& c) const { return own_[slot(c.rank)]; }

  bool deliver_if_waited_for(LinkRank& c, const Transfer& send, const std::byte* data);
  bool try_post(LinkRank& c);
  // The first of the rank's outboxes that its pending send needs idle and
  // that is not (-1: it can post now); `take`, if given, receives the
  // outbox the send would post in.
  int busy_outbox(const LinkRank& c, int* take = nullptr) const;
  // Rank slot `s`'s outbox `k` (the first: the rendezvous one).
  Outbox& outbox(std::size_t s, int k = 0) const;
  // Whether `send` is copied and done at once (see try_post; the posted
  // send's Outbox::copied says so to its receiver).
  bool eager(const LinkRank& c, const Transfer& send) const;
  // Whether `send` is read by its receiver straight from the sender's
  // process (LinkConfig::cross_memory_attach).
  bool attached(const LinkRank& c, const Transfer& send) const;
  void read_attached(LinkRank& c, const Outbox& ob);
  // A copy in the sender's stage into the receive's target: a streamed one
  // chunk by chunk as its sender writes it (link_words.hpp).
  void read_copy(LinkRank& c, const Outbox& ob);
  bool try_pull(LinkRank& c);
  void pull(LinkRank& c, Outbox& ob);
  void ring(Inbox& inbox);
  std::string size_mismatch(int src, std::uint64_t sent, int dst, std::uint64_t received, std::uint64_t offset) const;
  // The virtual-clock ends of a matched transfer (the cost model's), or zeros without a clock.
  TransferEnds ends(int src, int dst, std::uint64_t elements, std::size_t eb, Picos sender_ready,
                    Picos receiver_ready) const;
  int slots() const {
    return config_.members.empty() ? settings_.layout.ranks() : static_cast<int>(config_.members.size());
  }
  std::size_t slot(int rank) const {
    return static_cast<std::size_t>(slot_of_.empty() ? rank : slot_of_[static_cast<std::size_t>(rank)]);
  }

  // Processes' waits spin (or poll) under spin_, and so do threads' up to a
  // few per core; others keep wait.cpp's default.
  const SpinPolicy* spin() const { return scope_ == FutexScope::shared || thread_spin_ ? &spin_ : nullptr; }

  Arena& arena_;
  ExecutorConfig settings_;
  LinkConfig config_;
  std::vector<RankState> own_;  // per slot
  int stage_slots_ = 1;         // outboxes in use per rank: kStageSlots with staged sends
  FutexScope scope_;
  SpinPolicy spin_;
  bool thread_spin_ = false;
  bool stream_copies_ = false;  // copies into the stage are streamed (link_words.hpp): the ranks fit the cores
  // Messages of at least this many bytes are always moved by their receiver
  // (0: by whichever side arrives second); see deliver_if_waited_for.
  std::uint64_t receiver_moves_from_ = 0;
  Shared* shared_;
  Outbox* outbox_;
  Inbox* inbox_;
  Progress* progress_;
  std::vector<int> slot_of_;  // rank -> slot (-1: not a member); empty: slot = rank
  int pid_ = 0;               // this process's, published in each of its ranks' progress record
  std::atomic<std::uint64_t> attached_bytes_{0};
};

}  // namespace copse
