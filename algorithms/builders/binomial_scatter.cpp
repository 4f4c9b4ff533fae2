// Binomial scatter and gather from any root, by halving the rank range: the
// holder of the block range [lo, hi) keeps the half holding itself -- the
// larger half, ceil(n/2) of n ranks -- and sends the other half's blocks to
// the rank of that half at its own offset (the half's last rank if it is
// shorter), which then scatters that half the same way. Every subtree is a
// contiguous range of real ranks, so each transfer is one contiguous region
// whatever the root (a tree relabelled to the root would wrap past rank p-1
// and cut some transfers in two). With root 0 and p a power of two this is
// the binomial tree: rank 0 sends [p/2, p) to p/2, then [p/4, p/2) to p/4, ...
//
// Cost, under Hockney with bidirectional ports, c elements a block, m = p c
// in all: T(n) = alpha + floor(n/2) c beta + T(ceil(n/2)) (the kept half is
// never the shorter), so T(p) = ceil(log2 p) alpha + (p-1)/p m beta: as few
// rounds as any tree, and the root sends nothing twice. Giving away the
// larger half instead would cost up to one block more on the critical path.
//
// The gather is the scatter run backwards (patterns::reversed): a rank
// receives the halves it would have given, smallest first, then sends its
// whole range to its parent; same rounds, same cost.
// Unequal blocks (scatterv, gatherv: Shape::counts): the same tree, each
// transfer the blocks of its range packed (algorithms/block_layout.hpp); a
// range holding nothing is no transfer on either side.
// Example, p = 6, root 4: 4 keeps [3, 6) and sends [0, 3) to 1 (offset 1 in
// its half); 1 keeps [0, 2), sends [2, 3) to 2, then [0, 1) to 0; 4 sends
// [5, 6) to 5, then [3, 4) to 3.
#include <algorithm>
#include <vector>

#include "algorithms/block_layout.hpp"
#include "algorithms/builders/power_of_two_fold.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

struct RankRange {
  int lo = 0, hi = 0;  // ranks [lo, hi)
  bool holds(int r) const { return lo <= r && r < hi; }
};

// Where one rank sits in the halving tree: the range it receives from its
// parent (the whole for the root), and the ranges it gives away, in order.
struct HalvingRole {
  int parent = -1;
  RankRange own;
  std::vector<std::pair<int, RankRange>> given;  // (child, its range)
};

HalvingRole halving_role(int p, int root, int rank) {
  HalvingRole role;
  role.own = {0, p};
  RankRange range{0, p};
  int holder = root;
  while (range.hi - range.lo > 1) {
    const int n = range.hi - range.lo, keep = (n + 1) / 2, give = n / 2;
    const bool keeps_lower = holder - range.lo < keep;
    const RankRange kept = keeps_lower ? RankRange{range.lo, range.lo + keep} : RankRange{range.lo + give, range.hi};
    const RankRange away = keeps_lower ? RankRange{range.lo + keep, range.hi} : RankRange{range.lo, range.lo + give};
    const int receiver = away.lo + std::min(holder - kept.lo, give - 1);
    if (holder == rank) role.given.emplace_back(receiver, away);
    if (away.holds(rank)) {
      if (receiver == rank) role.parent = holder, role.own = away;
      holder = receiver;
      range = away;
    } else {
      range = kept;
    }
  }
  return role;
}

RankSchedule halving_scatter_rank(Shape shape, int rank) {
  const BlockLayout layout(shape);
  if (shape.ranks == 1 || layout.total() == 0) co_return;
  const HalvingRole role = halving_role(shape.ranks, shape.root, rank);
  if (role.parent >= 0) {
    Step down;
    down.recv = layout.range(role.parent, role.own.lo, role.own.hi);
    if (!down.empty()) co_yield down;
  }
  for (const auto& [child, range] : role.given) {
    Step s;
    s.send = layout.range(child, range.lo, range.hi);
    if (!s.empty()) co_yield s;
  }
}

}  // namespace

SchedulePlan binomial_scatter(const Shape& shape) {
  return [shape](int rank) { return halving_scatter_rank(shape, rank); };
}
SchedulePlan binomial_gather(const Shape& shape) { return patterns::reversed(binomial_scatter(shape)); }

}  // namespace copse::builders
