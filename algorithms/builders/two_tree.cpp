// Two-tree allreduce (Sanders, Speck, Träff 2009, as cited in Träff 2021
// §1.2): the vector is halved, tree 0 reduces and broadcasts the first half,
// tree 1 the second, at the same time. Every rank is interior in at most one
// tree, and the edge colouring of trees::TwoTree splits each round into two
// steps (colour 0, colour 1) in which a rank sends on at most one edge and
// receives on at most one, alternating between the trees.
//
// Timing is by rounds: in the reduce, a rank at depth d of a tree of height H
// sends block k up in round k + H - d, so its children (depth d+1) sent block
// k one round earlier; in the broadcast a rank at depth d receives block k in
// round k + d - 1 and passes it on in round k + d. Partners always meet in the
// same (round, colour) slot, hence no deadlock. Per round each half moves one
// block of m/(2b) in each direction, so the reduce costs beta*m and the
// broadcast beta*m: the beta term tends to 2*beta*m.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor_grid.hpp"

namespace copse::builders {

namespace {

// Sets `slot` to `t`; the colouring guarantees a slot is never claimed twice.
void claim(Transfer& slot, Transfer t) {
  if (!t) return;
  if (slot) throw std::logic_error("two-tree: colouring gave a rank two transfers in one step");
  slot = t;
}

// All a step of one rank reads of the two trees, 24 bytes. A rank is
// interior in at most one tree, so its children are one pair.
struct TwoTreeRank {
  std::int32_t parent[2];       // per tree; -1 at the root
  std::int32_t child[2];        // in tree `interior`, the lower first; -1 if absent
  std::uint8_t depth[2];        // per tree
  std::int8_t up_colour[2];     // colour of the edge to parent[x]
  std::int8_t child_colour[2];  // colour of the edge to child[c]
  std::int8_t interior;         // the tree in which the rank has children; -1 if none
};

// The schedule of every rank as a grid of positions, a step (possibly
// empty) at each: the coroutines yield its non-empty steps in order and the
// step cursor seeks them, so both are this one arithmetic. Position
// phase * 2R + 2r + c is round r's step of colour c, phase 0 the reduce and
// 1 the broadcast, R rounds each.
class TwoTreeSchedule {
 public:
  explicit TwoTreeSchedule(const Shape& shape) : ranks_(static_cast<std::size_t>(shape.ranks)) {
    const std::uint64_t first_half = (shape.count + 1) / 2;
    const BlockPartition part[2] = {BlockPartition(first_half, shape.blocks, 0),
                                    BlockPartition(shape.count - first_half, shape.blocks, first_half)};
    const trees::TwoTree tt(shape.ranks);
    for (int x = 0; x < 2; ++x) {
      blocks_[x] = cursor::Blocks(part[x]);
      height_[x] = tt.height(x);
      rounds_ = std::max(rounds_, part[x].blocks + height_[x]);
    }
    for (int rank = 0; rank < shape.ranks; ++rank) ranks_[static_cast<std::size_t>(rank)] = links(tt, rank);
  }

  std::int64_t positions() const { return 4 * rounds_; }

  // The first position at or after `position` that may hold one of rank's
  // steps: in each phase, its transfers' blocks are all void outside a
  // window of rounds (the timing in the header), and so are its steps.
  std::int64_t first_from(int rank, std::int64_t position) const {
    const TwoTreeRank& me = ranks_[static_cast<std::size_t>(rank)];
    for (int phase = position < 2 * rounds_ ? 0 : 1; phase < 2; ++phase) {
      long lo = rounds_, hi = 0;
      const auto window = [&](long first, long blocks) {
        if (blocks == 0) return;
        lo = std::min(lo, first);
        hi = std::max(hi, first + blocks);
      };
      for (int x = 0; x < 2; ++x) {
        const long d = me.depth[x], up_first = phase == 0 ? height_[x] - d : d - 1;
        if (me.parent[x] >= 0) window(up_first, blocks_[x].blocks());
        if (me.interior == x) window(phase == 0 ? up_first - 1 : d, blocks_[x].blocks());  // the children's
      }
      const std::int64_t start = phase * 2 * rounds_, from = std::max(position, start + 2 * lo);
      if (from < start + 2 * hi) return from;
    }
    return positions();
  }

  void prefetch(int rank) const { __builtin_prefetch(&ranks_[static_cast<std::size_t>(rank)]); }

