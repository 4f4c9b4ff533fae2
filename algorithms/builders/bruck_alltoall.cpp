// Bruck's alltoall (Bruck et al. 1997, the index algorithm), any p,
// ceil(log2 p) rounds: the choice for small blocks, where start-ups dominate.
// Rank r numbers its blocks by distance: W[i] is the block for rank r + i
// (mod p). In the round at distance d (1, 2, 4, ...) it sends every W[i]
// whose bit d is set to rank r + d, which keeps it as its own W[i]; a block
// for r + i thus moves by the bits of i and arrives at index i, so at the
// end W[i] is the block from rank r - i.
//
// The vector is MPI's two buffers (common/schedule.hpp). W lives in the send
// area, W[i] at block (r + i) mod p, so no rotation is needed; the receive
// area serves as the packing buffer until the end. A round copies its
// blocks into the front of the receive area (one copy per contiguous run),
// sends those n, receives the partner's n right behind them (n <= p/2, so
// the two fit), and copies them back into W. Last, block s of the receive
// area takes W[r - s] (one copy per block: the order reverses).
// Cost under Hockney, c elements a block, n_d = #{i < p : i has bit d}:
//   sum over the rounds of (alpha + n_d c beta), plus gamma c (2 sum n_d + p)
// for the copies; for p a power of two, log2 p (alpha + m/2 beta) with m = p c.
// Against pairwise exchange ((p-1)(alpha + m/p beta)) it trades bandwidth for
// start-ups: better while m/2 beta log2 p < (p - 1 - log2 p) alpha roughly.
// Example, p = 3, rank 0: W = blocks 0, 1, 2. Round 1 sends W[1] (block 1)
// to rank 1 and gets rank 2's W[1] (its block for 0); round 2 sends W[2] to
// rank 2 and gets rank 1's W[2] (its block for 0). Then receive block 0 is
// W[0], block 1 is W[2] (from rank 1), block 2 is W[1] (from rank 2).
#include <utility>
#include <vector>

#include "common/schedule.hpp"

namespace copse::builders {

namespace {

using BlockMove = std::pair<std::uint64_t, std::uint64_t>;  // (from, to) element offsets of one block

// Copies blocks of c elements, one step per run of moves that are
// contiguous at both ends.
RankSchedule copy_blocks(std::vector<BlockMove> moves, std::uint64_t c) {
  for (std::size_t i = 0; i < moves.size();) {
    std::size_t end = i + 1;
    while (end < moves.size() && moves[end].first == moves[end - 1].first + c &&
           moves[end].second == moves[end - 1].second + c)
      ++end;
    Step s;
    s.copy = LocalCopy{moves[i].first, moves[i].second, (end - i) * c};
    co_yield s;
    i = end;
  }
}

RankSchedule bruck_alltoall_rank(Shape shape, int rank) {
  const long p = shape.ranks;
  const std::uint64_t c = shape.count;
  if (c == 0) co_return;
  const std::uint64_t pack = static_cast<std::uint64_t>(p) * c;                        // the receive area
  auto slot = [&](long i) { return static_cast<std::uint64_t>((rank + i) % p) * c; };  // W[i]
  for (long d = 1; d < p; d *= 2) {
    std::vector<BlockMove> out, in;
    for (long i = d; i < p; ++i)
      if (i & d) out.emplace_back(slot(i), pack + out.size() * c);
    const std::uint64_t n = out.size() * c;
    for (const auto& [w, packed] : out) in.emplace_back(packed + n, w);
    for (auto g = copy_blocks(std::move(out), c); g.next();) co_yield g.value();
    Step exchange;
    exchange.send = Transfer{static_cast<int>((rank + d) % p), pack, n};
    exchange.recv = Transfer{static_cast<int>((rank - d + p) % p), pack + n, n};
    co_yield exchange;
    for (auto g = copy_blocks(std::move(in), c); g.next();) co_yield g.value();
  }
  std::vector<BlockMove> last;
  for (long s = 0; s < p; ++s) last.emplace_back(slot((rank - s + p) % p), pack + static_cast<std::uint64_t>(s) * c);
  for (auto g = copy_blocks(std::move(last), c); g.next();) co_yield g.value();
}

}  // namespace

SchedulePlan bruck_alltoall(const Shape& shape) {
  return [shape](int rank) { return bruck_alltoall_rank(shape, rank); };
}

}  // namespace copse::builders
