#include "transport/direct_vector.hpp"

#include <array>
#include <cstring>
#include <string>

#include "common/error.hpp"

namespace copse {

namespace {

// Whether `reader` reads the input of `source` in a call of `c`.
bool reads(Collective c, int reader, int source, int root) {
  if (c == Collective::gather) return reader == root;
  if (c == Collective::scatter) return source == root;
  return true;  // allgather, alltoall: everyone's
}

const char* v_name(Collective c) {
  switch (c) {
    case Collective::allgather: return "allgatherv";
    case Collective::gather: return "gatherv";
    case Collective::scatter: return "scatterv";
    default: return "alltoallv";
  }
}

}  // namespace

std::size_t direct_vector_by_address(DirectReduce& slots, DirectRank& me, Collective c, int root,
                                     const std::byte* input, VectorLayout sent, std::byte* recv, VectorLayout received,
                                     const WaitPolicy& policy) {
  const int p = slots.ranks();
  const bool rooted = c == Collective::gather || c == Collective::scatter;
  const int call_root = rooted ? root : -1;
  // The layout every rank posts: its counts, then its displacements, one
  // entry for every receiver or one per receiver.
  const std::size_t entries = c == Collective::scatter || c == Collective::alltoall ? static_cast<std::size_t>(p) : 1;
  std::array<std::uint64_t, 2 * DirectReduce::kMaxRanks> layout{};
  const bool sends = !sent.counts.empty();
  for (std::size_t i = 0; sends && i < entries; ++i) {
    layout[i] = sent.counts[i];
    layout[entries + i] = sent.displs[i];
  }
  const std::size_t layout_bytes = 2 * entries * sizeof(std::uint64_t);
  const std::uint32_t call =
      slots.share(me, c, input, sends ? reinterpret_cast<const std::byte*>(layout.data()) : nullptr, layout_bytes,
                  call_root, policy);
  const bool receives = c != Collective::gather || me.rank == root;
  if (receives) slots.await_shares(me, call, c, layout_bytes, sizeof(std::uint64_t), policy, call_root);
  std::size_t attached = 0;
  // A block of another size than this rank expects is reported once the
  // call is over: its peers may be reading this rank's input until then.
  std::string mismatch;
  for (int k = 0; receives && k < p; ++k) {
    const int q = (me.rank + k) % p;  // ourselves first, then from the right neighbour on
    if (!reads(c, me.rank, q, root)) continue;
    std::uint64_t theirs[2];  // rank q's block for us: count, displacement
    const std::size_t entry = entries == 1 ? 0 : static_cast<std::size_t>(me.rank);
    std::memcpy(&theirs[0], slots.posted(q, call) + entry * sizeof(std::uint64_t), sizeof(std::uint64_t));
    std::memcpy(&theirs[1], slots.posted(q, call) + (entries + entry) * sizeof(std::uint64_t), sizeof(std::uint64_t));
    const auto from = static_cast<std::size_t>(q);
    if (theirs[0] != received.counts[from]) {
      if (mismatch.empty())
        mismatch = std::string(v_name(c)) + ": rank " + std::to_string(q) + " sends " + std::to_string(theirs[0]) +
                   " bytes to rank " + std::to_string(me.rank) + ", which expects " +
                   std::to_string(received.counts[from]);
      continue;
    }
    std::byte* to = recv + received.displs[from];
    if (q != me.rank)
      attached += slots.read_shared(q, call, theirs[1], theirs[0], to);
    else if (theirs[0] > 0 && input + theirs[1] != to)
      std::memmove(to, input + theirs[1], theirs[0]);
  }
  slots.release(me, call);
  // Nobody returns while a reader may still read its input.
  if (c == Collective::gather) {
    if (me.rank != root) slots.await_released(me, call, policy, root);
  } else if (c != Collective::scatter || me.rank == root) {
    slots.await_released(me, call, policy);
  }
  if (!mismatch.empty()) throw ScheduleError(mismatch);
  return attached;
}

}  // namespace copse