  Step at(int rank, std::int64_t position) const {
    const TwoTreeRank& me = ranks_[static_cast<std::size_t>(rank)];
    const bool reduce = position < 2 * rounds_;  // compared, not divided: the simulator asks millions of times
    const long r = static_cast<long>((reduce ? position : position - 2 * rounds_) / 2);
    const int colour = static_cast<int>(position % 2);
    Step s;
    for (int x = 0; x < 2; ++x) {
      const cursor::Blocks& part = blocks_[x];
      const long d = me.depth[x];
      const bool up = me.parent[x] >= 0 && me.up_colour[x] == colour;
      if (reduce) {  // blocks go up
        // Rounds until this rank sends block 0 up.
        const long lag = height_[x] - d;
        if (up) claim(s.send, part.transfer(r - lag, me.parent[x]));
        for (int c = 0; c < 2 && me.interior == x; ++c)
          if (const int child = me.child[c]; child >= 0 && me.child_colour[c] == colour) {
            claim(s.recv, part.transfer(r - (lag - 1), child));
            s.combine = patterns::side_of(child, rank);
          }
      } else {  // blocks come down
        if (up) claim(s.recv, part.transfer(r - d + 1, me.parent[x]));
        for (int c = 0; c < 2 && me.interior == x; ++c)
          if (const int child = me.child[c]; child >= 0 && me.child_colour[c] == colour)
            claim(s.send, part.transfer(r - d, child));
      }
    }
    return s;
  }

 private:
  static TwoTreeRank links(const trees::TwoTree& tt, int rank) {
    TwoTreeRank me{};
    me.interior = -1;
    for (int x = 0; x < 2; ++x) {
      me.parent[x] = tt.parent(x, rank);
      me.depth[x] = static_cast<std::uint8_t>(tt.depth(x, rank));
      me.up_colour[x] = static_cast<std::int8_t>(tt.colour(x, rank));
      if (tt.child(x, 0, rank) < 0 && tt.child(x, 1, rank) < 0) continue;
      if (me.interior >= 0) throw std::logic_error("two-tree: a rank is interior in both trees");
      me.interior = static_cast<std::int8_t>(x);
      for (int c = 0; c < 2; ++c) {
        me.child[c] = tt.child(x, c, rank);
        me.child_colour[c] = static_cast<std::int8_t>(me.child[c] >= 0 ? tt.colour(x, me.child[c]) : -1);
      }
    }
    if (me.interior < 0) me.child[0] = me.child[1] = -1;
    return me;
  }

  cursor::Blocks blocks_[2] = {cursor::Blocks(BlockPartition()), cursor::Blocks(BlockPartition())};
  long height_[2] = {0, 0};
  long rounds_ = 0;  // per phase: the most of blocks + height over the two trees
  std::vector<TwoTreeRank> ranks_;
};

RankSchedule two_tree_rank(std::shared_ptr<const TwoTreeSchedule> schedule, int rank) {
  for (std::int64_t i = 0; i < schedule->positions(); ++i)
    if (const Step s = schedule->at(rank, i); !s.empty()) co_yield s;
}

class TwoTreeCursor final : public cursor::GridCursor<TwoTreeCursor> {
 public:
  explicit TwoTreeCursor(std::shared_ptr<const TwoTreeSchedule> schedule)
      : schedule_(std::move(schedule)), positions_(static_cast<std::uint32_t>(schedule_->positions())) {}
  std::uint32_t positions(int) const { return positions_; }
  std::uint32_t first_from(int rank, std::uint32_t position) const {
    return static_cast<std::uint32_t>(schedule_->first_from(rank, position));
  }
  bool fill(int rank, std::uint32_t position, Step& step) const {
    return cursor::fill_step(step, schedule_->at(rank, position));
  }
  void prefetch(int rank) const final { schedule_->prefetch(rank); }

 private:
  std::shared_ptr<const TwoTreeSchedule> schedule_;
  std::uint32_t positions_;
};

}  // namespace

SchedulePlan two_tree_allreduce(const Shape& shape) {
  auto schedule = std::make_shared<const TwoTreeSchedule>(shape);
  auto coroutines = [schedule](int rank) { return two_tree_rank(schedule, rank); };
  if (shape.blocks >= cursor::kMostBlocks) return coroutines;
  return CursorPlan{coroutines, std::make_shared<const TwoTreeCursor>(schedule)};
}

}  // namespace copse::builders
