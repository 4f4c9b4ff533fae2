// Broadcast by scatter then allgather (van de Geijn; Barnett et al. 1994,
// MPICH's long-message bcast): the root's vector is cut into p chunks, a
// binomial scatter leaves chunk v on the rank v places after the root, and a
// ring allgather brings every chunk to every rank. Each rank receives about
// 2(p-1)/p of the vector instead of the whole vector per tree level, at the
// price of ceil(log2 p) + p - 1 steps: the choice for large vectors.
//
// Ranks are numbered relative to the root, v = (rank - root) mod p. The
// scatter is MPICH's binomial one: v != 0 receives chunks [v, v + low(v))
// (low(v): v's lowest set bit) from v - low(v), then hands the upper halves
// on, to v + m for m = low(v)/2, low(v)/4, ..., 1. Example, p = 5: the root
// sends [4, 5) to 4, [2, 4) to 2, [1, 2) to 1; rank 2 sends [3, 4) to 3.
// Ring step s: v sends chunk v - s to v + 1 and receives chunk v - s - 1
// from v - 1 (mod p), its own chunk first. With fewer elements than ranks
// the chunks past the element count are empty and move nowhere.
#include <algorithm>
#include <bit>

#include "algorithms/builders/power_of_two_fold.hpp"

namespace copse::builders {

namespace {

RankSchedule scatter_allgather_rank(Shape shape, int rank) {
  const int p = shape.ranks;
  if (p == 1 || shape.count == 0) co_return;
  const BlockPartition chunks(shape.count, p);
  const int v = (rank - shape.root + p) % p;
  const auto peer = [&](int u) { return (u % p + shape.root) % p; };
  // Elements of chunks [a, b): chunks from chunks.blocks on are empty.
  const auto range = [&](int to, int a, int b) {
    return region(to, chunks.offset(std::min(a, chunks.blocks)), chunks.offset(std::min(b, chunks.blocks)));
  };
  const int low = v == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(p))) : v & -v;
  if (v != 0) {
    Step s;
    s.recv = range(peer(v - low), v, std::min(v + low, p));
    if (!s.empty()) co_yield s;
  }
  for (int m = low / 2; m >= 1; m /= 2) {
    if (v + m >= p) continue;
    Step s;
    s.send = range(peer(v + m), v + m, std::min(v + 2 * m, p));
    if (!s.empty()) co_yield s;
  }
  for (int step = 0; step < p - 1; ++step) {
    const int out = ((v - step) % p + p) % p, in = ((v - step - 1) % p + p) % p;
    Step s;
    s.send = range(peer(v + 1), out, out + 1);
    s.recv = range(peer(v + p - 1), in, in + 1);
    if (!s.empty()) co_yield s;
  }
}

}  // namespace

SchedulePlan scatter_allgather_bcast(const Shape& shape) {
  return [shape](int rank) { return scatter_allgather_rank(shape, rank); };
}

}  // namespace copse::builders
