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

#include "algorithms/huge_pages.hpp"
#include "algorithms/patterns.hpp"
#include "algorithms/step_cursor_grid.hpp"

namespace copse::builders {

namespace {

// A rank's links in the two trees, by colour. The colouring gives a rank's
// two up edges (one per tree) different colours, and its two child edges
// too (a rank is interior in one tree at most), so the step of one round and
// colour moves at most one block up or down each of the rank's two edges of
// that colour: nothing is searched per step.
struct TwoTreeRank {
  std::int32_t up[2];       // per colour: the parent across that colour's edge; -1 if none
  std::int32_t down[2];     // per colour: the child across it, in tree down_tree; -1 if none
  std::uint8_t depth[2];    // per tree
  std::uint8_t up_tree[2];  // per colour: the tree of the edge to up[c]
  std::uint8_t down_tree;   // the tree in which the rank has children (0 if none)
};

// All a step of one colour reads of a rank's links, 12 bytes: the simulator
// reads one for every rank at every position (algorithms/lockstep_sim.hpp),
// so a step's record holds its colour's links alone, not the rank's 24.
struct ColourLinks {
  std::int32_t up, down;                                  // TwoTreeRank's up[c] and down[c]
  std::uint8_t up_tree, up_depth, down_tree, down_depth;  // each tree with the rank's depth in it

  ColourLinks() = default;
  ColourLinks(const TwoTreeRank& me, int c)
      : up(me.up[c]),
        down(me.down[c]),
        up_tree(me.up_tree[c]),
        up_depth(me.depth[me.up_tree[c]]),
        down_tree(me.down_tree),
        down_depth(me.depth[me.down_tree]) {}
};

// The schedule of every rank as a grid of positions, a step (possibly
// empty) at each: the coroutines yield its non-empty steps in order and the
// step cursor seeks them, so both are this one arithmetic. Position
// phase * 2R + 2r + c is round r's step of colour c, phase 0 the reduce and
// 1 the broadcast, R rounds each.
class TwoTreeSchedule {
 public:
  explicit TwoTreeSchedule(const Shape& shape) {
    const std::uint64_t first_half = (shape.count + 1) / 2;
    const BlockPartition part[2] = {BlockPartition(first_half, shape.blocks, 0),
                                    BlockPartition(shape.count - first_half, shape.blocks, first_half)};
    const trees::TwoTree tt(shape.ranks);
    for (int x = 0; x < 2; ++x) {
      blocks_[x] = cursor::Blocks(part[x]);
      height_[x] = tt.height(x);
      rounds_ = std::max(rounds_, part[x].blocks + height_[x]);
    }
    for (auto& links : links_) links.resize(static_cast<std::size_t>(shape.ranks));
    for (int rank = 0; rank < shape.ranks; ++rank) {
      const TwoTreeRank me = links_of(tt, rank);
      for (int c = 0; c < 2; ++c) links_[c][static_cast<std::size_t>(rank)] = ColourLinks(me, c);
    }
  }

  std::int64_t positions() const { return 4 * rounds_; }

  // The first position at or after `position` that may hold one of rank's
  // steps: in each phase, its transfers' blocks are all void outside a
  // window of rounds (the timing in the header), and so are its steps.
  std::int64_t first_from(int rank, std::int64_t position) const {
    for (int phase = position < 2 * rounds_ ? 0 : 1; phase < 2; ++phase) {
      long lo = rounds_, hi = 0;
      const auto window = [&](int peer, long first, long blocks) {
        if (peer < 0 || blocks == 0) return;
        lo = std::min(lo, first);
        hi = std::max(hi, first + blocks);
      };
      for (int c = 0; c < 2; ++c) {
        // An edge moves block 0 in round -b, b its block index in round 0.
        const ColourLinks& me = links_[c][static_cast<std::size_t>(rank)];
        const Edges e = edges(me, phase == 0, 0);
        window(me.up, -e.up_block, blocks_[me.up_tree].blocks());
        window(me.down, -e.down_block, blocks_[me.down_tree].blocks());
      }
      const std::int64_t start = phase * 2 * rounds_, from = std::max(position, start + 2 * lo);
      if (from < start + 2 * hi) return from;
    }
    return positions();
  }

  void prefetch(int rank) const {
    for (const auto& links : links_) __builtin_prefetch(&links[static_cast<std::size_t>(rank)]);
  }

  Step at(int rank, std::int64_t position) const {
    const Slot t = slot(rank, position);
    Step s;
    if (t.reduce) {  // blocks go up
      s.send = t.up;
      s.recv = t.down;
      if (t.down_peer >= 0) s.combine = patterns::side_of(t.down_peer, rank);
    } else {  // blocks come down
      s.recv = t.up;
      s.send = t.down;
    }
    return s;
  }

  // move_of(at(rank, position)), false for an empty step: what the
  // simulator reads, without the offsets. (In the reduce every receive
  // combines, in the broadcast none does.)
  bool move_at(int rank, std::int64_t position, StepMove& move) const {
    const Slot t = slot(rank, position);
    if (!t.up && !t.down) return false;
    const Transfer& send = t.reduce ? t.up : t.down;
    const Transfer& recv = t.reduce ? t.down : t.up;
    move = StepMove{send.peer, recv.peer, send.count, recv.count, t.reduce ? recv.count : 0};
    return true;
  }

