#include "transport/direct_gather.hpp"

#include <cstring>

#include "common/schedule.hpp"

namespace copse {

void direct_allgather(DirectReduce& slots, DirectRank& me, const std::byte* mine, std::byte* recv, std::size_t count,
                      std::size_t element_bytes, const WaitPolicy& policy) {
  const std::size_t bytes = count * element_bytes;
  const std::uint32_t call = slots.exchange(me, Collective::allgather, mine, bytes, element_bytes, policy);
  if (bytes == 0) return;
  for (int q = 0; q < slots.ranks(); ++q) {
    std::byte* block = recv + static_cast<std::size_t>(q) * bytes;
    // Our own block from `mine` (in place: there already); memmove, as a
    // caller's send may overlap its receive vector.
    const std::byte* from = q == me.rank ? mine : slots.posted(q, call);
    if (from != block) std::memmove(block, from, bytes);
  }
}

void direct_reduce_scatter(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv,
                           std::size_t total, std::size_t from, std::size_t count, const ReduceOp& op,
                           const WaitPolicy& policy) {
  const std::size_t eb = op.element_bytes;
  const std::uint32_t call = slots.exchange(me, Collective::reduce_scatter, send, total * eb, eb, policy);
  if (count == 0) return;
  slots.fold_posts(call, from, count, op, recv);  // our block, as the direct allreduce reduces the whole
}

void direct_reduce(DirectReduce& slots, DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count,
                   int root, const ReduceOp& op, const WaitPolicy& policy) {
  const std::size_t eb = op.element_bytes;
  const std::uint32_t call = slots.exchange(me, Collective::reduce, send, count * eb, eb, policy, root);
  if (me.rank == root && count > 0) slots.fold_posts(call, 0, count, op, recv);
}

}  // namespace copse
