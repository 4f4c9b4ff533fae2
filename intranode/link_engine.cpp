#include "intranode/link_engine.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <sstream>
#include <utility>

#include "common/error.hpp"

namespace copse {

// ---- link words ---------------------------------------------------------------
//
// A transfer is a rendezvous, and whichever side arrives second moves the data
// (one copy, straight between the two ranks' buffers), so the first to arrive
// sleeps at most once and the second never does (except for large messages
// between thread ranks that each have a core: see deliver_if_waited_for):
//
//  - Each rank owns one outbox (it has at most one send outstanding, so FIFO
//    order per (source, destination) pair holds trivially). A sender publishes
//    (data, count, ready time) and sets the state to posted(dst).
//  - Each rank owns one inbox (at most one receive outstanding). A receiver
//    that finds no send posted for it publishes (target, count, side, ready
//    time) and sets the inbox state to posted(src).
//  - Each side stores its own state, then reads the other's (sequentially
//    consistent, Dekker style): at least one sees the other. The mover claims
//    the sender's outbox by CAS (posted(dst) -> claimed by the receiver, or
//    -> idle by the sender itself), so exactly one of them moves the data.
//  - A receiver that pulled acks by setting the outbox back to idle with the
//    transfer's end time. A sender that delivers first marks the inbox
//    delivering (so that a receiver withdrawing on an abort knows its buffer
//    is being written), then done with the end time.
//  - A receiver sleeps on its inbox's doorbell, which senders ring after a
//    post or a delivery addressed to it; a sender sleeps on its outbox state.
//
// Staged sends (processes; LinkConfig::staged_sends): receivers never post
// their inbox. A send is copied (outbox.copied) into the outbox's cache line
// or the sender's stage and is done at once; the receiver claims the post,
// pulls the copy and releases the outbox to idle, ringing the sender's bell
// (the sender's next send may wait for the outbox while it sleeps there).
//
// Cross-memory attach (with staged sends; LinkConfig::cross_memory_attach):
// a large send is not copied. The sender posts its buffer's address in its
// own process (outbox.attached; outbox.data is then no arena offset) and
// stays not done; its pid is in its progress record, stored when the rank
// began its round (publish_start), before any post of the round, so the
// receiver's claim sees it. The receiver claims the post as above, reads
// the sender's buffer with process_vm_readv -- straight into its target, or
// through a small private bounce buffer, chunk by chunk, when it combines --
// and releases the outbox to idle: that release is the ack, exactly as for a
// rendezvous pull, and only then may the sender touch its buffer again. A
// read the kernel refuses (the peer's memory is not ours to read, the peer
// is gone) fails the engine with a SystemError before the release, so the
// sender sees the abort rather than an ack. A sender withdrawing after an
// abort waits while its outbox is claimed (the receiver may still be
// reading its buffer), as for any post that is not a copy.
//
// kAbortBit is sticky: once a run fails it is OR-ed into every outbox state and
// barrier word, so every CAS of the protocol fails and every sleeper wakes.
// Data pointers in the words are arena offsets (see arena.hpp), but for an
// attached send's, which is an address in the sender's process.
namespace {

constexpr std::uint32_t kIdle = 0;
constexpr std::uint32_t kClaimed = 2;     // outbox: the receiver is pulling the data
constexpr std::uint32_t kDone = 2;        // inbox: the sender has delivered
constexpr std::uint32_t kDelivering = 3;  // inbox: the sender is delivering
constexpr std::uint32_t kAbortBit = 0x80000000U;
// Up to this many thread ranks per core, waits poll (yielding the core)
// rather than sleep on the futex; see the constructor.
constexpr int kPollingRanksPerCore = 8;
// While thread ranks have a core each, a message this large is moved by its
// receiver alone; see deliver_if_waited_for.
constexpr std::uint64_t kReceiverMovesFromBytes = 16 << 10;
// Sends of at most this many bytes are eager without a virtual clock (see
// try_post): what fits beside an outbox's words in its cache line. A rank
// with a stage (LinkRank::stage) also sends eagerly what fits there.
constexpr std::size_t kEagerBytes = 16;
// A combining receive by cross-memory attach reads the peer's buffer in
// chunks of this size into a private bounce buffer, and combines each chunk
// while it is still in the cache.
constexpr std::size_t kAttachChunkBytes = 64 << 10;
constexpr std::uint32_t posted(int peer) { return (static_cast<std::uint32_t>(peer) << 2) | 1U; }
constexpr bool is_posted(std::uint32_t s) { return (s & 3U) == 1U; }

static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "link words live in shared memory: their atomics must be lock-free");

}  // namespace

