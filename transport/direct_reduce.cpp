#include "transport/direct_reduce.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace copse {

namespace {
constexpr std::size_t kBuffers = 2;  // call n uses buffer n % 2 (see the header)
}  // namespace

// A rank's words. The first cache line is what a peer reads for every call
// of the slots: the last call the rank has posted, each buffer's size,
// collective and root, and a vector of up to kInlineBytes itself -- so that
// a small allreduce's post crosses from one core to the other as one line,
// not as this line and a line of the data buffers (np 2 under mpirun,
// 8-byte float sums back to back, six alternated launches: 0.18 us per call
// in most, against 0.22-0.25 with the data apart and Open MPI's 0.25). The
// second holds the sliced calls' words, polled only by those calls, and the
// addresses of a call by address. Per buffer (call parity), everything is
// written before `posted` and, like the buffer, not rewritten while a peer
// may read it.
struct alignas(64) DirectReduce::Slot {
  std::atomic<std::uint32_t> posted{0};
  std::atomic<std::uint32_t> sleepers{0};
  std::uint64_t bytes[kBuffers] = {0, 0};
  std::int8_t root[kBuffers] = {-1, -1};  // a reduce's (else -1): ranks that disagree are an error
  std::uint8_t collective[kBuffers] = {static_cast<std::uint8_t>(Collective::barrier),
                                       static_cast<std::uint8_t>(Collective::barrier)};  // a mixed-up call is an error
  alignas(16) std::byte small[kBuffers][kInlineBytes] = {};  // the vector, where it fits (DirectReduce::data)

  alignas(64) std::atomic<std::uint32_t> sliced{0};  // the last call whose slice the rank has reduced
  std::atomic<std::uint32_t> sliced_sleepers{0};
  std::atomic<std::uint32_t> gathered{0};  // ... whose slices it has copied, or whose inputs it has read
  std::atomic<std::uint32_t> gathered_sleepers{0};
  const std::byte* input[kBuffers] = {nullptr, nullptr};  // a call by address or in slices: the rank's vectors
  std::byte* output[kBuffers] = {nullptr, nullptr};
  std::int32_t pid = 0;  // the process of `input` (a call by address, share())
};

Arena::Offset DirectReduce::create_shared(Arena& arena, int ranks) {
  static_assert(offsetof(Slot, sliced) == 64, "a small call's words and vector share one cache line");
  static_assert(kMaxRanks <= 127, "roots fit the slot's int8");
  if (!serves(ranks))
    throw UsageError("the direct reduce serves 1 to " + std::to_string(kMaxRanks) + " ranks, not " +
                     std::to_string(ranks));
  const auto p = static_cast<std::size_t>(ranks);
  const Arena::Offset at = arena.allocate(shared_bytes(ranks), 64);
  std::byte* base = arena.address(at);
  for (std::size_t r = 0; r < p; ++r) new (base + r * sizeof(Slot)) Slot{};
  DirectBcast::create_at(base + reduce_bytes(ranks), ranks);
  return at;
}

// The slots and their buffers (a multiple of 64 bytes), then the broadcast's ring.
std::size_t DirectReduce::reduce_bytes(int ranks) {
  return static_cast<std::size_t>(ranks < 0 ? 0 : ranks) * (sizeof(Slot) + kBuffers * kPostBytes);
}
std::size_t DirectReduce::shared_bytes(int ranks) { return reduce_bytes(ranks) + DirectBcast::shared_bytes(ranks); }

DirectReduce::DirectReduce(Arena& arena, Arena::Offset shared, int ranks, const SpinPolicy* spin)
    : ranks_(ranks),
      scope_(arena.cross_process() ? FutexScope::shared : FutexScope::process),
      one_process_(!arena.cross_process()),
      pid_(static_cast<std::int32_t>(getpid())),
      spin_(spin),
      bcast_(arena.address(shared) + reduce_bytes(ranks), ranks, scope_, spin) {
  std::byte* base = arena.address(shared);
  slots_ = std::launder(reinterpret_cast<Slot*>(base));
  data_ = base + static_cast<std::size_t>(ranks) * sizeof(Slot);
}

