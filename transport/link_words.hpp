#pragma once
// The shared-memory link's words in the node arena (transport/link_engine.hpp):
// their states and layout, shared by the engine's set-up and barrier
// (link_engine.cpp) and its transfer protocol (link_protocol.cpp). Private to
// those two files.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/link_engine.hpp"

namespace copse {

// ---- link words ---------------------------------------------------------------
//
// A transfer is a rendezvous, and whichever side arrives second moves the data
// (one copy, straight between the two ranks' buffers), so the first to arrive
// sleeps at most once and the second never does (except for large messages
// between thread ranks that each have a core: see deliver_if_waited_for):
//
//  - A rendezvous goes through the rank's first outbox (it has at most one
//    such send outstanding, so FIFO order per (source, destination) pair
//    holds trivially; staged sends use all of them, see "Stage slots"
//    below). A sender publishes
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
// or its part of the sender's stage and is done at once; the receiver claims
// the post, pulls the copy and releases the outbox to idle, ringing the
// sender's bell (the sender's next send may wait for that outbox while it
// sleeps there).
//
// Stage slots (staged sends): a rank owns kStageSlots outboxes, and its
// stage is cut into as many equal parts, one per outbox. A send takes the
// outbox of the last post again if its receiver has taken it (its part is
// still in the cache), else the next in turn, so a send waits only for the
// receiver of the post kStageSlots sends back -- not, as with one outbox,
// for the receiver of the one just before: a root's sends to its children, a pipeline's
// consecutive blocks to one successor, and the first sends of a call after
// the last ones of the call before overlap their receivers' pulls. A post
// that does not fit a part (bigger than stage / kStageSlots) takes the
// whole stage: it waits until every outbox is idle, and the next post into
// the stage waits until it is taken. Per (sender, receiver) pair both
// count the posts (RankState::sent and received), and a post carries its
// number (outbox.seq), so a receiver that finds two posts for it takes the
// older one. Finding only a newer one (its older one was posted first, but
// the receiver looked at that outbox before it was), it looks again: the
// older post is visible by then, since it precedes the newer one it saw.
// Say rank 0 sends to rank 1 blocks a, b, c, each a copy, before rank 1
// pulls: a goes to outbox 0 (seq 1), b to outbox 1 (seq 2), both done at
// once; c waits for outbox 0, i.e. for rank 1 to pull a; rank 1 pulls seq 1
// from outbox 0, then seq 2 from outbox 1, then seq 3 (c) from outbox 0.
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
// Streamed copies (staged sends, while the node's ranks fit its cores): a
// copy of more than kStreamChunkBytes into the stage is posted first and
// written after, a chunk at a time, each counted in outbox.streamed; its
// receiver, claiming it at once, copies (or combines) each chunk as soon as
// it is counted, so that the two copies of a message overlap on two cores
// instead of following each other (np 2, an exchange of 512 KiB: each
// rank's send copy, then its receive copy). The receiver waits only for a
// sender that is copying on a core of its own, so it spins, yielding now
// and then, and checks that the sender's process still lives when the
// count stalls. The send is done once written, as any copy.
//
// kAbortBit is sticky: once a run fails it is OR-ed into every outbox state and
// barrier word, so every CAS of the protocol fails and every sleeper wakes.
// Data pointers in the words are arena offsets (see arena.hpp), but for an
// attached send's, which is an address in the sender's process.
namespace link_words {

constexpr std::uint32_t kIdle = 0;
constexpr std::uint32_t kClaimed = 2;     // outbox: the receiver is pulling the data
constexpr std::uint32_t kDone = 2;        // inbox: the sender has delivered
constexpr std::uint32_t kDelivering = 3;  // inbox: the sender is delivering
constexpr std::uint32_t kAbortBit = 0x80000000U;
// Outboxes per rank: sends from the stage overlap this many deep (see
// "Stage slots" above); rendezvous transfers use the first one only.
constexpr int kStageSlots = LinkEngine::kStageSlots;
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
// Streamed copies (above) are written and counted in chunks of this size;
// a stage holds at most 2^14 of them (1 GiB), below kWholeCopy.
constexpr std::size_t kStreamChunkBytes = 64 << 10;
constexpr std::uint16_t kWholeCopy = 0xFFFF;
constexpr std::uint32_t posted(int peer) { return (static_cast<std::uint32_t>(peer) << 2) | 1U; }
constexpr bool is_posted(std::uint32_t s) { return (s & 3U) == 1U; }

static_assert(std::atomic<std::uint16_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "link words live in shared memory: their atomics must be lock-free");

}  // namespace link_words

using namespace link_words;  // a private header: only the link engine's sources include it

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
  // A copy into the stage: how many kStreamChunkBytes of it the sender has
  // written (a streamed copy, posted before it is written: see "Streamed
  // copies" above), or kWholeCopy for a copy written before its post.
  std::atomic<std::uint16_t> streamed{kWholeCopy};
  // Written by the sender before posting, with staged sends: the post's
  // number among the sender's posts to its receiver (1, 2, ...; see
  // "Stage slots" above), so that the receiver takes them in order.
  std::uint32_t seq = 0;
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
  // Followed by Outbox[ranks * kStageSlots] (rank r's k-th at r * kStageSlots + k),
  // Inbox[ranks], Progress[ranks].
};

}  // namespace copse
