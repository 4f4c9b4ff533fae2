// The shared-memory link's transfer protocol: posting and delivering sends,
// pulling and reading receives, and waiting for them (the words it works on:
// link_words.hpp; the engine's set-up, failure and barrier: link_engine.cpp).
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "transport/link_engine.hpp"
#include "transport/link_words.hpp"

namespace copse {

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
  c.begin_send(send);
  me.send_posted = false;
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
  const std::uint64_t from = c.attach_from ? c.attach_from : config_.attach_from_bytes;
  return bytes > kEagerBytes && (bytes >= from || bytes > own(c).stage_bytes);
}

int LinkEngine::busy_outbox(const LinkRank& c, int* take) const {
  const RankState& me = own(c);
  const std::size_t mine = slot(c.rank);
  auto busy = [&](int k) { return outbox(mine, k).state.load(std::memory_order_acquire) != kIdle; };
  // The outbox of the last post again once its receiver has taken it: its
  // part of the stage is still in the cache, and a receiver that keeps up
  // leaves the sender one part's footprint, as with one outbox (at np 8 on
  // 2 cores, taking turns regardless doubled the stage memory touched and
  // the medians of 256 KiB-4 MiB reduces and bcasts). Else the next one in
  // turn, i.e. the one of the oldest post, which the send waits for.
  const int next = busy(me.posted_in) ? (me.posted_in + 1) % stage_slots_ : me.posted_in;
  if (take) *take = next;
  if (busy(next)) return next;
  const std::uint64_t bytes = c.sending.count * c.eb;
  if (bytes <= kEagerBytes || !eager(c, c.sending)) return -1;  // not into the stage
  if (bytes > me.part_bytes) {                                  // the whole stage
    for (int k = 0; k < stage_slots_; ++k)
      if (busy(k)) return k;
  } else if (me.whole >= 0 && busy(me.whole)) {
    return me.whole;
  }
  return -1;
}