void DirectReduce::post(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers, std::uint32_t call) {
  word.store(call, std::memory_order_release);
  wake_all(word, scope_, &sleepers);
}

void DirectReduce::await_all(DirectRank& me, Word word, Word sleepers, std::uint32_t call, const char* what,
                             const WaitPolicy& policy) {
  // A peer may be ahead by one call (it has seen all of this one), never
  // more: it cannot finish its next call before we post ours.
  for (int q = 0; q < ranks_; ++q) {
    if (q == me.rank) continue;
    Slot& peer = slots_[q];
    await_sequence(me, peer.*word, peer.*sleepers, call, q, what, policy, scope_, spin_);
  }
}

void DirectReduce::await_posts(DirectRank& me, std::uint32_t call, Collective c, std::uint64_t bytes, std::size_t eb,
                               const WaitPolicy& policy, int root, int only) {
  if (only < 0) {
    await_all(me, &Slot::posted, &Slot::sleepers, call, "to post its vector", policy);
    me.settled = call;
  } else if (only != me.rank) {
    await_sequence(me, slots_[only].posted, slots_[only].sleepers, call, only, "to post its vector", policy, scope_,
                   spin_);
  }
  const std::uint32_t b = call % kBuffers;
  for (int q = only < 0 ? 0 : only; q < (only < 0 ? ranks_ : only + 1); ++q) {
    const std::uint64_t theirs = slots_[q].bytes[b];
    const auto their_call = static_cast<Collective>(slots_[q].collective[b]);
    if (theirs == bytes && their_call == c && slots_[q].root[b] == root) continue;
    if (theirs == bytes && their_call == c)
      throw ScheduleError("mismatched roots in direct call " + std::to_string(call) + ": rank " + std::to_string(q) +
                          " reduces to root " + std::to_string(slots_[q].root[b]) + ", rank " +
                          std::to_string(me.rank) + " to root " + std::to_string(root));
    auto size = [eb](std::uint64_t n) {
      return eb > 0 && n % eb == 0 ? std::to_string(n / eb) + " elements" : std::to_string(n) + " bytes";
    };
    throw ScheduleError(std::string(their_call == c ? "size mismatch" : "mismatched calls") + " in direct call " +
                        std::to_string(call) + ": rank " + std::to_string(q) + " posts " + size(theirs) + " for " +
                        std::string(to_string(their_call)) + ", rank " + std::to_string(me.rank) + " " + size(bytes) +
                        " for " + std::string(to_string(c)));
  }
}

std::byte* DirectReduce::data(int rank, std::uint32_t call, std::uint64_t bytes) const {
  const std::uint32_t b = call % kBuffers;
  if (bytes <= kInlineBytes) return slots_[rank].small[b];
  return data_ + (static_cast<std::size_t>(rank) * kBuffers + b) * kPostBytes;
}

const std::byte* DirectReduce::posted(int rank, std::uint32_t call) const {
  return data(rank, call, slots_[rank].bytes[call % kBuffers]);
}

std::uint32_t DirectReduce::next_call(DirectRank& me, const WaitPolicy& policy) {
  if (me.settled != me.calls) {
    // The last call was one-sided: see every peer's post of it before this
    // call rewrites the buffers of the call before that (the header's rule).
    // Our own post says what it was; the peers' words for it stay put until
    // we post again.
    const std::uint32_t last = me.calls, b = last % kBuffers;
    const Slot& mine = slots_[me.rank];
    await_posts(me, last, static_cast<Collective>(mine.collective[b]), mine.bytes[b], 0, policy, mine.root[b]);
  }
  return ++me.calls;
}

std::uint32_t DirectReduce::post_vector(DirectRank& me, Collective c, const std::byte* vector, std::size_t bytes,
                                        int root, const WaitPolicy& policy, const std::byte* input) {
  if (bytes > kPostBytes)
    throw UsageError("the direct reduce's slots take at most " + std::to_string(kPostBytes) + " bytes, not " +
                     std::to_string(bytes));
  const std::uint32_t call = next_call(me, policy);
  if (bytes > 0 && vector) std::memcpy(data(me.rank, call, bytes), vector, bytes);
  announce(me, call, c, bytes, root, input);
  return call;
}