 private:
  // A position's transfers on the rank's two edges of its colour, inlined
  // into both at() and move_at() so that the latter drops the offsets.
  struct Slot {
    bool reduce;
    Transfer up, down;
    int down_peer;  // the child of this colour, even when its block is void
  };
  [[gnu::always_inline]] Slot slot(int rank, std::int64_t position) const {
    const bool reduce = position < 2 * rounds_;  // compared, not divided: the simulator asks millions of times
    const long r = static_cast<long>((reduce ? position : position - 2 * rounds_) / 2);
    const int colour = static_cast<int>(position % 2);
    const ColourLinks& me = links_[colour][static_cast<std::size_t>(rank)];
    const Edges e = edges(me, reduce, r);
    return Slot{reduce, blocks_[me.up_tree].transfer(e.up_block, me.up),
                blocks_[me.down_tree].transfer(e.down_block, me.down), me.down};
  }

  // The blocks a rank's two edges of one colour move in round r of a phase
  // (void if outside the tree's partition).
  struct Edges {
    long up_block, down_block;
  };
  Edges edges(const ColourLinks& me, bool reduce, long r) const {
    const int x = me.up_tree, y = me.down_tree;
    const long dx = me.up_depth, dy = me.down_depth;
    // Reduce: a rank at depth d sends block k up in round k + H - d; its
    // children sent it one round earlier. Broadcast: it receives block k in
    // round k + d - 1 and passes it on in round k + d.
    if (reduce) return {r - (height_[x] - dx), r - (height_[y] - dy - 1)};
    return {r - (dx - 1), r - dy};
  }

  // The rank's edges by colour; throws if the colouring gave two of its
  // edges at one port the same colour.
  static TwoTreeRank links_of(const trees::TwoTree& tt, int rank) {
    TwoTreeRank me{};
    int interior = -1;  // the tree in which the rank has children
    me.up[0] = me.up[1] = me.down[0] = me.down[1] = -1;
    const auto claim = [](std::int32_t& slot, int peer) {
      if (slot >= 0) throw std::logic_error("two-tree: colouring gave a rank two transfers in one step");
      slot = peer;
    };
    for (int x = 0; x < 2; ++x) {
      me.depth[x] = static_cast<std::uint8_t>(tt.depth(x, rank));
      if (const int parent = tt.parent(x, rank); parent >= 0) {
        const int c = tt.colour(x, rank);
        claim(me.up[c], parent);
        me.up_tree[c] = static_cast<std::uint8_t>(x);
      }
      if (tt.child(x, 0, rank) < 0 && tt.child(x, 1, rank) < 0) continue;
      if (interior >= 0) throw std::logic_error("two-tree: a rank is interior in both trees");
      interior = x;
      me.down_tree = static_cast<std::uint8_t>(x);
      for (int side = 0; side < 2; ++side)
        if (const int child = tt.child(x, side, rank); child >= 0) claim(me.down[tt.colour(x, child)], child);
    }
    return me;
  }

  cursor::Blocks blocks_[2] = {cursor::Blocks(BlockPartition()), cursor::Blocks(BlockPartition())};
  long height_[2] = {0, 0};
  long rounds_ = 0;                   // per phase: the most of blocks + height over the two trees
  HugeVector<ColourLinks> links_[2];  // per colour; on huge pages: the simulator reads one per step
};

RankSchedule two_tree_rank(std::shared_ptr<const TwoTreeSchedule> schedule, int rank) {
  for (std::int64_t i = 0; i < schedule->positions(); ++i)
    if (const Step s = schedule->at(rank, i); !s.empty()) co_yield s;
}

// Seeks as GridCursor does, but tries the slot it is at before asking
// first_from to jump (a rank's slots are nearly all full inside its windows,
// and first_from costs more than a slot), and computes the simulator's moves
// apart from whole steps (move_at).
class TwoTreeCursor final : public StepCursor, public LockstepMoves {
 public:
  explicit TwoTreeCursor(std::shared_ptr<const TwoTreeSchedule> schedule)
      : schedule_(std::move(schedule)), positions_(static_cast<std::uint32_t>(schedule_->positions())) {}
  bool seek(int rank, std::uint32_t& position, Step& step) const override {
    return find(rank, position, [&](std::uint32_t at) { return cursor::fill_step(step, schedule_->at(rank, at)); });
  }
  bool seek_move(int rank, std::uint32_t& position, StepMove& move) const override {
    return find(rank, position, [&](std::uint32_t at) { return schedule_->move_at(rank, at, move); });
  }
  Step at(int rank, std::uint32_t position) const override { return schedule_->at(rank, position); }
  void prefetch(int rank) const override { schedule_->prefetch(rank); }
  // Partners meet in the same round and colour (the header): one position.
  const LockstepMoves* lockstep() const override { return this; }
  std::uint32_t positions() const override { return positions_; }
  void moves_at(std::uint32_t position, int first, int count, StepMove* out) const override {
    for (int i = 0; i < count; ++i)
      if (!schedule_->move_at(first + i, position, out[i])) out[i] = StepMove{};
  }

 private:
  // The first position at or after `position` at which fill(position)
  // returns true (it sets the step found).
  template <class Fill>
  bool find(int rank, std::uint32_t& position, Fill fill) const {
    for (; position < positions_; position = static_cast<std::uint32_t>(schedule_->first_from(rank, position + 1)))
      if (fill(position)) return true;
    return false;
  }

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
