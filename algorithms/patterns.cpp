#include "algorithms/patterns.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "algorithms/builders/power_of_two_fold.hpp"
#include "common/error.hpp"

namespace copse::patterns {

RankSchedule tree_reduce(int rank, trees::Node node, BlockPartition part) {
  const long b = part.blocks;
  if (node.children.empty()) {
    for (long j = 0; j < b; ++j) {
      Step s;
      s.send = part.transfer(j, node.parent);
      if (!s.empty()) co_yield s;
    }
    co_return;
  }
  // Round j receives block j from every child; the previous block goes up
  // alongside the first child's receive. Round b only sends block b-1.
  for (long j = 0; j <= b; ++j) {
    for (std::size_t c = 0; c < node.children.size(); ++c) {
      Step s;
      const int child = node.children[c];
      s.recv = part.transfer(j, child);
      s.combine = side_of(child, rank);
      if (c == 0) s.send = part.transfer(j - 1, node.parent);
      if (!s.empty()) co_yield s;
    }
  }
}

RankSchedule tree_bcast(int rank, trees::Node node, BlockPartition part) {
  (void)rank;
  // Reduction order is nearest subtree first; a broadcast wants the largest
  // (farthest) subtree served first, as it has the longest way to go.
  std::vector<int> kids(node.children.rbegin(), node.children.rend());
  const long b = part.blocks;
  if (node.parent < 0) {
    for (long j = 0; j < b; ++j)
      for (int kid : kids) {
        Step s;
        s.send = part.transfer(j, kid);
        if (!s.empty()) co_yield s;
      }
    co_return;
  }
  for (long j = 0; j <= b; ++j) {
    Step first;
    first.recv = part.transfer(j, node.parent);
    if (!kids.empty()) first.send = part.transfer(j - 1, kids.back());
    if (!first.empty()) co_yield first;
    for (std::size_t c = 0; c + 1 < kids.size(); ++c) {
      Step s;
      s.send = part.transfer(j, kids[c]);
      if (!s.empty()) co_yield s;
    }
  }
}

// Träff 2021, Algorithm 1. A rank at depth d runs rounds j = 0..b+d. In round
// j it exchanges with each child (sending result block j-(d+1), receiving
// partial block j) and then with its parent (sending partial block j,
// receiving result block j-d); a root exchanges partial block j with its dual
// instead. Parent and child use the same j for the same pair of blocks, which
// is why the rounds need no global clock.
//
// The paper's loop stops at j = b+d-1, which never sends the last result block
// b-1 to the children (a root would need round b for it); running to b+d
// inclusive fixes that: the extra round only sends downwards. Example, p = 2,
// b = 2 (two single-rank trees, roots 0 and 1, d = 0): rounds j = 0, 1 each
// exchange block j with the dual; round 2 is all void and yields nothing.
RankSchedule doubly_pipelined_allreduce(int rank, trees::Node node, int dual, BlockPartition part) {
  const long d = node.depth;
  const long last_round = part.blocks + d;
  // One Step for every yield: the simulator holds every rank's frame at once
  // (2^24 of them), and a frame keeps a slot for each local of its own.
  Step s;
  for (long j = 0; j <= last_round; ++j) {
    for (int child : node.children) {
      s = Step{};
      s.send = part.transfer(j - (d + 1), child);
      s.recv = part.transfer(j, child);
      s.combine = side_of(child, rank);
      if (!s.empty()) co_yield s;
    }
    s = Step{};
    if (node.parent >= 0) {
      s.send = part.transfer(j, node.parent);
      s.recv = part.transfer(j - d, node.parent);
      s.combine = Combine::replace;
    } else if (dual >= 0) {
      // For a non-commutative operator the lower root computes Y ⊙ t, the
      // upper root t ⊙ Y (Algorithm 1, line 8).
      s.send = part.transfer(j, dual);
      s.recv = part.transfer(j, dual);
      s.combine = side_of(dual, rank);
    }
    if (!s.empty()) co_yield s;
  }
}

namespace {
Transfer ranks_region(int peer, const trees::Node& subtree, std::uint64_t block) {
  const auto lo = static_cast<std::uint64_t>(subtree.lo) * block;
  const auto hi = (static_cast<std::uint64_t>(subtree.hi) + 1) * block;
  return hi > lo ? Transfer{peer, lo, hi - lo} : Transfer{};
}
}  // namespace

RankSchedule tree_gather(int rank, trees::Node node, std::vector<trees::Node> children, std::uint64_t block) {
  (void)rank;
  for (std::size_t c = 0; c < children.size(); ++c) {
    Step s;
    s.recv = ranks_region(node.children[c], children[c], block);
    if (!s.empty()) co_yield s;
  }
  Step up;
  up.send = ranks_region(node.parent, node, block);
  if (!up.empty()) co_yield up;
}

RankSchedule tree_scatter(int rank, trees::Node node, std::vector<trees::Node> children, std::uint64_t block) {
  (void)rank;
  Step down;
  down.recv = ranks_region(node.parent, node, block);
  if (!down.empty()) co_yield down;
  for (std::size_t c = children.size(); c-- > 0;) {  // farthest subtree first, as in tree_bcast
    Step s;
    s.send = ranks_region(node.children[c], children[c], block);
    if (!s.empty()) co_yield s;
  }
}

RankSchedule reversed(RankSchedule inner) {
  std::vector<Step> steps;
  while (inner.next()) {
    const Step& s = inner.value();
    if (s.copy.count > 0 || (s.recv && s.combine != Combine::replace))
      throw ScheduleError("patterns::reversed: step " + std::to_string(steps.size()) +
                          " combines or copies, which does not run backwards");
    steps.push_back(s);
  }
  for (auto s = steps.rbegin(); s != steps.rend(); ++s) {
    Step back;
    back.send = s->recv;
    back.recv = s->send;
    co_yield back;
  }
}

SchedulePlan reversed(SchedulePlan plan) {
  return [plan = std::move(plan)](int rank) { return reversed(plan(rank)); };
}

RankSchedule forward(int rank, int from, int to, BlockPartition part) {
  if (from == to || (rank != from && rank != to)) co_return;
  for (long j = 0; j < part.blocks; ++j) {
    Step s;
    if (rank == from)
      s.send = part.transfer(j, to);
    else
      s.recv = part.transfer(j, from);
    if (!s.empty()) co_yield s;
  }
}

namespace {

using builders::fold_in;
using builders::fold_out;
using builders::PowerOfTwoFold;
using builders::region;

// The region butterfly rank n holds before its halving at `level` (at level
// log2 p2: its share). A halving gives the rank whose bit is clear the lower
// floor(s/2) of its s elements, the other the upper ceil(s/2) = floor((s+1)/2);
// since floor((floor(x/m) + b)/2) = floor((x + b m)/(2m)), the size before
// level k is floor((count + (n mod 2^k)) / 2^k), and the region starts after
// the lower halves given away at the set bits i < k. A closed form rather
// than the halvings one by one, so that a step cursor can compute any level's
// step alone. Only the start takes a loop: with Offsets::none the region is
// [0, size), its size right.
Share region_before(int n, int level, std::uint64_t count, Offsets offsets = Offsets::computed) {
  const auto bits = static_cast<std::uint64_t>(n);
  const auto below = [bits](int k) { return bits & ((std::uint64_t{1} << k) - 1); };
  std::uint64_t lo = 0;
  const int summed = offsets == Offsets::computed ? level : 0;
  for (int i = 0; i < summed; ++i)  // without a branch on the bit, which no predictor guesses
    lo += ((count + below(i)) >> (i + 1)) & (std::uint64_t{0} - ((bits >> i) & 1));
  return Share{lo, lo + ((count + below(level)) >> level)};
}

// The region before and the one after butterfly rank n's halving at `level`.
struct Halving {
  Share held, kept;
};
Halving halving_at(int n, int level, std::uint64_t count, Offsets offsets) {
  const Share held = region_before(n, level, count, offsets);
  const std::uint64_t mid = held.lo + (held.hi - held.lo) / 2;
  return {held, (n & (1 << level)) == 0 ? Share{held.lo, mid} : Share{mid, held.hi}};  // bit clear: the lower half
}

int butterfly_levels(const PowerOfTwoFold& fold) { return std::countr_zero(static_cast<unsigned>(fold.p2)); }

}  // namespace

Share halving_share(int rank, int p, std::uint64_t count) {
  const PowerOfTwoFold fold(p);
  const int n = fold.new_rank(rank);
  return n < 0 ? Share{} : region_before(n, butterfly_levels(fold), count);
}

int halving_positions(int p) { return butterfly_levels(PowerOfTwoFold(p)) + 1; }

Step halving_step(int rank, int p, std::uint64_t count, int position, Offsets offsets) {
  const PowerOfTwoFold fold(p);
  if (position == 0) return fold_in(fold, rank, count);
  const int n = fold.new_rank(rank), level = position - 1;
  if (n < 0) return {};
  const int partner = fold.old_rank(n ^ (1 << level));
  const auto [held, keep] = halving_at(n, level, count, offsets);
  const Share give = (n & (1 << level)) == 0 ? Share{keep.hi, held.hi} : Share{held.lo, keep.lo};
  Step s;
  s.send = region(partner, give.lo, give.hi);
  s.recv = region(partner, keep.lo, keep.hi);
  s.combine = side_of(partner, rank);
  return s;
}

RankSchedule halving_reduce_scatter(int rank, int p, std::uint64_t count) {
  for (int i = 0, end = halving_positions(p); i < end; ++i)
    if (auto s = halving_step(rank, p, count, i); !s.empty()) co_yield s;
}

Step doubling_step(int rank, int p, std::uint64_t count, int position, bool to_zero, Offsets offsets) {
  const PowerOfTwoFold fold(p);
  const int levels = butterfly_levels(fold);
  if (position == levels) {
    // Folded ranks get the result back; towards rank 0 only rank 0 needs it.
    if (to_zero && rank > 1) return {};
    return fold_out(fold, rank, count);
  }
  const int n = fold.new_rank(rank), level = levels - 1 - position, bit = 1 << level;
  if (n < 0) return {};
  if (to_zero && (n & ~((bit << 1) - 1)) != 0) return {};  // already handed its region on
  const int partner = fold.old_rank(n ^ bit);
  const auto [whole_region, mine] = halving_at(n, level, count, offsets);
  const bool kept_lower = (n & bit) == 0;
  const Share theirs = kept_lower ? Share{mine.hi, whole_region.hi} : Share{whole_region.lo, mine.lo};
  Step s;
  if (!to_zero || !kept_lower) s.send = region(partner, mine.lo, mine.hi);
  if (!to_zero || kept_lower) s.recv = region(partner, theirs.lo, theirs.hi);
  return s;
}

namespace {

// Retraces the halvings of `rank`; `to_zero`: only towards butterfly rank 0.
RankSchedule doubling(int rank, int p, std::uint64_t count, bool to_zero) {
  for (int i = 0, end = halving_positions(p); i < end; ++i)
    if (auto s = doubling_step(rank, p, count, i, to_zero); !s.empty()) co_yield s;
}

}  // namespace

RankSchedule doubling_allgather(int rank, int p, std::uint64_t count) { return doubling(rank, p, count, false); }

RankSchedule doubling_gather_to_zero(int rank, int p, std::uint64_t count) { return doubling(rank, p, count, true); }

trees::Node relabel(trees::Node node, int shift, int p) {
  auto map = [&](int r) { return r < 0 ? r : (r + shift) % p; };
  node.parent = map(node.parent);
  for (int& c : node.children) c = map(c);
  return node;
}

RankSchedule on_ranks(RankSchedule inner, std::shared_ptr<const std::vector<int>> global, std::uint64_t base) {
  while (inner.next()) {
    Step s = inner.value();
    if (s.send) s.send.peer = (*global)[static_cast<std::size_t>(s.send.peer)];
    if (s.recv) s.recv.peer = (*global)[static_cast<std::size_t>(s.recv.peer)];
    s.send.offset += base;
    s.recv.offset += base;
    s.copy.from += base;
    s.copy.to += base;
    co_yield s;
  }
}

namespace {

// The contiguous runs of [offset, offset + count) once placed; a transfer of
// nothing stays one (empty) transfer.
std::vector<Transfer> placed_runs(const Transfer& t, const std::vector<int>& global, const Placement& where) {
  if (!t) return {};
  const std::int32_t peer = global[static_cast<std::size_t>(t.peer)];
  if (t.count == 0 || where.unit == 0) return {Transfer{peer, where.base, 0}};
  std::vector<Transfer> runs;
  for (std::uint64_t done = 0; done < t.count;) {
    const std::uint64_t from = t.offset + done;
    const std::uint64_t length = std::min(where.unit - from % where.unit, t.count - done);
    const std::uint64_t at = where.at(from);
    if (!runs.empty() && runs.back().offset + runs.back().count == at)
      runs.back().count += length;
    else
      runs.push_back(Transfer{peer, at, length});
    done += length;
  }
  return runs;
}

}  // namespace

RankSchedule placed(RankSchedule inner, std::shared_ptr<const std::vector<int>> global, Placement where) {
  while (inner.next()) {
    const Step s = inner.value();
    const std::vector<Transfer> sends = placed_runs(s.send, *global, where);
    const std::vector<Transfer> recvs = placed_runs(s.recv, *global, where);
    for (std::size_t j = 0; j < std::max(sends.size(), recvs.size()); ++j) {
      Step t;
      if (j < sends.size()) t.send = sends[j];
      if (j < recvs.size()) t.recv = recvs[j];
      t.combine = s.combine;
      co_yield t;
    }
    for (std::uint64_t done = 0; where.unit > 0 && done < s.copy.count;) {  // units may split either end
      const std::uint64_t from = s.copy.from + done, to = s.copy.to + done;
      Step t;
      t.copy.count = std::min({where.unit - from % where.unit, where.unit - to % where.unit, s.copy.count - done});
      t.copy.from = where.at(from);
      t.copy.to = where.at(to);
      done += t.copy.count;
      co_yield t;
    }
  }
}

}  // namespace copse::patterns