void DirectReduce::announce(DirectRank& me, std::uint32_t call, Collective c, std::uint64_t bytes, int root,
                            const std::byte* input, std::byte* output) {
  const std::uint32_t b = call % kBuffers;
  Slot& mine = slots_[me.rank];
  mine.bytes[b] = bytes;
  mine.collective[b] = static_cast<std::uint8_t>(c);
  mine.root[b] = static_cast<std::int8_t>(root);
  mine.input[b] = input;
  mine.output[b] = output;
  mine.pid = pid_;
  post(mine.posted, mine.sleepers, call);
}

std::uint32_t DirectReduce::share(DirectRank& me, Collective c, const std::byte* input, std::size_t bytes,
                                  const WaitPolicy& policy, int root) {
  const std::uint32_t call = next_call(me, policy);
  announce(me, call, c, bytes, root, input);
  return call;
}

std::uint32_t DirectReduce::share(DirectRank& me, Collective c, const std::byte* input, const std::byte* layout,
                                  std::size_t layout_bytes, int root, const WaitPolicy& policy) {
  return post_vector(me, c, layout, layout_bytes, root, policy, input);
}

const std::byte* DirectReduce::shared_input(int q, std::uint32_t call) const {
  return one_process_ ? slots_[q].input[call % kBuffers] : nullptr;
}

std::size_t DirectReduce::read_shared(int q, std::uint32_t call, std::size_t at, std::size_t n, std::byte* to) const {
  if (n == 0) return 0;  // an empty vector may have no address
  const Slot& peer = slots_[q];
  const std::uint32_t b = call % kBuffers;
  return read_from_peer(one_process_, peer.pid, peer.input[b] + at, to, n,
                        to_string(static_cast<Collective>(peer.collective[b])), "rank", q);
}

void DirectReduce::release(DirectRank& me, std::uint32_t call) {
  Slot& mine = slots_[me.rank];
  post(mine.gathered, mine.gathered_sleepers, call);
}

void DirectReduce::await_released(DirectRank& me, std::uint32_t call, const WaitPolicy& policy, int only) {
  if (only < 0) {
    await_all(me, &Slot::gathered, &Slot::gathered_sleepers, call, "to read the vectors", policy);
    return;
  }
  if (only != me.rank)
    await_sequence(me, slots_[only].gathered, slots_[only].gathered_sleepers, call, only, "to read the vectors", policy,
                   scope_, spin_);
}

std::uint32_t DirectReduce::exchange(DirectRank& me, Collective c, const std::byte* vector, std::size_t bytes,
                                     std::size_t element_bytes, const WaitPolicy& policy, int root, Reads reads) {
  const std::uint32_t call = post_vector(me, c, vector, bytes, root, policy);
  await_exchange(me, call, c, bytes, element_bytes, policy, root, reads);
  return call;
}

void DirectReduce::allreduce(DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                             const ReduceOp* op, const WaitPolicy& policy) {
  const std::size_t eb = op ? op->element_bytes : 0, bytes = count * eb;
  if (bytes > kSlotBytes)
    throw UsageError("the direct reduce takes at most " + std::to_string(kSlotBytes) + " bytes, not " +
                     std::to_string(bytes));
  const std::uint32_t call = exchange(me, op ? Collective::allreduce : Collective::barrier, send, bytes, eb, policy);
  if (bytes > 0) fold_posts(call, 0, count, *op, recv);
}

bool DirectReduce::posts_in(const DirectRank& me, std::uint32_t call, int only) const {
  return words_in(me, &Slot::posted, call, only);
}

bool DirectReduce::all_released(const DirectRank& me, std::uint32_t call) const {
  return words_in(me, &Slot::gathered, call, -1);
}

bool DirectReduce::words_in(const DirectRank& me, Word word, std::uint32_t call, int only) const {
  auto in = [&](int q) {
    return static_cast<std::int32_t>((slots_[q].*word).load(std::memory_order_acquire) - call) >= 0;
  };
  if (only >= 0) return only == me.rank || in(only);
  for (int q = 0; q < ranks_; ++q)
    if (q != me.rank && !in(q)) return false;
  return true;
}

