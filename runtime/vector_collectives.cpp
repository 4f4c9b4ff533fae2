// The v-variants of Comm (runtime/communicator.hpp; issue 19): allgatherv,
// gatherv, scatterv and alltoallv, for the thread Comm and the MPI Comm alike
// since both are this one class. Each runs as its equal-block collective over
// blocks padded to the largest count, in private memory: the plan caches,
// the agreement with rank 0, the MPI Comm's pieces and windows and the
// hierarchy's numbering are then those of the equal-block collectives, which
// are proven and tuned. The price is the padding's bytes -- nothing when the
// counts are equal, up to p times the data when one rank has everything --
// and two copies. Serving them by the schedules with per-rank counts
// (algorithms/block_layout.hpp) needs plans keyed by the counts; that is left.
// MPI gives gatherv's and scatterv's counts to the root only and alltoallv's
// to each rank for its own blocks, so those three first agree on the largest
// count in one allreduce of one element (MAX), which every rank must learn
// the same; allgatherv's counts are every rank's.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/communicator.hpp"

namespace copse {

namespace {

// Blocks as a call describes them: counts, and displacements (packed when none given).
struct VectorBlocks {
  std::vector<std::uint64_t> counts, displs;
  std::uint64_t most = 0;

  VectorBlocks(const char* call, const int* counts_, const int* displs_, int ranks) {
    if (!counts_) throw UsageError(std::string(call) + ": counts is null");
    std::uint64_t at = 0;
    for (int v = 0; v < ranks; ++v) {
      if (counts_[v] < 0) throw UsageError(std::string(call) + ": rank " + std::to_string(v) + "'s count is negative");
      if (displs_ && displs_[v] < 0)
        throw UsageError(std::string(call) + ": rank " + std::to_string(v) + "'s displacement is negative");
      counts.push_back(static_cast<std::uint64_t>(counts_[v]));
      displs.push_back(displs_ ? static_cast<std::uint64_t>(displs_[v]) : at);
      at += counts.back();
      most = std::max(most, counts.back());
    }
  }
  // Copies block v between the user's layout and the padded one (blocks of `most`).
  void to_padded(const void* user, std::byte* padded, std::size_t v, std::size_t eb) const {
    copy(padded + v * most * eb, static_cast<const std::byte*>(user) + displs[v] * eb, counts[v] * eb);
  }
  void from_padded(const std::byte* padded, void* user, std::size_t v, std::size_t eb) const {
    copy(static_cast<std::byte*>(user) + displs[v] * eb, padded + v * most * eb, counts[v] * eb);
  }
  static void copy(void* to, const void* from, std::size_t bytes) {
    if (bytes > 0 && to != from) std::memmove(to, from, bytes);
  }
};

// The largest of every rank's `mine`.
std::uint64_t agreed_most(Comm& comm, std::uint64_t mine) {
  std::uint64_t most = 0;
  comm.allreduce(&mine, &most, 1, builtin_op("max", DType::uint64));
  return most;
}

}  // namespace

void Comm::allgatherv(const void* send, void* recv, const int* counts, const int* displs, DType dtype) {
  const VectorBlocks b("allgatherv", counts, displs, size());
  const std::size_t eb = dtype_size(dtype), p = static_cast<std::size_t>(size()), me = static_cast<std::size_t>(rank());
  if (b.most == 0) return;
  std::vector<std::byte> padded(p * b.most * eb);
  if (send == recv)
    b.to_padded(recv, padded.data(), me, eb);
  else
    VectorBlocks::copy(padded.data() + me * b.most * eb, send, b.counts[me] * eb);
  allgather(padded.data(), padded.data(), b.most, dtype);  // in place: this rank's block is in it
  for (std::size_t v = 0; v < p; ++v)
    if (v != me || send != recv) b.from_padded(padded.data(), recv, v, eb);
}

void Comm::gatherv(const void* send, std::size_t count, void* recv, const int* counts, const int* displs, DType dtype,
                   int root) {
  const bool at_root = rank() == root;
  const std::size_t eb = dtype_size(dtype), p = static_cast<std::size_t>(size()), me = static_cast<std::size_t>(rank());
  std::optional<VectorBlocks> b;
  if (at_root) b.emplace("gatherv", counts, displs, size());
  if (at_root && send != recv && count != b->counts[me])
    throw UsageError("gatherv: the root sends " + std::to_string(count) + " elements to itself but expects " +
                     std::to_string(b->counts[me]));
  const std::uint64_t most = agreed_most(*this, at_root ? b->most : count);
  if (most == 0) return;
  std::vector<std::byte> padded((at_root ? p : 1) * most * eb);
  std::byte* mine = padded.data() + (at_root ? me * most * eb : 0);
  if (at_root && send == recv)
    VectorBlocks::copy(mine, static_cast<const std::byte*>(recv) + b->displs[me] * eb, b->counts[me] * eb);
  else
    VectorBlocks::copy(mine, send, count * eb);
  // At the root in place: its block is already in the padded vector.
  gather(at_root ? padded.data() : mine, at_root ? padded.data() : nullptr, most, dtype, root);
  if (!at_root) return;
  b->most = most;
  for (std::size_t v = 0; v < p; ++v)
    if (v != me || send != recv) b->from_padded(padded.data(), recv, v, eb);
}

void Comm::scatterv(const void* send, const int* counts, const int* displs, void* recv, std::size_t count, DType dtype,
                    int root) {
  const bool at_root = rank() == root;
  const std::size_t eb = dtype_size(dtype), p = static_cast<std::size_t>(size()), me = static_cast<std::size_t>(rank());
  std::optional<VectorBlocks> b;
  if (at_root) b.emplace("scatterv", counts, displs, size());
  const std::uint64_t most = agreed_most(*this, at_root ? b->most : count);
  if (most == 0) return;
  std::vector<std::byte> padded((at_root ? p : 1) * most * eb);
  if (at_root) {
    b->most = most;
    for (std::size_t v = 0; v < p; ++v) b->to_padded(send, padded.data(), v, eb);
  }
  // The root in place (its block stays where it is in padded); the others receive most elements.
  scatter(padded.data(), padded.data(), most, dtype, root);
  if (at_root && send == recv) return;  // in place: the root's block stays in send
  const std::byte* mine = padded.data() + (at_root ? me * most * eb : 0);
  VectorBlocks::copy(recv, mine, (at_root ? b->counts[me] : count) * eb);
}

void Comm::alltoallv(const void* send, const int* send_counts, const int* send_displs, void* recv,
                     const int* recv_counts, const int* recv_displs, DType dtype) {
  const int ranks = size();
  const VectorBlocks in = send == recv ? VectorBlocks("alltoallv", recv_counts, recv_displs, ranks)
                                       : VectorBlocks("alltoallv", send_counts, send_displs, ranks);
  VectorBlocks out("alltoallv", recv_counts, recv_displs, ranks);
  const std::size_t eb = dtype_size(dtype), p = static_cast<std::size_t>(ranks);
  const std::uint64_t most = agreed_most(*this, std::max(in.most, out.most));
  if (most == 0) return;
  VectorBlocks padded_in = in;
  padded_in.most = out.most = most;
  std::vector<std::byte> sent(p * most * eb), received(p * most * eb);
  for (std::size_t v = 0; v < p; ++v) padded_in.to_padded(send, sent.data(), v, eb);  // before recv is written
  alltoall(sent.data(), received.data(), most, dtype);
  for (std::size_t v = 0; v < p; ++v) out.from_padded(received.data(), recv, v, eb);
}

}  // namespace copse
