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
#include <memory>
#include <stdexcept>

#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

// Sets `slot` to `t`; the colouring guarantees a slot is never claimed twice.
void claim(Transfer& slot, Transfer t) {
  if (!t) return;
  if (slot) throw std::logic_error("two-tree: colouring gave a rank two transfers in one step");
  slot = t;
}

RankSchedule two_tree_rank(std::shared_ptr<const trees::TwoTree> tt, Shape shape, int rank) {
  const std::uint64_t first_half = (shape.count + 1) / 2;
  const BlockPartition part[2] = {BlockPartition(first_half, shape.blocks, 0),
                                  BlockPartition(shape.count - first_half, shape.blocks, first_half)};
  const trees::Node node[2] = {tt->node(0, rank), tt->node(1, rank)};
  long height[2], rounds = 0;
  for (int x = 0; x < 2; ++x) {
    height[x] = tt->height(x);
    rounds = std::max(rounds, part[x].blocks + height[x]);
  }

  for (long r = 0; r < rounds; ++r)  // reduce: blocks go up
    for (int colour = 0; colour < 2; ++colour) {
      Step s;
      for (int x = 0; x < 2; ++x) {
        const long lag = height[x] - node[x].depth;  // rounds until this rank sends block 0 up
        if (node[x].parent >= 0 && tt->colour(x, rank) == colour)
          claim(s.send, part[x].transfer(r - lag, node[x].parent));
        for (int child : node[x].children)
          if (tt->colour(x, child) == colour) {
            claim(s.recv, part[x].transfer(r - (lag - 1), child));
            s.combine = patterns::side_of(child, rank);
          }
      }
      if (!s.empty()) co_yield s;
    }

  for (long r = 0; r < rounds; ++r)  // broadcast: blocks come down
    for (int colour = 0; colour < 2; ++colour) {
      Step s;
      for (int x = 0; x < 2; ++x) {
        const long d = node[x].depth;
        if (node[x].parent >= 0 && tt->colour(x, rank) == colour)
          claim(s.recv, part[x].transfer(r - d + 1, node[x].parent));
        for (int child : node[x].children)
          if (tt->colour(x, child) == colour) claim(s.send, part[x].transfer(r - d, child));
      }
      s.combine = Combine::replace;
      if (!s.empty()) co_yield s;
    }
}

}  // namespace

SchedulePlan two_tree_allreduce(const Shape& shape) {
  auto tt = std::make_shared<const trees::TwoTree>(shape.ranks);
  return [tt, shape](int rank) { return two_tree_rank(tt, shape, rank); };
}

}  // namespace copse::builders