struct alignas(64) LinkEngine::Outbox {
  std::atomic<std::uint32_t> state{kIdle};
  std::atomic<std::uint32_t> state_sleepers{0};  // ranks asleep on `state` (see wait.hpp)
  // Written by the sender before posting, read by the addressed receiver only.
  Arena::Offset data = 0;
  std::uint64_t count = 0;
  Picos sender_ready = 0;
  // Written by a receiver that pulled, before its ack.
  Picos end = 0;
  // Written by the sender before posting: whether `data` is an eager copy
  // (here or in the sender's stage) rather than the sender's own buffer;
  // and whether it is the sender's own buffer as an address in the sender's
  // process, to be read by cross-memory attach, rather than an arena offset.
  bool copied = false;
  bool attached = false;
  // An eager send's copy, when it fits here: its receiver reads it with the
  // words above, in one cache line. Aligned for any element type (the
  // kernels read it in place).
  alignas(16) std::byte eager[kEagerBytes];
};

struct alignas(64) LinkEngine::Inbox {
  std::atomic<std::uint32_t> state{kIdle};
  std::atomic<std::uint32_t> bell{0};  // rung by every post or delivery to this rank
  std::atomic<std::uint32_t> bell_sleepers{0};
  // Written by the receiver before posting, read by the addressed sender only.
  Arena::Offset target = 0;
  std::uint64_t count = 0, offset = 0;
  Picos recv_ready = 0;
  Combine side = Combine::replace;
  // Written by a sender that delivered, before marking the inbox done.
  Picos end = 0;
};

// Where a rank is, for error messages only; and its barrier word.
struct alignas(64) LinkEngine::Progress {
  std::atomic<std::int64_t> round{-1};  // the round whose steps the rank has started
  std::atomic<std::uint64_t> step{0};   // index of the step being run
  std::atomic<bool> done{false};        // finished the steps of `round`
  std::atomic<std::uint32_t> go{0};     // the barrier releases the rank by changing it
  std::atomic<std::uint32_t> go_sleepers{0};
  std::atomic<std::int32_t> pid{0};  // the rank's process, for cross-memory attach
};

struct alignas(64) LinkEngine::Shared {
  std::atomic<std::uint32_t> abort{0};
  std::int32_t ranks = 0;
  alignas(64) std::atomic<std::uint32_t> barrier_count{0};
  // Followed by Outbox[ranks], Inbox[ranks], Progress[ranks].
};

// ---- set-up ---------------------------------------------------------------------

Arena::Offset LinkEngine::create_shared(Arena& arena, int ranks) {
  if (ranks < 1 || ranks > (1 << 29)) throw UsageError("the link engine needs 1 to 2^29 ranks");
  const auto p = static_cast<std::size_t>(ranks);
  static_assert(sizeof(Outbox) == 64, "an outbox is one cache line, its eager copy included");
  const std::size_t bytes = sizeof(Shared) + p * (sizeof(Outbox) + sizeof(Inbox) + sizeof(Progress));
  const Arena::Offset at = arena.allocate(bytes, 64);
  std::byte* base = arena.address(at);
  auto* shared = new (base) Shared{};
  shared->ranks = ranks;
  std::byte* cursor = base + sizeof(Shared);
  for (std::size_t r = 0; r < p; ++r, cursor += sizeof(Outbox)) new (cursor) Outbox{};
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
  base += sizeof(Shared);
  outbox_ = std::launder(reinterpret_cast<Outbox*>(base));
  base += p * sizeof(Outbox);
  inbox_ = std::launder(reinterpret_cast<Inbox*>(base));
  base += p * sizeof(Inbox);
  progress_ = std::launder(reinterpret_cast<Progress*>(base));
  // Processes of a node: they fit when the machine has a core for every
  // rank, whatever each process's own affinity (pinned one per core, each
  // sees one). While the node's ranks fit its cores, a waiter spins long
  // without giving up its core -- its peer runs on another one and will
  // answer within a copy's time, and a yield on a busy machine costs a whole time slice; with more
  // ranks than cores it polls from the first look, yielding the core to the
  // ranks it waits for, as MPI libraries do, before it sleeps: a spin there
  // only keeps the rank it waits for off the core (np 4 on 2 cores,
  // interposed 8-byte MPI_Allreduce, medians: 16 us with a 2 us spin,
  // 4.4-5.8 us without; Open MPI 4.2-7.3 us).
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const bool fits = std::max(slots(), config_.ranks_on_host) <= cores;
  spin_.spin = std::chrono::milliseconds(fits ? 2 : 0);
  spin_.poll = fits ? std::chrono::microseconds(0) : std::chrono::milliseconds(20);
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
    spin_.spin = std::chrono::milliseconds(thread_fits ? 2 : 0);
    spin_.poll = thread_fits ? std::chrono::microseconds(0) : std::chrono::milliseconds(20);
    if (thread_fits) receiver_moves_from_ = kReceiverMovesFromBytes;
  }
}

