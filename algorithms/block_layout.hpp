#pragma once
// Where each block of a collective's vector lies when blocks differ in size
// (Shape::counts, the v-variants of issue 19): packed in rank order, as
// MPI's allgatherv, gatherv and scatterv lay them out with displacements
// that are the prefix sums of the counts. Without counts every block is
// Shape::count and this is the plain layout (rank r's block at r * count).
//
// Alltoall has two areas (common/schedule.hpp): the send area, rank r's
// blocks for d = 0..p-1 packed, and after it the receive area, the blocks
// from s = 0..p-1 packed. The receive area starts at the longest send area
// of any rank, so that every rank's vector has the same layout rule and
// vector_elements() one value: send_span + the longest receive area.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

class BlockLayout {
 public:
  // p blocks of a shape's counts (or `count` each).
  explicit BlockLayout(const Shape& shape) : at_(static_cast<std::size_t>(shape.ranks) + 1, 0) {
    for (std::size_t r = 0; r + 1 < at_.size(); ++r)
      at_[r + 1] = at_[r] + (shape.counts ? (*shape.counts)[r] : shape.count);
  }
  // Blocks of the given sizes, starting at `base`.
  BlockLayout(const std::vector<std::uint64_t>& sizes, std::uint64_t base) : at_(sizes.size() + 1, base) {
    for (std::size_t r = 0; r < sizes.size(); ++r) at_[r + 1] = at_[r] + sizes[r];
  }
  std::uint64_t offset(int r) const { return at_[static_cast<std::size_t>(r)]; }
  std::uint64_t size(int r) const { return at_[static_cast<std::size_t>(r) + 1] - at_[static_cast<std::size_t>(r)]; }
  std::uint64_t total() const { return at_.back() - at_.front(); }
  // Blocks [first, end) as one transfer with `peer`, or none when they hold nothing.
  Transfer range(int peer, int first, int end) const {
    const std::uint64_t lo = offset(first), hi = offset(end);
    return hi > lo ? Transfer{peer, lo, hi - lo} : Transfer{};
  }
  // The block holding element e (the first non-empty one from its start).
  int owner(std::uint64_t e) const {
    const auto it = std::upper_bound(at_.begin(), at_.end(), e);
    return static_cast<int>(it - at_.begin()) - 1;
  }

 private:
  std::vector<std::uint64_t> at_;  // p + 1 prefix sums
};

// Alltoall's two areas for one rank (see above).
class AlltoallLayout {
 public:
  AlltoallLayout(const Shape& shape, int rank) {
    const auto p = static_cast<std::size_t>(shape.ranks), me = static_cast<std::size_t>(rank);
    auto c = [&](std::size_t s, std::size_t d) { return shape.counts ? (*shape.counts)[s * p + d] : shape.count; };
    std::vector<std::uint64_t> sent(p), received(p);
    for (std::size_t d = 0; d < p; ++d) sent[d] = c(me, d), received[d] = c(d, me);
    send_ = BlockLayout(sent, 0);
    recv_ = BlockLayout(received, send_span(shape));
  }
  const BlockLayout& send() const { return send_; }  // block d: for rank d
  const BlockLayout& recv() const { return recv_; }  // block s: from rank s

  // The longest send area of any rank (where every receive area starts), and
  // the whole vector.
  static std::uint64_t send_span(const Shape& shape) { return longest(shape, true); }
  static std::uint64_t elements(const Shape& shape) { return send_span(shape) + longest(shape, false); }

 private:
  static std::uint64_t longest(const Shape& shape, bool rows) {
    const auto p = static_cast<std::size_t>(shape.ranks);
    if (!shape.counts) return p * shape.count;
    std::uint64_t most = 0;
    for (std::size_t r = 0; r < p; ++r) {
      std::uint64_t sum = 0;
      for (std::size_t k = 0; k < p; ++k) sum += (*shape.counts)[rows ? r * p + k : k * p + r];
      most = std::max(most, sum);
    }
    return most;
  }
  BlockLayout send_{std::vector<std::uint64_t>{}, 0}, recv_{std::vector<std::uint64_t>{}, 0};
};

}  // namespace copse
