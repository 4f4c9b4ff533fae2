#include "transport/direct_gather.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/schedule.hpp"

namespace copse {

using Reads = DirectReduce::Reads;

std::size_t SlotCall::posts(int ranks) const {
  const std::size_t bytes = count * element_bytes;
  switch (collective) {
    case Collective::reduce_scatter: return total * element_bytes;
    case Collective::scatter:
    case Collective::alltoall: return static_cast<std::size_t>(ranks) * bytes;
    default: return bytes;
  }
}

Reads SlotCall::reads(int rank) const {
  switch (collective) {
    // Only the root reads: the others post and go.
    case Collective::reduce:
    case Collective::gather: return rank == root ? Reads::every_post : Reads::nothing;
    // The root reads nothing and goes; the others wait for its post alone.
    case Collective::scatter:
    case Collective::bcast: return rank == root ? Reads::nothing : Reads::roots_post;
    default: return Reads::every_post;
  }
}

std::uint32_t start_slot_call(DirectReduce& slots, DirectRank& me, const SlotCall& c, const WaitPolicy& policy) {
  // A scatter's or broadcast's only data is the root's: the others post its size alone.
  const bool roots_data = c.collective == Collective::scatter || c.collective == Collective::bcast;
  const std::byte* vector = roots_data && me.rank != c.root ? nullptr : c.send;
  if (c.by_address) return slots.share(me, c.collective, vector, c.posts(slots.ranks()), policy, c.root);
  return slots.post_exchange(me, c.collective, vector, c.posts(slots.ranks()), c.root, policy);
}

bool slot_call_ready(const DirectReduce& slots, const DirectRank& me, std::uint32_t call, const SlotCall& c) {
  if (c.by_address && me.rank == c.root) return slots.all_released(me, call);
  return slots.exchange_posted(me, call, c.reads(me.rank), c.root);
}

std::size_t finish_slot_call(DirectReduce& slots, DirectRank& me, std::uint32_t call, const SlotCall& c,
                             const WaitPolicy& policy) {
  const int p = slots.ranks();
  const std::size_t eb = c.element_bytes, bytes = c.count * eb;
  slots.await_exchange(me, call, c.collective, c.posts(p), eb, policy, c.root, c.reads(me.rank));
  const auto me_at = static_cast<std::size_t>(me.rank) * bytes;
  switch (c.collective) {
    case Collective::barrier: return 0;
    case Collective::allreduce:
      if (bytes > 0) slots.fold_posts(call, 0, c.count, *c.op, c.recv);
      return 0;
    case Collective::reduce_scatter:  // our block, as the direct allreduce reduces the whole
      if (bytes > 0) slots.fold_posts(call, c.from, c.count, *c.op, c.recv);
      return 0;
    case Collective::reduce:
      if (me.rank == c.root && bytes > 0) slots.fold_posts(call, 0, c.count, *c.op, c.recv);
      return 0;
    case Collective::bcast:
      if (c.by_address && me.rank == c.root) {
        slots.await_released(me, call, policy);  // its buffer is read where it lies
        return 0;
      }
      if (c.by_address) {
        const std::size_t read = slots.read_shared(c.root, call, 0, bytes, c.recv);
        slots.release(me, call);
        return read;
      }
      if (me.rank != c.root && bytes > 0) std::memcpy(c.recv, slots.posted(c.root, call), bytes);
      return 0;
    case Collective::allgather:
    case Collective::gather:
      if (bytes == 0 || (c.collective == Collective::gather && me.rank != c.root)) return 0;
      for (int q = 0; q < p; ++q) {
        std::byte* block = c.recv + static_cast<std::size_t>(q) * bytes;
        // Our own block from `send` (in place: there already); memmove, as
        // a caller's send may overlap its receive vector.
        const std::byte* from = q == me.rank ? c.send : slots.posted(q, call);
        if (from != block) std::memmove(block, from, bytes);
      }
      return 0;
    case Collective::scatter:
      if (bytes == 0 || (me.rank == c.root && c.recv == c.send)) return 0;  // in place at the root: it stays
      std::memmove(c.recv, me.rank == c.root ? c.send + me_at : slots.posted(c.root, call) + me_at, bytes);
      return 0;
    case Collective::alltoall:
      for (int q = 0; bytes > 0 && q < p; ++q)
        std::memcpy(c.recv + static_cast<std::size_t>(q) * bytes, slots.posted(q, call) + me_at, bytes);
      return 0;
  }
  return 0;
}

void direct_allgather(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv, std::size_t count,
                      std::size_t element_bytes, const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::allgather, mine, recv, count, element_bytes}, policy);
}