LinkEngine::~LinkEngine() = default;

// ---- failure --------------------------------------------------------------------

bool LinkEngine::aborted() const { return shared_->abort.load(std::memory_order_acquire) != 0; }

void LinkEngine::abort() noexcept {
  if (shared_->abort.exchange(1, std::memory_order_acq_rel)) return;
  const auto p = static_cast<std::size_t>(slots());
  for (std::size_t r = 0; r < p; ++r) {
    outbox_[r].state.fetch_or(kAbortBit, std::memory_order_acq_rel);
    wake_all(outbox_[r].state, scope_, &outbox_[r].state_sleepers);
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
  // Outbox: retract a post; wait out a receiver's pull.
  Outbox& ob = outbox_[me];
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
}

int LinkEngine::awaited(const LinkRank& c, LinkRank::Wait what) const {
  if (what == LinkRank::Wait::recv) return c.receiving.peer;
  // A send queued behind the stage waits for the receiver of the send
  // posted there before it.
  const RankState& me = own(c);
  return !me.send_posted && me.staged_to >= 0 ? me.staged_to : c.sending.peer;
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

// ---- the protocol -----------------------------------------------------------------

TransferEnds LinkEngine::ends(int src, int dst, std::uint64_t elements, std::size_t eb, Picos sender_ready,
                              Picos receiver_ready) const {
  if (!settings_.virtual_clock) return {};
  return settings_.model.transfer_ends(settings_.layout, src, dst, elements * eb, sender_ready, receiver_ready);
}

void LinkEngine::ring(Inbox& inbox) {
  inbox.bell.fetch_add(1, std::memory_order_acq_rel);
  wake_all(inbox.bell, scope_, &inbox.bell_sleepers);
}

void LinkEngine::start_send(LinkRank& c, const Transfer& send, const std::byte* data) {
  RankState& me = own(c);
  c.sending = send;
  c.send_done = false;
  me.send_posted = false;
  c.send_end = 0;
  me.send_data = data;
  if (config_.staged_sends && send.count * c.eb > kEagerBytes && send.count * c.eb > me.stage_bytes &&
      !attached(c, send))
    throw ScheduleError(settings_.layout.describe(c.rank) + " sends " + std::to_string(send.count * c.eb) +
                        " bytes, more than its stage of " + std::to_string(me.stage_bytes) + " bytes");
  (void)try_post(c);
}

bool LinkEngine::eager(const LinkRank& c, const Transfer& send) const {
  if (config_.staged_sends) return !attached(c, send);
  const std::uint64_t bytes = send.count * c.eb;
  return !settings_.virtual_clock && (bytes <= kEagerBytes || bytes <= own(c).stage_bytes);
}

bool LinkEngine::attached(const LinkRank& c, const Transfer& send) const {
  if (!config_.cross_memory_attach) return false;
  const std::uint64_t bytes = send.count * c.eb;
  return bytes > kEagerBytes && (bytes >= config_.attach_from_bytes || bytes > own(c).stage_bytes);
}

// Posts the send once the outbox is free (idle: the receiver of our previous
// send has taken it). An eager send is copied first -- into the outbox's own
// cache line when it fits, which its receiver reads anyway, else into the
// rank's stage -- and is done at once: its receiver pulls the copy whenever
// it comes, and rings our bell when it has (we may be asleep there, with our
// next send waiting for the outbox). A rendezvous send waits in the outbox
// for its receiver, unless the receiver waits for us already; an attached
// one (cross-memory attach) posts its own address and waits for its
// receiver's read.
bool LinkEngine::try_post(LinkRank& c) {
  Outbox& ob = outbox_[slot(c.rank)];
  RankState& me = own(c);
  std::uint32_t s = ob.state.load(std::memory_order_acquire);
  if (s & kAbortBit) throw LinkAborted{};
  if (s != kIdle) return false;
  const Transfer& send = c.sending;
  const auto bytes = static_cast<std::size_t>(send.count * c.eb);
  const bool copied = eager(c, send);
  const bool attach = !copied && attached(c, send);
  if (copied) {
    std::byte* copy = bytes <= kEagerBytes ? ob.eager : me.stage;
    if (bytes > 0) std::memcpy(copy, me.send_data, bytes);
    ob.data = arena_.offset_of(copy);
  } else {
    ob.data = attach ? reinterpret_cast<std::uintptr_t>(me.send_data) : arena_.offset_of(me.send_data);
  }
  ob.copied = copied;
  ob.attached = attach;
  ob.count = send.count;
  ob.sender_ready = settings_.virtual_clock ? c.clock.send_ready() : 0;
  if (!ob.state.compare_exchange_strong(s, posted(send.peer), std::memory_order_seq_cst)) throw LinkAborted{};
  me.send_posted = true;
  if (copied) {
    me.staged_to = send.peer;
    ring(inbox_[slot(send.peer)]);
    c.send_done = true;
  } else if (attach) {
    ring(inbox_[slot(send.peer)]);  // receivers of staged sends never post: it will find ours and ack
  } else if (deliver_if_waited_for(c, send, me.send_data)) {
    c.send_done = true;
  }
  return true;
}

// The receiver may be waiting for us already: then we deliver into its
// buffer, and the send is done at once.
//
// Not for large messages while every rank has a core of its own: the rank
// that arrives second would then move both messages of an exchange -- say
// ranks 0 and 1 swap halves of 1 MiB, 0 arrives first and posts its receive;
// 1 arriving would reduce into 0's buffer and then pull its own half, while
// 0, whose core is free, only waits. Left to their receivers, the two halves
// are reduced at once, on both cores (the T = 2 allreduce of 1 MiB spent
// about twice the copy it needed). The receiver is spinning, so leaving it
// the copy costs no wake-up.
bool LinkEngine::deliver_if_waited_for(LinkRank& c, const Transfer& send, const std::byte* data) {
  Outbox& ob = outbox_[slot(c.rank)];
  Inbox& ib = inbox_[slot(send.peer)];
  if ((receiver_moves_from_ > 0 && send.count * c.eb >= receiver_moves_from_) ||
      ib.state.load(std::memory_order_seq_cst) != posted(c.rank)) {
    ring(ib);  // not there yet: it will find our post
    return false;
  }
  std::uint32_t expected = posted(send.peer);
  if (!ob.state.compare_exchange_strong(expected, kIdle, std::memory_order_seq_cst))
    return false;  // it found our post at the same moment and is pulling
  // The receiver is waiting for us: deliver into its buffer. It only leaves
  // posted(us) by withdrawing on an abort.
  expected = posted(c.rank);
  if (!ib.state.compare_exchange_strong(expected, kDelivering, std::memory_order_acq_rel)) throw LinkAborted{};
  if (ib.count != send.count) {
    ib.state.store(kIdle, std::memory_order_release);
    ring(ib);
    throw ScheduleError(size_mismatch(c.rank, send.count, send.peer, ib.count, ib.offset));
  }
  const TransferEnds end = ends(c.rank, send.peer, send.count, c.eb, ob.sender_ready, ib.recv_ready);
  try {
    apply_received(c, arena_.address(ib.target), data, send.count, ib.side);
  } catch (...) {
    fail(std::current_exception());  // first, so that the receiver does not take the idle inbox for a delivery
    ib.state.store(kIdle, std::memory_order_release);
    ring(ib);
    throw;
  }
  ib.end = end.recv_end;
  ib.state.store(kDone, std::memory_order_release);
  ring(ib);
  c.send_end = end.send_end;
  return true;
}

bool LinkEngine::test_send(LinkRank& c) {
  if (c.send_done) return true;
  if (!own(c).send_posted) return try_post(c) && c.send_done;
  Outbox& ob = outbox_[slot(c.rank)];
  const std::uint32_t s = ob.state.load(std::memory_order_acquire);
  if (s == kIdle) {  // the receiver pulled and acked
    c.send_end = ob.end;
    c.send_done = true;
    return true;
  }
  if (s & kAbortBit) throw LinkAborted{};
  return false;
}

void LinkEngine::pull(LinkRank& c, Outbox& ob) {
  const Transfer& recv = c.receiving;
  // We hold the claim on the sender's outbox: every exit releases it.
  auto release = [&] {
    const std::uint32_t old = ob.state.fetch_and(kAbortBit, std::memory_order_acq_rel);
    wake_all(ob.state, scope_, &ob.state_sleepers);
    return old;
  };
  const bool was_eager = ob.copied;
  if (ob.count != recv.count) {
    ScheduleError error(size_mismatch(recv.peer, ob.count, c.rank, recv.count, recv.offset));
    fail(std::make_exception_ptr(error));
    release();
    throw error;
  }
  const TransferEnds end =
      ends(recv.peer, c.rank, recv.count, c.eb, ob.sender_ready, settings_.virtual_clock ? c.clock.recv_ready() : 0);
  try {
    if (ob.attached)
      read_attached(c, ob);
    else
      apply_received(c, c.recv_target, arena_.address(ob.data), recv.count, c.recv_side);
  } catch (...) {
    fail(std::current_exception());  // first, so that the sender does not take the release for an ack
    release();
    throw;
  }
  ob.end = end.send_end;
  if (release() & kAbortBit) throw LinkAborted{};
  // An eager send's sender may sleep on its bell for a receive while its
  // next send waits for the outbox we just freed.
  if (was_eager) ring(inbox_[slot(recv.peer)]);
  c.recv_end = end.recv_end;
  c.recv_done = true;
}

int cross_memory_read(int pid, std::uint64_t address, void* to, std::size_t bytes) noexcept {
  auto* out = static_cast<std::byte*>(to);
  while (bytes > 0) {
    // One iovec each side: the kernel may still stop short (at a fault, or
    // past MAX_RW_COUNT, about 2 GiB); the loop resumes where it stopped.
    iovec local{out, bytes};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), bytes};
    const ssize_t got = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    if (got == 0) return EFAULT;
    out += got;
    address += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return 0;
}

// Reads an attached send (cross-memory attach) into the receive's target.
// A sender of this very process (a thread rank beside ours) needs no system
// call: its buffer is ours to read.
void LinkEngine::read_attached(LinkRank& c, const Outbox& ob) {
  const Transfer& recv = c.receiving;
  const int pid = progress_[slot(recv.peer)].pid.load(std::memory_order_relaxed);
  const std::uint64_t bytes = recv.count * c.eb;
  if (pid == pid_) {
    apply_received(c, c.recv_target, reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(ob.data)),
                   recv.count, c.recv_side);
    return;
  }
  auto read = [&](std::uint64_t at, std::byte* to, std::uint64_t n) {
    const int error = cross_memory_read(pid, ob.data + at, to, static_cast<std::size_t>(n));
    if (error == 0) return;
    std::string why = std::strerror(error);
    // ESRCH: the sender's process has ended; say so as every wait for it does.
    if (settings_.peer_gone)
      if (const std::string gone = settings_.peer_gone(recv.peer); !gone.empty()) why += "; " + gone;
    throw SystemError(settings_.layout.describe(c.rank) + " cannot read the " + std::to_string(bytes) +
                      "-byte message of " + settings_.layout.describe(recv.peer) + " (pid " + std::to_string(pid) +
                      ") out of its memory by cross-memory attach (process_vm_readv): " + why);
  };
  if (c.recv_side == Combine::replace) {
    read(0, c.recv_target, bytes);
  } else {
    // Combining: chunk by chunk through a bounce buffer that stays in the
    // cache, of whole elements. One per thread: ranks are threads.
    thread_local std::vector<std::byte> bounce;
    const std::uint64_t per = std::max<std::uint64_t>(1, kAttachChunkBytes / c.eb);
    if (bounce.size() < per * c.eb) bounce.resize(static_cast<std::size_t>(per * c.eb));
    for (std::uint64_t at = 0; at < recv.count; at += per) {
      const std::uint64_t n = std::min(per, recv.count - at);
      read(at * c.eb, bounce.data(), n * c.eb);
      apply_received(c, c.recv_target + at * c.eb, bounce.data(), n, c.recv_side);
    }
  }
  attached_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void LinkEngine::start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) {
  c.receiving = recv;
  c.recv_target = target;
  c.recv_side = side;
  c.recv_done = false;
  c.recv_end = 0;
  if (config_.staged_sends) {
    (void)try_pull(c);
    return;
  }
  Outbox& ob = outbox_[slot(recv.peer)];
  Inbox& ib = inbox_[slot(c.rank)];
  const std::uint32_t for_me = posted(c.rank);

  // The sender is there already: pull.
  std::uint32_t expected = for_me;
  if (ob.state.load(std::memory_order_acquire) == for_me &&
      ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
    pull(c, ob);
    return;
  }
  // Post the receive, so that the sender can deliver; test_recv looks again.
  ib.target = arena_.offset_of(target);
  ib.count = recv.count;
  ib.offset = recv.offset;
  ib.recv_ready = settings_.virtual_clock ? c.clock.recv_ready() : 0;
  ib.side = side;
  ib.state.store(posted(recv.peer), std::memory_order_seq_cst);
}

