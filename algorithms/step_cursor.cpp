#include "algorithms/step_cursor.hpp"

#include <algorithm>
#include <bit>

#include "algorithms/huge_pages.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor_grid.hpp"

namespace copse {

namespace {

using cursor::Blocks;
using cursor::fill_step;
using cursor::GridCursor;

// patterns::doubly_pipelined_allreduce over trees::dual_root, one rank's
// tree links in one 16-byte record (against some 250 bytes for its
// coroutine frame): one cache line serves a step. Position 4j + s is round
// j's slot s: s = 0, 1 the exchange with child s, s = 2 the one with the
// parent (or the dual root); s = 3 is always void, so that a position splits
// by shifts. first_from jumps over the slots of absent children (a leaf's
// rounds are its parent slots alone).
class DualRootCursor final : public GridCursor<DualRootCursor> {
 public:
  DualRootCursor(int ranks, BlockPartition part) : blocks_(part), rounds_(part.blocks + 1), nodes_(to_size(ranks)) {
    const int lower_size = static_cast<int>((std::int64_t{ranks} + 1) / 2);
    lower_root_ = lower_size - 1;
    upper_root_ = ranks > 1 ? ranks - 1 : -1;
    link(0, lower_root_, -1, 0);
    if (ranks > 1) link(lower_size, ranks - 1, -1, 0);
  }

  // No elements: every slot is void, and the grid is empty.
  std::uint32_t positions(int rank) const {
    return blocks_.blocks() == 0 ? 0 : static_cast<std::uint32_t>(4 * (rounds_ + nodes_[to_size(rank)].depth));
  }

  std::uint32_t first_from(int rank, std::uint32_t position) const {
    const Node& n = nodes_[to_size(rank)];
    if ((position & 3) == 3) ++position;
    // Child 1 is present only beside child 0 (link), so a rank without
    // child 0 is a leaf.
    if ((position & 3) == 0 && n.child[0] < 0) return position + 2;
    if ((position & 3) == 1 && n.child[1] < 0) return position + 1;
    return position;
  }

  void prefetch(int rank) const final { __builtin_prefetch(&nodes_[to_size(rank)]); }

  [[gnu::always_inline]] bool fill(int rank, std::uint32_t position, Step& s) const {
    const Node& n = nodes_[to_size(rank)];
    const long j = position >> 2, d = n.depth;
    if (const auto slot = position & 3; slot < 2) {
      const int child = n.child[slot];
      return child >= 0 && fill_step(s, blocks_.transfer(j - (d + 1), child), blocks_.transfer(j, child),
                                     patterns::side_of(child, rank));
    } else if (slot == 3) {
      return false;
    }
    if (n.parent >= 0)
      return fill_step(s, blocks_.transfer(j, n.parent), blocks_.transfer(j - d, n.parent), Combine::replace);
    // For a non-commutative operator the lower root computes Y ⊙ t, the upper root t ⊙ Y.
    const int dual = rank == lower_root_ ? upper_root_ : rank == upper_root_ ? lower_root_ : -1;
    return dual >= 0 &&
           fill_step(s, blocks_.transfer(j, dual), blocks_.transfer(j, dual), patterns::side_of(dual, rank));
  }

 private:
  static std::size_t to_size(int r) { return static_cast<std::size_t>(r); }

  struct Node {
    std::int32_t parent = -1;
    std::int32_t child[2] = {-1, -1};  // nearest first; -1 if absent
    std::int32_t depth = 0;
  };

  // trees::post_order_binary_range over [lo, hi] hung below `parent`: the
  // root is hi, its children hi-1 (the upper part, when it has two) and the
  // lower part's root; the lower part takes the extra rank.
  void link(int lo, int hi, int parent, int depth) {
    Node& root = nodes_[to_size(hi)];
    root.parent = parent;
    root.depth = depth;
    const std::int64_t below_root = std::int64_t{hi} - lo;
    if (below_root < 1) return;
    const int lower_last = static_cast<int>(lo + (below_root + 1) / 2 - 1);
    if (below_root >= 2) {
      root.child[0] = hi - 1;
      root.child[1] = lower_last;
      link(lower_last + 1, hi - 1, hi, depth + 1);
    } else {
      root.child[0] = lower_last;
    }
    link(lo, lower_last, hi, depth + 1);
  }