void direct_reduce_scatter(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                           std::size_t total, std::size_t from, std::size_t count, const ReduceOp& op,
                           const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::reduce_scatter, send, recv, count, op.element_bytes, -1, &op, total, from},
                policy);
}

void direct_reduce(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                   int root, const ReduceOp& op, const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::reduce, send, recv, count, op.element_bytes, root, &op}, policy);
}

void direct_gather(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv, std::size_t count,
                   std::size_t element_bytes, int root, const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::gather, mine, recv, count, element_bytes, root}, policy);
}

void direct_scatter(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                    std::size_t element_bytes, int root, const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::scatter, send, recv, count, element_bytes, root}, policy);
}

void direct_alltoall(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                     std::size_t element_bytes, const WaitPolicy& policy) {
  run_slot_call(slots, me, {Collective::alltoall, send, recv, count, element_bytes}, policy);
}

std::size_t direct_allgather_by_address(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv,
                                        std::size_t count, std::size_t element_bytes, const WaitPolicy& policy) {
  const std::size_t bytes = count * element_bytes;
  const std::uint32_t call = slots.share(me, Collective::allgather, mine, bytes, policy);
  slots.await_shares(me, call, Collective::allgather, bytes, element_bytes, policy);
  std::size_t attached = 0;
  const int p = slots.ranks();
  for (int k = 0; k < p && bytes > 0; ++k) {
    const int q = (me.rank + k) % p;  // ourselves first, then from the right neighbour on
    std::byte* block = recv + static_cast<std::size_t>(q) * bytes;
    if (q != me.rank)
      attached += slots.read_shared(q, call, 0, bytes, block);
    else if (mine != block)
      std::memmove(block, mine, bytes);  // in place it is there already
  }
  slots.release(me, call);
  slots.await_released(me, call, policy);
  return attached;
}

std::size_t direct_gather_by_address(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv,
                                     std::size_t count, std::size_t element_bytes, int root, const WaitPolicy& policy) {
  const std::size_t bytes = count * element_bytes;
  const std::uint32_t call = slots.share(me, Collective::gather, mine, bytes, policy, root);
  if (me.rank != root) {
    slots.await_released(me, call, policy, root);
    return 0;
  }
  slots.await_shares(me, call, Collective::gather, bytes, element_bytes, policy, root);
  std::size_t attached = 0;
  for (int q = 0; q < slots.ranks() && bytes > 0; ++q) {
    std::byte* block = recv + static_cast<std::size_t>(q) * bytes;
    if (q != root)
      attached += slots.read_shared(q, call, 0, bytes, block);
    else if (mine != block)
      std::memmove(block, mine, bytes);
  }
  slots.release(me, call);
  return attached;
}

std::size_t direct_scatter_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                      std::size_t count, std::size_t element_bytes, int root,
                                      const WaitPolicy& policy) {
  const std::size_t bytes = count * element_bytes;
  const bool at_root = me.rank == root;
  // A scatter's only vector is the root's: the others post no address.
  const std::uint32_t call = slots.share(me, Collective::scatter, at_root ? send : nullptr, bytes, policy, root);
  slots.await_shares(me, call, Collective::scatter, bytes, element_bytes, policy, root);
  std::size_t attached = 0;
  if (!at_root)
    attached = slots.read_shared(root, call, static_cast<std::size_t>(me.rank) * bytes, bytes, recv);
  else if (recv != send && bytes > 0)
    std::memmove(recv, send + static_cast<std::size_t>(root) * bytes, bytes);
  slots.release(me, call);
  if (at_root) slots.await_released(me, call, policy);
  return attached;
}

