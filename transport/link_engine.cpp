#include "transport/link_engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <sstream>
#include <utility>

#include "common/cores.hpp"
#include "common/error.hpp"
#include "transport/link_words.hpp"

namespace copse {

// ---- set-up ---------------------------------------------------------------------

Arena::Offset LinkEngine::create_shared(Arena& arena, int ranks) {
  if (ranks < 1 || ranks > (1 << 29)) throw UsageError("the link engine needs 1 to 2^29 ranks");
  const auto p = static_cast<std::size_t>(ranks);
  static_assert(sizeof(Outbox) == 64, "an outbox is one cache line, its eager copy included");
  const auto k = static_cast<std::size_t>(kStageSlots);
  const std::size_t bytes = sizeof(Shared) + p * (k * sizeof(Outbox) + sizeof(Inbox) + sizeof(Progress));
  const Arena::Offset at = arena.allocate(bytes, 64);
  std::byte* base = arena.address(at);
  auto* shared = new (base) Shared{};
  shared->ranks = ranks;
  std::byte* cursor = base + sizeof(Shared);
  for (std::size_t r = 0; r < p * k; ++r, cursor += sizeof(Outbox)) new (cursor) Outbox{};
  for (std::size_t r = 0; r < p; ++r, cursor += sizeof(Inbox)) new (cursor) Inbox{};
  for (std::size_t r = 0; r < p; ++r, cursor += sizeof(Progress)) new (cursor) Progress{};
  return at;
}

LinkEngine::LinkEngine(Arena& arena, Arena::Offset shared, ExecutorConfig settings, LinkConfig config)
    : arena_(arena),
      settings_(std::move(settings)),
      config_(std::move(config)),
      scope_(arena.cross_process() ? FutexScope::shared : FutexScope::process),
      pid_(static_cast<int>(getpid())) {
  if (config_.cross_memory_attach && (!config_.staged_sends || settings_.virtual_clock))
    throw UsageError("cross-memory attach needs staged sends and no virtual clock");
  std::byte* base = arena_.address(shared);
  shared_ = std::launder(reinterpret_cast<Shared*>(base));
  if (!config_.members.empty()) {
    slot_of_.assign(static_cast<std::size_t>(settings_.layout.ranks()), -1);
    for (std::size_t i = 0; i < config_.members.size(); ++i) {
      const int r = config_.members[i];
      if (r < 0 || r >= settings_.layout.ranks() || (i > 0 && r <= config_.members[i - 1]))
        throw UsageError("the link engine's members must be ascending ranks of its layout");
      slot_of_[static_cast<std::size_t>(r)] = static_cast<int>(i);
    }
  }
  if (shared_->ranks != slots())
    throw UsageError("the link state holds " + std::to_string(shared_->ranks) +
                     " ranks, but the engine is configured for " + std::to_string(slots()));
  const auto p = static_cast<std::size_t>(slots());
  own_.resize(p);
  if (config_.staged_sends) {
    stage_slots_ = kStageSlots;
    for (RankState& r : own_) r.sent.assign(p, 0), r.received.assign(p, 0);
  }
  base += sizeof(Shared);
  outbox_ = std::launder(reinterpret_cast<Outbox*>(base));
  base += p * static_cast<std::size_t>(kStageSlots) * sizeof(Outbox);
  inbox_ = std::launder(reinterpret_cast<Inbox*>(base));
  base += p * sizeof(Inbox);
  progress_ = std::launder(reinterpret_cast<Progress*>(base));
  // Processes of a node: they fit when every rank of the host can run at
  // once on a core of its own -- as the node's processes agreed at set-up
  // from their affinity masks (LinkConfig::concurrent_ranks: processes
  // pinned one per core each see one core, yet fit), else as this process's
  // mask says. Never the machine's online count: a host confined to one core
  // of two (a batch system's cpuset) has one. While the node's ranks fit
  // their cores, a waiter spins long without giving up its core -- its peer
  // runs on another one and will answer within a copy's time, and a yield on
  // a busy machine costs a whole time slice; with more ranks than cores it
  // polls from the first look, yielding the core to the ranks it waits for,
  // as MPI libraries do, before it sleeps: a spin there only keeps the rank
  // it waits for off the core (np 4 on 2 cores, interposed 8-byte
  // MPI_Allreduce, medians: 16 us with a 2 us spin, 4.4-5.8 us without; Open
  // MPI 4.2-7.3 us; 2 hosts x 2 ranks, each host pinned to one core of two:
  // 13 ms per call with the 2 ms spin the online count chose).
  const int cores = config_.concurrent_ranks > 0 ? config_.concurrent_ranks : std::max(1, cpu_count(process_cpus()));
  const bool fits = ranks_fit_cores(slots(), config_.ranks_on_host, cores);
  spin_ = spin_for(fits);
  stream_copies_ = fits && config_.staged_sends;
  // Threads of one process (a thread Team, a small emulation): while the
  // engine's ranks fit the process's cores, the same long spin -- a copy of
  // 64 KiB takes longer than wait.cpp's default 4 us spin, after which the
  // peer would sleep on the futex and pay a wake-up per message (calibrate
  // measured 66 us against 4.4 us for a 64 KiB ping-pong). A few ranks per
  // core (a Team of 4 or 8 threads on 2 cores) poll from the first look,
  // without spinning: the rank being waited for is most likely runnable on
  // this very core, and a yield hands it the core at once, where a futex
  // sleep costs a wake-up and a trip through the scheduler per message, and
  // a spin only delays it (T = 4 on 2 cores, 16 B: median 15.9 us with a
  // 2 us spin, 7.6 us without, 31 us with 10 us). With many more ranks than
  // cores (the emulator's thousands) polling would hand each core to every
  // idle rank in turn, so wait.cpp's short spin and the futex stand.
  const int process_cores = std::max(1, spin_slots());
  thread_spin_ = scope_ == FutexScope::process && slots() <= kPollingRanksPerCore * process_cores;
  if (thread_spin_) {
    const bool thread_fits = slots() <= spin_slots();
    spin_ = spin_for(thread_fits);
    if (thread_fits) receiver_moves_from_ = kReceiverMovesFromBytes;
  }
}

LinkEngine::~LinkEngine() = default;

LinkEngine::Outbox& LinkEngine::outbox(std::size_t s, int k) const {
  return outbox_[s * static_cast<std::size_t>(kStageSlots) + static_cast<std::size_t>(k)];
}

// ---- failure --------------------------------------------------------------------

bool LinkEngine::aborted() const { return shared_->abort.load(std::memory_order_acquire) != 0; }

void LinkEngine::abort() noexcept {
  if (shared_->abort.exchange(1, std::memory_order_acq_rel)) return;
  const auto p = static_cast<std::size_t>(slots());
  for (std::size_t r = 0; r < p; ++r) {
    for (int k = 0; k < kStageSlots; ++k) {
      Outbox& ob = outbox(r, k);
      ob.state.fetch_or(kAbortBit, std::memory_order_acq_rel);
      wake_all(ob.state, scope_, &ob.state_sleepers);
    }
    inbox_[r].bell.fetch_add(1, std::memory_order_acq_rel);
    wake_all(inbox_[r].bell, scope_, &inbox_[r].bell_sleepers);
  }
  for (std::size_t r = 0; r < p; ++r) {
    progress_[r].go.fetch_or(kAbortBit, std::memory_order_acq_rel);
    wake_all(progress_[r].go, scope_, &progress_[r].go_sleepers);
  }
}

void LinkEngine::fail(std::exception_ptr error) noexcept {
  if (settings_.on_failure) {
    try {
      settings_.on_failure(std::move(error));
    } catch (...) {
    }
  }
  abort();
}

// After an abort: take back whatever this rank still has posted, and wait
// (bounded) for a peer that is moving data into or out of its buffers, so
// that the caller may hand those buffers back to its user.
void LinkEngine::withdraw(LinkRank& c) noexcept {
  const std::size_t me = slot(c.rank);
  // A peer that is copying makes progress without us; a whole timeout (or a
  // minute without one) stuck mid-copy means it is gone: leave it.
  WaitPolicy policy;
  policy.deadline = std::chrono::steady_clock::now() + settings_.waits.timeout.value_or(std::chrono::minutes(1));
  bool gave_up = false;
  auto wait = [&](const std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers, std::uint32_t old) {
    try {
      (void)wait_while_equal(word, old, policy, scope_, &sleepers, spin());
    } catch (...) {
      gave_up = true;
    }
  };
  // Outboxes: retract a post; wait out a receiver's pull.
  for (int k = 0; k < stage_slots_; ++k) {
    Outbox& ob = outbox(me, k);
    for (std::uint32_t s = ob.state.load(std::memory_order_acquire); !gave_up;) {
      const std::uint32_t low = s & ~kAbortBit;
      if (low == kIdle) break;
      if (is_posted(low)) {
        if (ob.state.compare_exchange_strong(s, s & kAbortBit, std::memory_order_acq_rel)) break;
        continue;
      }
      // An eager send: a peer pulling reads our copy, never the caller's
      // buffers, and may have died while at it.
      if (ob.copied) break;
      wait(ob.state, ob.state_sleepers, s);
      s = ob.state.load(std::memory_order_acquire);
    }
  }
  // Inbox: retract a posted receive; wait out a sender's delivery.
  Inbox& ib = inbox_[me];
  while (!gave_up) {
    const std::uint32_t bell = ib.bell.load(std::memory_order_acquire);
    std::uint32_t s = ib.state.load(std::memory_order_acquire);
    if (is_posted(s) && ib.state.compare_exchange_strong(s, kIdle, std::memory_order_acq_rel)) break;
    if (s != kDelivering) break;
    wait(ib.bell, ib.bell_sleepers, bell);
  }
  c.send_done = c.recv_done = true;
  c.waiting = LinkRank::Wait::none;
}

// ---- where ranks are -------------------------------------------------------------

void LinkEngine::publish_start(const LinkRank& c) {
  own(c).send_posted = true;  // a run begins with nothing queued
  Progress& progress = progress_[slot(c.rank)];
  progress.done.store(false, std::memory_order_relaxed);
  progress.step.store(0, std::memory_order_relaxed);
  progress.round.store(c.round, std::memory_order_relaxed);
  // Read by a receiver of an attached send after its claim, which the
  // post's seq_cst CAS orders after this store.
  if (config_.cross_memory_attach) progress.pid.store(pid_, std::memory_order_relaxed);
}

void LinkEngine::set_stage(int rank, std::byte* stage, std::size_t bytes) {
  RankState& state = own_[slot(rank)];
  state.stage = stage;
  state.stage_bytes = bytes;
  // Whole cache lines each, so every part stays aligned as the stage is.
  state.part_bytes = stage_slots_ > 1 ? bytes / static_cast<std::size_t>(stage_slots_) / 64 * 64 : bytes;
  if (config_.cross_memory_attach) state.bounce.resize(kAttachChunkBytes);
}

int LinkEngine::awaited(const LinkRank& c, LinkRank::Wait what) const {
  if (what == LinkRank::Wait::recv) return c.receiving.peer;
  // A send queued behind the stage waits for the receiver of the send
  // posted in the outbox it needs.
  const RankState& me = own(c);
  if (me.send_posted) return c.sending.peer;
  const int k = busy_outbox(c);
  return k >= 0 ? me.staged_to[k] : c.sending.peer;
}

void LinkEngine::publish_step(const LinkRank& c) {
  progress_[slot(c.rank)].step.store(c.step, std::memory_order_relaxed);
}

void LinkEngine::publish_done(const LinkRank& c) {
  progress_[slot(c.rank)].done.store(true, std::memory_order_relaxed);
}

std::string LinkEngine::peer_state(const LinkRank& c, int peer) const {
  const Progress& pr = progress_[slot(peer)];
  const std::string who = "; rank " + std::to_string(peer);
  const std::int64_t round = pr.round.load(std::memory_order_relaxed);
  if (round < c.round) return who + " has not started its schedule";
  if (round > c.round || pr.done.load(std::memory_order_relaxed)) return who + " has finished its schedule";
  return who + " is in its step " + std::to_string(pr.step.load(std::memory_order_relaxed));
}

std::string LinkEngine::size_mismatch(int src, std::uint64_t sent, int dst, std::uint64_t received,
                                      std::uint64_t offset) const {
  std::ostringstream m;
  m << "size mismatch: rank " << src << " sends " << sent << " elements to rank " << dst << ", which receives "
    << received << " elements (into element " << offset << ")";
  const Progress& pr = progress_[slot(dst)];
  m << " in its step " << pr.step.load(std::memory_order_relaxed);
  return m.str();
}

// ---- barrier --------------------------------------------------------------------

std::uint32_t LinkEngine::next_generation(std::uint32_t word) { return (word & kAbortBit) | ((word + 1) & ~kAbortBit); }

std::chrono::milliseconds LinkEngine::barrier_patience() const {
  return 2 * settings_.waits.timeout.value_or(std::chrono::milliseconds(0)) + std::chrono::milliseconds(100);
}

// A central counter, but every rank sleeps on its own word: thousands of
// threads on one futex word share one kernel hash bucket, which every other
// futex call hashing there must then walk.
void LinkEngine::arrive(std::uint32_t participants) {
  if (shared_->barrier_count.fetch_add(1, std::memory_order_acq_rel) + 1 != participants) return;
  shared_->barrier_count.store(0, std::memory_order_relaxed);
  for (int r = 0; r < slots(); ++r) {
    Progress& pr = progress_[static_cast<std::size_t>(r)];
    auto& go = pr.go;
    // Not a plain fetch_add: after 2^31 barriers the count would reach the
    // abort bit. An abort may set that bit meanwhile; the CAS keeps it.
    std::uint32_t word = go.load(std::memory_order_relaxed);
    while (!go.compare_exchange_weak(word, next_generation(word), std::memory_order_acq_rel)) {
    }
    wake_all(go, scope_, &pr.go_sleepers);
  }
}

void LinkEngine::barrier(LinkRank& c, std::uint32_t participants) {
  Progress& pr = progress_[slot(c.rank)];
  auto& go = pr.go;
  const std::uint32_t old = go.load(std::memory_order_acquire);
  if (old & kAbortBit) throw LinkAborted{};
  arrive(participants);
  std::uint32_t g = go.load(std::memory_order_acquire);
  if (g == old) {
    c.waiting = LinkRank::Wait::barrier;
    WaitPolicy policy;
    if (settings_.waits.timeout) policy.deadline = std::chrono::steady_clock::now() + barrier_patience();
    policy.timeout_message = [this, &c] {
      return settings_.layout.describe(c.rank) + ": timed out after " + std::to_string(barrier_patience().count()) +
             " ms at the barrier before " + settings_.waits.round_name + " " + std::to_string(c.round);
    };
    while (g == old) g = wait_while_equal(go, old, policy, scope_, &pr.go_sleepers, spin());
    c.waiting = LinkRank::Wait::none;
  }
  if (g & kAbortBit) throw LinkAborted{};
}

}  // namespace copse