  Blocks blocks_;
  long rounds_;  // a rank at depth d runs rounds_ + d rounds
  HugeVector<Node> nodes_;
  int lower_root_ = 0, upper_root_ = -1;
};

// builders::reduce_then_bcast over trees::binomial: patterns::tree_reduce's
// steps, then patterns::tree_bcast's. Rank r's children are r + 2^k for
// 2^k below both its span (r's lowest set bit; p for rank 0) and p - r, so
// nothing per rank is stored. Reduce positions: a leaf's j (sending block j
// up); an interior rank's j * children + c (receiving block j from child c).
// Broadcast positions after them: j * max(children, 1) + slot, slot 0
// receiving from the parent (the root has none: its slots are the children,
// farthest first).
class BinomialAllreduceCursor final : public GridCursor<BinomialAllreduceCursor> {
 public:
  BinomialAllreduceCursor(int ranks, BlockPartition part) : ranks_(ranks), blocks_(part), rounds_(part.blocks) {}

  std::uint32_t positions(int rank) const {
    const long b = rounds_, nc = children(rank);
    const long bcast = rank == 0 ? b * nc : (b + 1) * std::max(nc, 1L);
    return static_cast<std::uint32_t>(reduce_positions(nc) + bcast);
  }

  [[gnu::always_inline]] bool fill(int rank, std::uint32_t position, Step& s) const {
    const long nc = children(rank), reduce = reduce_positions(nc);
    const int parent = rank == 0 ? -1 : rank & (rank - 1);
    const auto child = [rank](long c) { return rank + (1 << c); };
    if (position < reduce) {
      if (nc == 0) return fill_step(s, blocks_.transfer(position, parent), {}, Combine::replace);
      // 32-bit divisions (positions are): several times quicker than long ones.
      const auto unc = static_cast<std::uint32_t>(nc);
      const long j = position / unc, c = position % unc;
      return fill_step(s, c == 0 ? blocks_.transfer(j - 1, parent) : Transfer{}, blocks_.transfer(j, child(c)),
                       patterns::side_of(child(c), rank));
    }
    const auto q = static_cast<std::uint32_t>(position - reduce);
    if (parent < 0) {  // the root: kid i is child nc-1-i
      const auto unc = static_cast<std::uint32_t>(nc);
      return fill_step(s, blocks_.transfer(q / unc, child(nc - 1 - q % unc)), {}, Combine::replace);
    }
    const auto stride = static_cast<std::uint32_t>(std::max(nc, 1L));
    const long j = q / stride, slot = q % stride;
    if (slot == 0)
      return fill_step(s, nc > 0 ? blocks_.transfer(j - 1, child(0)) : Transfer{}, blocks_.transfer(j, parent),
                       Combine::replace);
    return fill_step(s, blocks_.transfer(j, child(nc - slot)), {}, Combine::replace);
  }

 private:
  long children(int rank) const {
    const auto r = static_cast<std::uint32_t>(rank);
    const std::uint64_t span = r == 0 ? static_cast<std::uint64_t>(ranks_) : (r & (~r + 1));
    const std::uint64_t reach = std::min<std::uint64_t>(span, static_cast<std::uint64_t>(ranks_) - r);
    return std::bit_width(reach - 1);
  }
  long reduce_positions(long nc) const { return nc == 0 ? rounds_ : (rounds_ + 1) * nc; }

  int ranks_;
  Blocks blocks_;
  long rounds_;  // the block count, void blocks included
};

}  // namespace

std::shared_ptr<const StepCursor> dual_root_cursor(int ranks, BlockPartition part) {
  if (part.blocks >= cursor::kMostBlocks) return nullptr;
  return std::make_shared<const DualRootCursor>(ranks, part);
}

std::shared_ptr<const StepCursor> binomial_allreduce_cursor(int ranks, BlockPartition part) {
  if (part.blocks >= cursor::kMostBlocks) return nullptr;
  return std::make_shared<const BinomialAllreduceCursor>(ranks, part);
}

}  // namespace copse