std::size_t direct_alltoall_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                       std::size_t count, std::size_t element_bytes, const WaitPolicy& policy) {
  const std::size_t bytes = count * element_bytes;
  const std::uint32_t call = slots.share(me, Collective::alltoall, send, bytes, policy);
  slots.await_shares(me, call, Collective::alltoall, bytes, element_bytes, policy);
  const int p = slots.ranks();
  const std::size_t mine = static_cast<std::size_t>(me.rank) * bytes;  // our block of every vector
  std::size_t attached = 0;
  for (int k = 0; k < p && bytes > 0; ++k) {
    const int q = (me.rank + k) % p;  // ourselves first, then from the right neighbour on
    std::byte* block = recv + static_cast<std::size_t>(q) * bytes;
    if (q != me.rank)
      attached += slots.read_shared(q, call, mine, bytes, block);
    else
      std::memcpy(block, send + mine, bytes);
  }
  slots.release(me, call);
  slots.await_released(me, call, policy);
  return attached;
}

namespace {

// A load from a few bytes before an earlier, still pending store's address,
// modulo a page, stalls until the store completes: the core matches loads
// to pending stores by their address within 4 KiB, and a 32-byte vector
// that overlaps one in part cannot be forwarded. So memcpy and the combines
// run several times slower where the vector they write lies 1-31 bytes past
// one they read, modulo 4 KiB -- as two threads' vectors allocated alike do.
// Measured (thread Comm, T = 2, reduce-scatter of 128 KiB, float sums, us
// per call by median): recv 4-28 bytes past the inputs 27-47, 0 or 32-272
// bytes past, or 4-240 before, 6.8-9.0; the ring schedule 8.7-13.4.
constexpr std::uintptr_t kAliasPage = 4096, kAliasVector = 32, kAliasStep = 64;
bool stalls(const std::byte* store, const std::byte* load) {
  const std::uintptr_t past =
      (reinterpret_cast<std::uintptr_t>(store) - reinterpret_cast<std::uintptr_t>(load)) % kAliasPage;
  return past != 0 && past < kAliasVector;
}

// recv[0, count) = x_0 ⊙ x_1 ⊙ ... ⊙ x_{T-1} over elements [from, from +
// count) of every rank's shared input of `call`, `send` being rank me's own
// input (recv may be send only with from = 0: a reduce's root in place);
// returns the bytes read from other processes. Chunk by chunk, each rank's
// chunk read into `bounce` (two halves: a chunk read and, in place at a
// rank other than 0, the chunk's sum) or, among threads, used where it is.
//
// Worked for T = 3, me = 1, in place (send == recv), a chunk of 4 elements:
// per chunk me reads x_1's four elements -- its own, still in recv -- into
// the bounce's first half (the sum), reads x_0's into the second half and
// combines them from the left (x_0 ⊙ x_1), then reads x_2's and combines
// them from the right; only then does the sum overwrite recv's four
// elements. Not in place the sum builds in recv itself, x_1 read straight
// into it: at T = 2 the work per chunk is one read and one combine, no
// copy. In place at rank 0, recv starts as x_0 and the others are combined
// from the right. Where recv lies just past an input (stalls()), the sum
// builds in the bounce too, at a place that lies just past none.
std::size_t fold_shared(DirectReduce& slots, std::uint32_t call, int me, const std::byte* send, std::byte* recv,
                        std::size_t from, std::size_t count, const ReduceOp& op, std::span<std::byte> bounce) {
  const std::size_t eb = op.element_bytes;
  const int p = slots.ranks();
  const bool x0_in_recv = send == recv && me == 0;
  bool in_recv = send != recv || me == 0;
  // Each half keeps a page to move its start in (the chunks, a whole
  // number of pages, then keep the same places modulo a page).
  const std::size_t half = bounce.size() / 2;
  const std::size_t slack = half >= 2 * kAliasPage ? kAliasPage : 0;
  std::byte* read_chunk = bounce.data() + half;
  if (slack && stalls(recv, read_chunk)) read_chunk += kAliasStep;
  // Rank q's elements from byte `offset` where they lie in this process
  // (ours, or a thread's); null for another process's, read into a chunk.
  auto local = [&](int q, std::size_t offset) -> const std::byte* {
    if (q == me) return send + offset;
    if (const std::byte* x = slots.shared_input(q, call)) return x + offset;
    return nullptr;
  };
  // Whether a store to `store` stalls a load of the first chunk's inputs.
  auto stalls_any = [&](const std::byte* store) {
    for (int q = 0; q < p; ++q) {
      const std::byte* x = local(q, from * eb);
      if (stalls(store, x ? x : read_chunk)) return true;
    }
    return false;
  };
  if (in_recv && slack && stalls_any(recv)) in_recv = false;
  std::byte* sum_chunk = bounce.data();
  for (std::uintptr_t shift = 0; !in_recv && shift < slack; shift += kAliasStep)
    if (!stalls_any(bounce.data() + shift) && !stalls(recv, bounce.data() + shift)) {
      sum_chunk = bounce.data() + shift;
      break;
    }
  const std::size_t per = std::max<std::size_t>((half - slack) / std::max<std::size_t>(eb, 1), 1);
  std::size_t attached = 0;
  for (std::size_t at = 0; at < count; at += per) {
    const std::size_t n = std::min(per, count - at), offset = (from + at) * eb;
    // Rank q's elements of the chunk: where they lie, or read into `to`.
    auto input = [&](int q, std::byte* to) -> const std::byte* {
      if (const std::byte* x = local(q, offset)) return x;
      attached += slots.read_shared(q, call, offset, n * eb, to);
      return to;
    };
    std::byte* acc = in_recv ? recv + at * eb : sum_chunk;
    const int first = p == 1 || x0_in_recv ? 0 : 1;  // the rank whose elements start the sum
    if (const std::byte* x = input(first, acc); x != acc) std::memcpy(acc, x, n * eb);
    if (first == 1) op.combine(acc, input(0, read_chunk), n, Combine::left);
    for (int q = first + 1; q < p; ++q) op.combine(acc, input(q, read_chunk), n, Combine::right);
    if (acc != recv + at * eb) std::memcpy(recv + at * eb, acc, n * eb);
  }
  return attached;
}

}  // namespace

