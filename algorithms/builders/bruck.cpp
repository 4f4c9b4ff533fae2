// Bruck's allgather (Bruck et al. 1997), any p, ceil(log2 p) rounds: before
// the round at distance d (1, 2, 4, ...) rank r holds blocks r .. r+d-1
// (mod p); it sends the first m = min(d, p - d) of them to r - d and receives
// blocks r+d .. r+d+m-1 from r + d, so it then holds 2d blocks (or all p).
// Rank r's block stays where it belongs (at r * count) instead of in a
// rotated buffer, so a run of blocks that wraps past block p-1 travels as two
// transfers, in two steps, the larger first; sender and receiver name the
// same blocks and so cut and order them alike. A round whose runs wrap then
// costs two start-ups and at most 1.5 m blocks of time instead of m (the
// send's and the receive's larger pieces share a step); recursive doubling
// (recursive_doubling_allgather.cpp) has no wrap but, below a power of two,
// two extra steps. Example, p = 5, round d = 4 (m = 1): rank 3 sends block 3
// to rank 4 and receives block 2 (3 + 4 mod 5) from rank 2.
#include <algorithm>
#include <array>

#include "algorithms/builders/power_of_two_fold.hpp"

namespace copse::builders {

namespace {

// Blocks first .. first+m-1 (mod p) as at most two element ranges, the
// larger first.
struct Runs {
  std::array<std::pair<std::uint64_t, std::uint64_t>, 2> run{};
};
Runs cyclic(long first, long m, long p, std::uint64_t count) {
  first %= p;
  const long head = std::min(m, p - first);
  Runs r;
  r.run[0] = {static_cast<std::uint64_t>(first) * count, static_cast<std::uint64_t>(first + head) * count};
  r.run[1] = {0, static_cast<std::uint64_t>(m - head) * count};
  if (m - head > head) std::swap(r.run[0], r.run[1]);
  return r;
}

RankSchedule bruck_rank(Shape shape, int rank) {
  const long p = shape.ranks;
  if (p == 1 || shape.count == 0) co_return;
  for (long d = 1; d < p; d *= 2) {
    const long m = std::min(d, p - d);
    const int to = static_cast<int>((rank - d + p) % p), from = static_cast<int>((rank + d) % p);
    const Runs out = cyclic(rank, m, p, shape.count), in = cyclic(rank + d, m, p, shape.count);
    for (std::size_t piece = 0; piece < 2; ++piece) {
      Step s;
      s.send = region(to, out.run[piece].first, out.run[piece].second);
      s.recv = region(from, in.run[piece].first, in.run[piece].second);
      if (!s.empty()) co_yield s;
    }
  }
}

}  // namespace

SchedulePlan bruck_allgather(const Shape& shape) {
  return [shape](int rank) { return bruck_rank(shape, rank); };
}

}  // namespace copse::builders
