#include "intranode/direct_reduce.hpp"

#include <atomic>
#include <cstring>
#include <new>

#include "common/error.hpp"

namespace copse {

namespace {
constexpr std::size_t kBuffers = 2;  // call n uses buffer n % 2 (see the header)
}  // namespace

// A rank's word: the last call it has posted (its slot holds that call's
// vector), on a cache line of its own that its peers poll.
struct alignas(64) DirectReduce::Slot {
  std::atomic<std::uint32_t> posted{0};
  std::atomic<std::uint32_t> sleepers{0};
  // The size of the vector in each buffer, written before `posted` (and,
  // like the buffer, not rewritten while a peer may read it).
  std::uint64_t bytes[kBuffers] = {0, 0};
};

Arena::Offset DirectReduce::create_shared(Arena& arena, int ranks) {
  if (ranks < 1 || ranks > kMaxRanks)
    throw UsageError("the direct reduce serves 1 to " + std::to_string(kMaxRanks) + " ranks, not " +
                     std::to_string(ranks));
  const auto p = static_cast<std::size_t>(ranks);
  const Arena::Offset at = arena.allocate(shared_bytes(ranks), 64);
  std::byte* base = arena.address(at);
  for (std::size_t r = 0; r < p; ++r) new (base + r * sizeof(Slot)) Slot{};
  return at;
}

std::size_t DirectReduce::shared_bytes(int ranks) {
  return static_cast<std::size_t>(ranks < 0 ? 0 : ranks) * (sizeof(Slot) + kBuffers * kSlotBytes);
}

DirectReduce::DirectReduce(Arena& arena, Arena::Offset shared, int ranks, const SpinPolicy* spin)
    : ranks_(ranks), scope_(arena.cross_process() ? FutexScope::shared : FutexScope::process), spin_(spin) {
  std::byte* base = arena.address(shared);
  slots_ = std::launder(reinterpret_cast<Slot*>(base));
  data_ = base + static_cast<std::size_t>(ranks) * sizeof(Slot);
}

std::byte* DirectReduce::data(int rank, std::uint32_t call) const {
  return data_ + (static_cast<std::size_t>(rank) * kBuffers + call % kBuffers) * kSlotBytes;
}

void DirectReduce::allreduce(DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                             const ReduceOp* op, const WaitPolicy& policy) {
  const std::size_t eb = op ? op->element_bytes : 0;
  const std::size_t bytes = count * eb;
  if (bytes > kSlotBytes)
    throw UsageError("the direct reduce takes at most " + std::to_string(kSlotBytes) + " bytes, not " +
                     std::to_string(bytes));
  const std::uint32_t call = ++me.calls;
  Slot& mine = slots_[me.rank];
  if (bytes > 0) std::memcpy(data(me.rank, call), send, bytes);
  mine.bytes[call % kBuffers] = bytes;
  mine.posted.store(call, std::memory_order_release);
  wake_all(mine.posted, scope_, &mine.sleepers);

  // Every peer's post of this call (or a later one: a peer that has read
  // ours may be ahead by one, writing its other buffer).
  for (int q = 0; q < ranks_; ++q) {
    if (q == me.rank) continue;
    Slot& peer = slots_[q];
    std::uint32_t seen = peer.posted.load(std::memory_order_acquire);
    if (static_cast<std::int32_t>(seen - call) < 0) {
      me.waiting_for = q;
      me.wait_started = std::chrono::steady_clock::now();
      while (static_cast<std::int32_t>(seen - call) < 0)
        seen = wait_while_equal(peer.posted, seen, policy, scope_, &peer.sleepers, spin_);
      me.waiting_for = -1;
    }
    if (peer.bytes[call % kBuffers] != bytes) {
      auto size = [eb](std::uint64_t b) {
        return eb > 0 && b % eb == 0 ? std::to_string(b / eb) + " elements" : std::to_string(b) + " bytes";
      };
      throw ScheduleError("size mismatch in direct reduce " + std::to_string(call) + ": rank " + std::to_string(q) +
                          " reduces " + size(peer.bytes[call % kBuffers]) + ", rank " + std::to_string(me.rank) +
                          " reduces " + size(bytes));
    }
  }
  if (bytes == 0) return;

  // x_0 ⊙ x_1 ⊙ ... in rank order, on every rank alike.
  std::memcpy(recv, data(0, call), bytes);
  for (int q = 1; q < ranks_; ++q) op->combine(recv, data(q, call), count, Combine::right);
}

}  // namespace copse