void DirectReduce::fold_posts(std::uint32_t call, std::size_t from, std::size_t count, const ReduceOp& op,
                              std::byte* recv) const {
  const std::size_t at = from * op.element_bytes;
  std::memcpy(recv, posted(0, call) + at, count * op.element_bytes);
  for (int q = 1; q < ranks_; ++q) op.combine(recv, posted(q, call) + at, count, Combine::right);
}

// Worked for T = 3 and 7 elements: slices of 3, 2, 2 (BlockPartition).
// Rank 1 reduces elements 3 and 4: it copies x_0[3..5) into its receive
// vector and combines x_1[3..5), then x_2[3..5), from the right -- the
// sequential x_0 ⊙ x_1 ⊙ x_2, as the slots' path computes it, so a result
// has the same bits whichever path made it -- reading straight from the
// ranks' send vectors; once every slice is done it copies elements 0..2
// from rank 0's receive vector and 5, 6 from rank 2's. A rank reads only
// its own slice of its peers' send vectors, and its peers read only their
// slices of its receive vector, so in place (send == recv) nothing is
// overwritten while someone still needs it -- except the rank's own x_1,
// which the copy of x_0 would overwrite first: in place the slice is folded
// through a small buffer, a chunk at a time.
void DirectReduce::allreduce_sliced(DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                                    const ReduceOp& op, const WaitPolicy& policy) {
  if (!one_process_) throw UsageError("the direct reduce's sliced calls are for threads of one process");
  const std::size_t eb = op.element_bytes;
  const std::uint32_t call = next_call(me, policy);
  const std::uint32_t b = call % kBuffers;
  Slot& mine = slots_[me.rank];
  announce(me, call, Collective::allreduce, count * eb, -1, send, recv);
  await_posts(me, call, Collective::allreduce, count * eb, eb, policy);

  const BlockPartition slices(count, ranks_);
  // acc = x_0 ⊙ x_1 ⊙ ... over elements [from, from + len) of every input.
  auto fold = [&](std::byte* acc, std::size_t from, std::size_t len) {
    if (acc != slots_[0].input[b] + from * eb) std::memcpy(acc, slots_[0].input[b] + from * eb, len * eb);
    for (int q = 1; q < ranks_; ++q) op.combine(acc, slots_[q].input[b] + from * eb, len, Combine::right);
  };
  const std::size_t first = slices.offset(me.rank), n = slices.size(me.rank);
  if (n > 0 && (send != recv || me.rank == 0)) {
    fold(recv + first * eb, first, n);
  } else if (n > 0) {
    constexpr std::size_t kChunkBytes = 16 << 10;  // stays in the L1 cache
    alignas(64) std::byte chunk[kChunkBytes];
    std::vector<std::byte> large;  // an element larger than the chunk (a user's operator)
    std::byte* acc = chunk;
    std::size_t per = kChunkBytes / std::max<std::size_t>(eb, 1);
    if (per == 0) {
      large.resize(eb);
      acc = large.data();
      per = 1;
    }
    for (std::size_t done = 0; done < n; done += per) {
      const std::size_t len = std::min(per, n - done);
      fold(acc, first + done, len);
      std::memcpy(recv + (first + done) * eb, acc, len * eb);
    }
  }
  post(mine.sliced, mine.sliced_sleepers, call);
  await_all(me, &Slot::sliced, &Slot::sliced_sleepers, call, "to reduce its slice", policy);

  for (int q = 0; q < ranks_; ++q) {
    const std::uint64_t size = slices.size(q);
    if (q == me.rank || size == 0) continue;
    const std::size_t from = slices.offset(q) * eb;
    std::memcpy(recv + from, slots_[q].output[b] + from, size * eb);
  }
  // Nobody returns (and hands its vectors back to its caller) while a peer
  // may still read them.
  post(mine.gathered, mine.gathered_sleepers, call);
  await_all(me, &Slot::gathered, &Slot::gathered_sleepers, call, "to copy the other slices", policy);
}

}  // namespace copse