std::size_t direct_reduce_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                                     std::size_t count, int root, const ReduceOp& op, std::span<std::byte> bounce,
                                     const WaitPolicy& policy) {
  const std::size_t eb = op.element_bytes;
  const std::uint32_t call = slots.share(me, Collective::reduce, send, count * eb, policy, root);
  if (me.rank != root) {
    slots.await_released(me, call, policy, root);
    return 0;
  }
  slots.await_shares(me, call, Collective::reduce, count * eb, eb, policy, root);
  const std::size_t attached = fold_shared(slots, call, root, send, recv, 0, count, op, bounce);
  slots.release(me, call);
  return attached;
}

std::size_t direct_reduce_scatter_by_address(DirectReduce& slots, DirectRank& me, const std::byte* send,
                                             std::byte* recv, std::size_t total, std::size_t from, std::size_t count,
                                             const ReduceOp& op, std::span<std::byte> bounce,
                                             const WaitPolicy& policy) {
  const std::size_t eb = op.element_bytes;
  const std::uint32_t call = slots.share(me, Collective::reduce_scatter, send, total * eb, policy);
  slots.await_shares(me, call, Collective::reduce_scatter, total * eb, eb, policy);
  const std::size_t attached = fold_shared(slots, call, me.rank, send, recv, from, count, op, bounce);
  slots.release(me, call);
  slots.await_released(me, call, policy);
  return attached;
}

}  // namespace copse