// Staged sends: pull the sender's staged send once it is posted for us.
bool LinkEngine::try_pull(LinkRank& c) {
  Outbox& ob = outbox_[slot(c.receiving.peer)];
  const std::uint32_t for_me = posted(c.rank);
  // Read the bell first: a post after this read rings it, so a block() on
  // this value cannot miss it.
  own(c).recv_bell = inbox_[slot(c.rank)].bell.load(std::memory_order_seq_cst);
  std::uint32_t expected = for_me;
  if (ob.state.load(std::memory_order_seq_cst) != for_me ||
      !ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_seq_cst)) {
    if (aborted()) throw LinkAborted{};
    return false;
  }
  pull(c, ob);
  return true;
}

bool LinkEngine::test_recv(LinkRank& c) {
  if (c.recv_done) return true;
  if (config_.staged_sends) return try_pull(c);
  const Transfer& recv = c.receiving;
  Outbox& ob = outbox_[slot(recv.peer)];
  Inbox& ib = inbox_[slot(c.rank)];
  const std::uint32_t for_me = posted(c.rank);
  // Read the bell first: a post or delivery after this read rings it, so a
  // block() on this value cannot miss it.
  own(c).recv_bell = ib.bell.load(std::memory_order_acquire);
  if (ib.state.load(std::memory_order_acquire) == kDone) {
    ib.state.store(kIdle, std::memory_order_relaxed);
    c.recv_end = ib.end;
    c.recv_done = true;
    return true;
  }
  if (aborted()) throw LinkAborted{};
  std::uint32_t expected = for_me;
  if (ob.state.load(std::memory_order_seq_cst) != for_me ||
      !ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_seq_cst))
    return false;  // not posted yet, or the sender claimed it and is delivering
  if (ib.state.load(std::memory_order_acquire) == kDone) {
    // The sender delivered our message after we last looked and has already
    // posted its next one to us, which is what we claimed: put it back for
    // our next receive. (Its delivery's done mark precedes that post, so
    // seeing the post means seeing the mark.)
    expected = kClaimed;
    if (!ob.state.compare_exchange_strong(expected, for_me, std::memory_order_acq_rel)) {
      ob.state.fetch_and(kAbortBit, std::memory_order_acq_rel);  // release our claim
      wake_all(ob.state, scope_, &ob.state_sleepers);
      throw LinkAborted{};
    }
    ib.state.store(kIdle, std::memory_order_relaxed);
    c.recv_end = ib.end;
    c.recv_done = true;
    return true;
  }
  // Ours now: the sender cannot deliver (it lost the outbox), so the inbox
  // goes back to idle before we pull.
  ib.state.store(kIdle, std::memory_order_relaxed);
  pull(c, ob);
  return true;
}

void LinkEngine::block(LinkRank& c, LinkRank::Wait what, const WaitPolicy& policy) {
  if (what == LinkRank::Wait::recv) {
    Inbox& ib = inbox_[slot(c.rank)];
    // A send waiting for the outbox (an eager send of ours not yet taken)
    // must not sleep through its release (which rings the bell; this look
    // covers a release before the bell was read).
    if (!own(c).send_posted && settings_.layout.shares_memory(c.rank, c.sending.peer)) {
      const std::uint32_t s = outbox_[slot(c.rank)].state.load(std::memory_order_seq_cst);
      if (s == kIdle || (s & kAbortBit)) return;
    }
    (void)wait_while_equal(ib.bell, own(c).recv_bell, policy, scope_, &ib.bell_sleepers, spin());
    return;
  }
  Outbox& ob = outbox_[slot(c.rank)];
  const std::uint32_t s = ob.state.load(std::memory_order_acquire);
  if (s != kIdle && !(s & kAbortBit)) (void)wait_while_equal(ob.state, s, policy, scope_, &ob.state_sleepers, spin());
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
