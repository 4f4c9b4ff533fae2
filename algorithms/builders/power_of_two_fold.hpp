#pragma once
// Folding any p onto a power of two for the butterfly algorithms (recursive
// doubling, Rabenseifner): with p2 = 2^floor(log2 p) and extra = p - p2, each
// even rank 2i < 2*extra hands its vector to rank 2i+1 first and gets the
// result back at the end. The p2 ranks left are renumbered in rank order --
// new rank n stands for ranks {2n, 2n+1} if n < extra, else for rank n+extra
// -- so every group a butterfly forms is a contiguous rank range, and
// combining lower groups on the left keeps non-commutative operators right.
// Example, p = 6: p2 = 4, extra = 2; ranks 0,2 fold into 1,3; new ranks
// 0,1,2,3 are old ranks 1,3,4,5.

#include <bit>

#include "common/schedule.hpp"

namespace copse::builders {

struct PowerOfTwoFold {
  int p2, extra;
  explicit PowerOfTwoFold(int p) : p2(static_cast<int>(std::bit_floor(static_cast<unsigned>(p)))), extra(p - p2) {}
  // -1 for a rank that sits out the butterfly.
  int new_rank(int r) const { return r < 2 * extra ? (r % 2 ? r / 2 : -1) : r - extra; }
  int old_rank(int n) const { return n < extra ? 2 * n + 1 : n + extra; }
  // The lowest old rank new rank n stands for (first_old(p2) = p): the new
  // ranks [a, b) stand for the old ranks [first_old(a), first_old(b)), so
  // the blocks of a butterfly group (allgather, reduce_scatter) are one
  // contiguous range. p = 6: new ranks 0..3 start at old ranks 0, 2, 4, 5.
  int first_old(int n) const { return n < extra ? 2 * n : n + extra; }
};

// Whole-vector transfer, or none when the vector is empty.
inline Transfer whole(int peer, std::uint64_t count) { return count ? Transfer{peer, 0, count} : Transfer{}; }
// Transfer of [lo, hi), or none when empty.
inline Transfer region(int peer, std::uint64_t lo, std::uint64_t hi) {
  return hi > lo ? Transfer{peer, lo, hi - lo} : Transfer{};
}

// Blocks [first, end) of `count` elements each (rank r's block at r *
// count, as allgather and reduce_scatter lay them out), or none when empty.
inline Transfer blocks(int peer, int first, int end, std::uint64_t count) {
  return region(peer, static_cast<std::uint64_t>(first) * count, static_cast<std::uint64_t>(end) * count);
}

// The fold-in step before the butterfly and the fold-out step after it.
inline Step fold_in(const PowerOfTwoFold& f, int rank, std::uint64_t count) {
  Step s;
  if (rank < 2 * f.extra) {
    if (rank % 2 == 0)
      s.send = whole(rank + 1, count);
    else
      s.recv = whole(rank - 1, count), s.combine = Combine::left;
  }
  return s;
}
inline Step fold_out(const PowerOfTwoFold& f, int rank, std::uint64_t count) {
  Step s;
  if (rank < 2 * f.extra) {
    if (rank % 2 == 1)
      s.send = whole(rank - 1, count);
    else
      s.recv = whole(rank + 1, count);
  }
  return s;
}

}  // namespace copse::builders