// Posts the send once the outbox it takes is free (idle: the receiver of
// the send posted there before has taken it; with staged sends see
// busy_outbox and link_words.hpp's "Stage slots"). An eager send is
// copied first -- into the outbox's own cache line when it fits, which its
// receiver reads anyway, else into the outbox's part of the rank's stage --
// and is done at once: its receiver pulls the copy whenever it comes, and
// rings our bell when it has (we may be asleep there, with our next send
// waiting for the outbox). A rendezvous send waits in the outbox for its
// receiver, unless the receiver waits for us already; an attached one
// (cross-memory attach) posts its own address and waits for its receiver's
// read.
bool LinkEngine::try_post(LinkRank& c) {
  RankState& me = own(c);
  int k = 0;
  if (const int busy = busy_outbox(c, &k); busy >= 0) {
    if (outbox(slot(c.rank), busy).state.load(std::memory_order_acquire) & kAbortBit) throw LinkAborted{};
    return false;
  }
  Outbox& ob = outbox(slot(c.rank), k);
  std::uint32_t s = kIdle;
  const Transfer& send = c.sending;
  const auto bytes = static_cast<std::size_t>(send.count * c.eb);
  const bool copied = eager(c, send);
  const bool attach = !copied && attached(c, send);
  // Streamed (link_words.hpp): posted first, written after.
  const bool stream = copied && stream_copies_ && bytes > kStreamChunkBytes && bytes / kStreamChunkBytes < kWholeCopy;
  std::byte* copy = ob.eager;
  if (copied) {
    if (bytes > kEagerBytes) {
      const bool whole = bytes > me.part_bytes;
      copy = whole ? me.stage : me.stage + static_cast<std::size_t>(k) * me.part_bytes;
      me.whole = whole ? k : -1;  // busy_outbox saw the previous whole post's outbox idle
    }
    if (bytes > 0 && !stream) std::memcpy(copy, me.send_data, bytes);
    ob.data = arena_.offset_of(copy);
  } else {
    ob.data = attach ? reinterpret_cast<std::uintptr_t>(me.send_data) : arena_.offset_of(me.send_data);
  }
  ob.copied = copied;
  ob.attached = attach;
  ob.streamed.store(stream ? 0 : kWholeCopy, std::memory_order_relaxed);  // published by the post below
  ob.count = send.count;
  ob.sender_ready = settings_.virtual_clock ? c.clock.send_ready() : 0;
  if (stage_slots_ > 1) ob.seq = ++me.sent[slot(send.peer)];
  if (!ob.state.compare_exchange_strong(s, posted(send.peer), std::memory_order_seq_cst)) throw LinkAborted{};
  me.send_posted = true;
  me.posted_in = k;
  me.staged_to[k] = send.peer;
  if (copied) {
    ring(inbox_[slot(send.peer)]);
    for (std::size_t at = 0; stream && at < bytes; at += kStreamChunkBytes) {
      std::memcpy(copy + at, me.send_data + at, std::min(kStreamChunkBytes, bytes - at));
      ob.streamed.fetch_add(1, std::memory_order_release);
    }
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
  Outbox& ob = outbox(slot(c.rank));  // not with staged sends: one outbox
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
  Outbox& ob = outbox(slot(c.rank), own(c).posted_in);
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
      read_copy(c, ob);
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

void LinkEngine::read_copy(LinkRank& c, const Outbox& ob) {
  const Transfer& recv = c.receiving;
  const std::byte* from = arena_.address(ob.data);
  const std::uint64_t bytes = recv.count * c.eb;
  std::uint64_t done = 0;  // elements
  auto written = [&] {
    const std::uint16_t chunks = ob.streamed.load(std::memory_order_acquire);
    return chunks == kWholeCopy ? bytes : std::min<std::uint64_t>(chunks * std::uint64_t{kStreamChunkBytes}, bytes);
  };
  auto last = std::chrono::steady_clock::now();
  for (std::uint64_t polls = 0; done < recv.count; ++polls) {
    const std::uint64_t ready = c.eb == 0 ? recv.count : written() / c.eb;
    if (ready > done) {
      apply_received(c, c.recv_target + done * c.eb, from + done * c.eb, ready - done, c.recv_side);
      done = ready;
      polls = 0;
      continue;
    }
    if (aborted()) throw LinkAborted{};
    if (polls % 64 == 63) std::this_thread::yield();
    if (polls % 4096 != 4095) continue;
    // Stalled: a sender that copies on its own core writes a chunk in microseconds.
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(100)) continue;
    last = now;
    if (settings_.peer_gone)
      if (const std::string gone = settings_.peer_gone(recv.peer); !gone.empty())
        throw SystemError(settings_.layout.describe(c.rank) + " was reading the " + std::to_string(bytes) +
                          "-byte message of " + settings_.layout.describe(recv.peer) +
                          " while it was written into its stage: " + gone);
  }
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
    // Combining: chunk by chunk through the rank's bounce buffer, which
    // stays in the cache, of whole elements.
    std::vector<std::byte>& bounce = own(c).bounce;
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
  c.begin_recv(recv, target, side);
  if (config_.staged_sends) {
    (void)try_pull(c);
    return;
  }
  Outbox& ob = outbox(slot(recv.peer));  // a rendezvous: the first outbox
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

// Staged sends: pull the sender's next send to us (by its number, among its
// outboxes; link_words.hpp's "Stage slots") once it is posted.
bool LinkEngine::try_pull(LinkRank& c) {
  const std::size_t from = slot(c.receiving.peer);
  const std::uint32_t for_me = posted(c.rank);
  RankState& me = own(c);
  // Read the bell first: a post after this read rings it, so a block() on
  // this value cannot miss it.
  me.recv_bell = inbox_[slot(c.rank)].bell.load(std::memory_order_seq_cst);
  const std::uint32_t seq = me.received[from] + 1;
  // Two looks at most: a newer post seen in the first means ours was posted
  // before it, and the second sees ours.
  for (bool newer = true; newer;) {
    newer = false;
    for (int k = 0; k < stage_slots_; ++k) {
      Outbox& ob = outbox(from, k);
      if (ob.state.load(std::memory_order_seq_cst) != for_me) continue;
      // Posted for us: only we move it on (but an abort), so its number holds.
      if (ob.seq != seq) {
        newer = true;
        continue;
      }
      std::uint32_t expected = for_me;
      if (!ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_seq_cst)) break;  // aborted
      me.received[from] = seq;
      pull(c, ob);
      return true;
    }
  }
  if (aborted()) throw LinkAborted{};
  return false;
}

bool LinkEngine::test_recv(LinkRank& c) {
  if (c.recv_done) return true;
  if (config_.staged_sends) return try_pull(c);
  const Transfer& recv = c.receiving;
  Outbox& ob = outbox(slot(recv.peer));
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
      const int k = busy_outbox(c);
      if (k < 0 || (outbox(slot(c.rank), k).state.load(std::memory_order_seq_cst) & kAbortBit)) return;
    }
    (void)wait_while_equal(ib.bell, own(c).recv_bell, policy, scope_, &ib.bell_sleepers, spin());
    return;
  }
  // The ack of the posted send, or the outbox a send waits for.
  const int k = own(c).send_posted ? own(c).posted_in : busy_outbox(c);
  if (k < 0) return;
  Outbox& ob = outbox(slot(c.rank), k);
  const std::uint32_t s = ob.state.load(std::memory_order_acquire);
  if (s != kIdle && !(s & kAbortBit)) (void)wait_while_equal(ob.state, s, policy, scope_, &ob.state_sleepers, spin());
}

}  // namespace copse
