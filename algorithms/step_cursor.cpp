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
//
// The same steps keep the lockstep promise under another numbering: a rank
// at depth d exchanges with child c in its round j, and that child with it
// in the child's own round j (the parent sends block j - d - 1 down and
// takes block j up; the child sends block j and takes block j - d - 1), so
// every edge between depths L and L + 1 has one global slot a round. Round
// j holds S = 2D + 1 slots (D the deepest depth): slot 2(D - 1 - L) + c for
// the edges from depth L to the c-th children, deepest first, and slot 2D
// for the two roots' exchange. A rank's own order is kept: its children's
// slots (depth d, slots 2(D-1-d) and 2(D-1-d) + 1) come before its parent's
// (depth d - 1, slot 2(D-d) + c at least). E.g. p = 7, D = 2, S = 5: the
// lower tree is 3 over 2 and 1, 1 over 0; the upper 6 over 5 and 4. Round
// j: slot 0 is 1 with its child 0, slot 1 is empty (no rank at depth 1 has
// two children), slot 2 is 3 with 2 and 6 with 5, slot 3 is 3 with 1 and 6
// with 4, slot 4 is 3 with 6. A slot's steps are those of a level's parents
// and their c-th children alone, so the simulator runs a position over them
// (ranks_at), not over all p ranks, with its records level by level
// (places, index_places): 3, 6 | 1, 2, 4, 5 | 0.
class DualRootCursor final : public GridCursor<DualRootCursor>, public LockstepMoves {
 public:
  DualRootCursor(int ranks, BlockPartition part) : blocks_(part), rounds_(part.blocks + 1), nodes_(to_size(ranks)) {
    const int lower_size = static_cast<int>((std::int64_t{ranks} + 1) / 2);
    lower_root_ = lower_size - 1;
    upper_root_ = ranks > 1 ? ranks - 1 : -1;
    link(0, lower_root_, -1, 0);
    if (ranks > 1) link(lower_size, ranks - 1, -1, 0);
    index_places(ranks);
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

  // ---- lockstep (the numbering above, over places) ----
  const LockstepMoves* lockstep() const final { return this; }
  std::uint32_t positions() const final {
    return blocks_.blocks() == 0 ? 0 : static_cast<std::uint32_t>((rounds_ + deepest_) * slots_per_round());
  }
  const std::vector<std::int32_t>* rank_of_place() const final { return &rank_of_place_; }
  const std::vector<std::int32_t>* ranks_at(std::uint32_t position) const final {
    return &slot_places_[position % slots_per_round()];
  }
  void moves_at(std::uint32_t position, int first, int count, StepMove* out) const final {
    const LockstepSlot at = slot_at(position);
    for (int i = 0; i < count; ++i) out[i] = lockstep_move(at, first + i, false);
  }
  void moves_of(std::uint32_t position, const std::int32_t* places, int count, StepMove* out) const final {
    const LockstepSlot at = slot_at(position);
    for (int i = 0; i < count; ++i) out[i] = lockstep_move(at, places[i], true);
  }

  [[gnu::always_inline]] bool fill(int rank, std::uint32_t position, Step& s) const {
    // For a non-commutative operator the lower root computes Y ⊙ t, the upper root t ⊙ Y.
    const int dual = rank == lower_root_ ? upper_root_ : rank == upper_root_ ? lower_root_ : -1;
    return node_step(
        nodes_[to_size(rank)], dual, position, [rank](int peer) { return patterns::side_of(peer, rank); }, s);
  }

 private:
  static std::size_t to_size(int r) { return static_cast<std::size_t>(r); }

  struct Node {
    std::int32_t parent = -1;
    std::int32_t child[2] = {-1, -1};  // nearest first; -1 if absent
    std::int32_t depth = 0;
  };

  // Round j's slot of a node at `position` = 4j + slot (0, 1: the exchange
  // with child `slot`; 2: with the parent, or a root's with the dual root
  // `dual`; 3: void), its peers named as `n` names them -- ranks for the
  // grid, places for the lockstep run. side(peer): how the node combines
  // what that child or the dual root sends.
  template <class Side>
  [[gnu::always_inline]] bool node_step(const Node& n, int dual, std::uint32_t position, Side side, Step& s) const {
    const long j = position >> 2, d = n.depth;
    if (const auto slot = position & 3; slot < 2) {
      const int child = n.child[slot];
      return child >= 0 && fill_step(s, blocks_.transfer(j - (d + 1), child), blocks_.transfer(j, child), side(child));
    } else if (slot == 3) {
      return false;
    }
    if (n.parent >= 0)
      return fill_step(s, blocks_.transfer(j, n.parent), blocks_.transfer(j - d, n.parent), Combine::replace);
    return dual >= 0 && fill_step(s, blocks_.transfer(j, dual), blocks_.transfer(j, dual), side(dual));
  }

  // A lockstep position: its round, and the level and child of its slot's
  // edges (level -1: the roots' exchange).
  struct LockstepSlot {
    std::uint32_t round;
    int level, child;
  };
  std::uint32_t slots_per_round() const { return static_cast<std::uint32_t>(2 * deepest_ + 1); }
  LockstepSlot slot_at(std::uint32_t position) const {
    const std::uint32_t s = slots_per_round(), slot = position % s;
    return {position / s, deepest_ - 1 - static_cast<int>(slot / 2), static_cast<int>(slot % 2)};
  }

  // A place's step at a lockstep position: as a parent (the slot's level is
  // its depth), as a child (one deeper), or as a root in the dual exchange
  // (the roots are places 0 and 1). `listed`: the place is one of the
  // slot's own (slot_places_), so one a level deeper is the right child of
  // its parent. A move holds no combine side, only whether a receive
  // combines: every side is `left` here.
  [[gnu::always_inline]] StepMove lockstep_move(const LockstepSlot& at, int place, bool listed) const {
    const Node& n = places_[to_size(place)];
    std::uint32_t grid = 4 * at.round + 2;  // the parent's (or the dual root's) slot of the round
    if (at.level < 0) {
      if (n.parent >= 0) return StepMove{};
    } else if (n.depth == at.level) {
      grid = 4 * at.round + static_cast<std::uint32_t>(at.child);
    } else if (n.depth != at.level + 1 || (!listed && places_[to_size(n.parent)].child[at.child] != place)) {
      return StepMove{};
    }
    const int dual = place < 2 && rank_of_place_.size() > 1 ? 1 - place : -1;
    Step step;
    return node_step(
               n, dual, grid, [](int) { return Combine::left; }, step)
               ? move_of(step)
               : StepMove{};
  }

  // The lockstep run's places: level by level from the roots, each level in
  // rank order (a level is its parents' children, each parent's lower child
  // first: in post order child 1's ranks lie below child 0's), so that a
  // slot's ranks -- one level's parents, their children one level down --
  // lie together in the run's records. Then each slot's places, a parent
  // beside its child.
  void index_places(int ranks) {
    for (const Node& n : nodes_) deepest_ = std::max(deepest_, n.depth);
    rank_of_place_.reserve(to_size(ranks));
    rank_of_place_.push_back(lower_root_);
    if (upper_root_ >= 0) rank_of_place_.push_back(upper_root_);
    for (std::size_t q = 0; q < rank_of_place_.size(); ++q)  // breadth first: grows as it goes
      for (const int c : {1, 0})
        if (const int child = nodes_[to_size(rank_of_place_[q])].child[c]; child >= 0) rank_of_place_.push_back(child);
    {
      std::vector<std::int32_t> place_of(to_size(ranks));
      for (std::size_t q = 0; q < rank_of_place_.size(); ++q)
        place_of[to_size(rank_of_place_[q])] = static_cast<std::int32_t>(q);
      const auto place = [&](int rank) { return rank >= 0 ? place_of[to_size(rank)] : -1; };
      places_ = HugeVector<Node>(to_size(ranks));
      for (std::size_t q = 0; q < places_.size(); ++q) {
        const Node& n = nodes_[to_size(rank_of_place_[q])];
        places_[q] = Node{place(n.parent), {place(n.child[0]), place(n.child[1])}, n.depth};
      }
    }
    slot_places_.assign(slots_per_round(), {});
    std::vector<std::size_t> sizes(slot_places_.size(), 0);
    const auto slot_of = [this](const Node& n, int c) { return to_size(2 * (deepest_ - 1 - n.depth) + c); };
    for (const Node& n : places_)
      for (int c = 0; c < 2; ++c)
        if (n.child[c] >= 0) sizes[slot_of(n, c)] += 2;
    for (std::size_t k = 0; k < sizes.size(); ++k) slot_places_[k].reserve(sizes[k]);
    for (int q = 0; q < ranks; ++q)
      for (int c = 0; c < 2; ++c)
        if (const int child = places_[to_size(q)].child[c]; child >= 0) {
          auto& slot = slot_places_[slot_of(places_[to_size(q)], c)];
          slot.push_back(q);
          slot.push_back(child);
        }
    if (upper_root_ >= 0) slot_places_.back() = {0, 1};
  }

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
  int deepest_ = 0;  // the deepest rank's depth
  // The lockstep run's (index_places): the tree by place, each place's
  // rank, and each slot's places.
  HugeVector<Node> places_;
  std::vector<std::int32_t> rank_of_place_;
  std::vector<std::vector<std::int32_t>> slot_places_;
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
