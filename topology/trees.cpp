// Tree builders (see trees.hpp for the contract every builder keeps).
//
// The single-rank builders (post-order binary, dual-root, binomial, k-ary,
// chain, flat) answer a query for one rank by descending from the root over
// rank ranges: O(depth) time, no O(p) tables, so a simulator can ask about
// one rank of a million-rank tree cheaply. Only TwoTree keeps tables, because
// its edge colouring is a global property that cannot be read off one rank.

#include "topology/trees.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/error.hpp"

namespace copse::trees {
namespace {

void require_ranks(int p, const char* who) {
  if (p < 1) throw UsageError(std::string(who) + ": p must be >= 1, got " + std::to_string(p));
}

void require_rank_in(int lo, int hi, int rank, const char* who) {
  if (rank < lo || rank > hi) {
    throw UsageError(std::string(who) + ": rank " + std::to_string(rank) + " outside [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Post-order binary tree (Träff 2021 §1.1).
//
// A range [a, b] is rooted at b; the other m = b - a ranks split into a lower
// part of ceil(m/2) ranks and an upper part of floor(m/2) ranks, each a
// post-order tree rooted at its own highest rank. Example, [0, 5]:
//
//              5              5 receives from 4 first: [3,4] then [3,5];
//            /   \            then from 2: [0,2] then [0,5].
//           4     2
//          /     / \          depth 2 = ceil(log2(6+1)) - 1
//         3     1   0
//
// The contract puts the surplus rank of an odd split in the lower part, so
// the first child (i-1, received first) never roots the larger subtree. The
// depth recurrence D(n) = 1 + D(ceil((n-1)/2)), D(1) = 0 solves to
// floor(log2 n), which equals the contract's ceil(log2(n+1)) - 1.
Node post_order_binary_range(int lo, int hi, int rank) {
  if (lo > hi) {
    throw UsageError("post_order_binary: empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  require_rank_in(lo, hi, rank, "post_order_binary");

  Node node;
  int range_lo = lo, range_hi = hi;  // subtree currently descended into; root range_hi
  while (range_hi != rank) {
    // 64-bit: hi - lo may not fit in int for extreme ranges such as [INT_MIN, INT_MAX].
    const std::int64_t below_root = std::int64_t{range_hi} - range_lo;
    const int lower_last = static_cast<int>(range_lo + (below_root + 1) / 2 - 1);
    node.parent = range_hi;
    ++node.depth;
    if (rank > lower_last) {  // upper part [lower_last+1, range_hi-1]
      range_lo = lower_last + 1;
      range_hi = range_hi - 1;
    } else {  // lower part [range_lo, lower_last]
      range_hi = lower_last;
    }
  }
  node.lo = range_lo;
  node.hi = range_hi;

  const std::int64_t below_root = std::int64_t{range_hi} - range_lo;
  if (below_root >= 1) {
    const int lower_last = static_cast<int>(range_lo + (below_root + 1) / 2 - 1);
    if (below_root >= 2) node.children.push_back(range_hi - 1);  // upper part: nearest
    node.children.push_back(lower_last);
  }
  return node;
}

// ---------------------------------------------------------------------------
// Dual-root pair (Träff 2021 §1.1): two post-order trees whose roots exchange
// partial results. The lower tree gets the extra rank for odd p, matching the
// post-order split. p = 5: trees over [0,2] (root 2) and [3,4] (root 4).
DualRootNode dual_root(int p, int rank) {
  require_ranks(p, "dual_root");
  require_rank_in(0, p - 1, rank, "dual_root");

  const int lower_size = static_cast<int>((std::int64_t{p} + 1) / 2);
  const int lower_root = lower_size - 1;
  const int upper_root = p - 1;

  DualRootNode result;
  if (rank < lower_size) {
    result.node = post_order_binary_range(0, lower_root, rank);
  } else {
    result.node = post_order_binary_range(lower_size, upper_root, rank);
  }
  if (p > 1) {
    if (rank == lower_root) result.dual = upper_root;
    if (rank == upper_root) result.dual = lower_root;
  }
  return result;
}

// ---------------------------------------------------------------------------
// Binomial tree rooted at 0. The parent of r clears r's lowest set bit, so
// r's subtree is [r, r + lowbit(r) - 1] clipped to p, and depth(r) is the
// number of set bits of r (at most the bit length of p-1 = ceil(log2 p)).
// Children r+1, r+2, r+4, ... are in nearest-first order: after receiving
// from r + 2^j the rank holds [r, r + 2^(j+1) - 1].
Node binomial(int p, int rank) {
  require_ranks(p, "binomial");
  require_rank_in(0, p - 1, rank, "binomial");

  const auto r = static_cast<std::uint32_t>(rank);
  const auto ranks = static_cast<std::uint64_t>(p);
  // Span of the subtree in the infinite binomial tree; rank 0 spans everything.
  const std::uint64_t span = r == 0 ? ranks : std::uint64_t{r & (~r + 1)};

  Node node;
  node.parent = r == 0 ? -1 : static_cast<int>(r & (r - 1));
  node.depth = std::popcount(r);
  node.lo = rank;
  node.hi = static_cast<int>(std::min<std::uint64_t>(r + span, ranks) - 1);
  for (std::uint64_t step = 1; step < span && r + step < ranks; step <<= 1) {
    node.children.push_back(static_cast<int>(r + step));
  }
  return node;
}

// ---------------------------------------------------------------------------
// k-ary pre-order tree rooted at 0. A subtree [a, b] is rooted at a; the other
// m = b - a ranks split into min(k, m) contiguous ranges whose sizes differ by
// at most one, the earlier (nearer) ranges taking the extra ranks -- the same
// convention as the post-order tree, and it keeps the depth minimal: with
// S(d) = 1 + k + ... + k^d, a tree of n ranks has depth min{d : S(d) >= n}.
// Example p = 8, k = 3: 0 has children 1 ([1,3]), 4 ([4,5]), 6 ([6,7]).
Node kary(int p, int k, int rank) {
  require_ranks(p, "kary");
  if (k < 1) throw UsageError("kary: fan-out k must be >= 1, got " + std::to_string(k));
  require_rank_in(0, p - 1, rank, "kary");

  // Child ranges of the subtree [a, b]: the i-th one starts at
  // a + 1 + i*base + min(i, extra) and holds base + (i < extra) ranks.
  struct Split {
    std::int64_t base, extra, count;
    std::int64_t start(std::int64_t first, std::int64_t i) const { return first + i * base + std::min(i, extra); }
  };
  auto split = [k](std::int64_t a, std::int64_t b) {
    const std::int64_t m = b - a;
    return Split{m / k, m % k, std::min<std::int64_t>(k, m)};
  };

  Node node;
  std::int64_t a = 0, b = p - 1;
  while (a != rank) {
    const Split s = split(a, b);
    const std::int64_t offset = rank - (a + 1);
    const std::int64_t big_span = s.extra * (s.base + 1);  // ranks in the larger ranges
    const std::int64_t i = offset < big_span ? offset / (s.base + 1) : s.extra + (offset - big_span) / s.base;
    node.parent = static_cast<int>(a);
    ++node.depth;
    const std::int64_t first = s.start(a + 1, i);
    b = first + s.base + (i < s.extra ? 1 : 0) - 1;
    a = first;
  }
  node.lo = static_cast<int>(a);
  node.hi = static_cast<int>(b);
  const Split s = split(a, b);
  node.children.reserve(static_cast<std::size_t>(s.count));
  for (std::int64_t i = 0; i < s.count; ++i) node.children.push_back(static_cast<int>(s.start(a + 1, i)));
  return node;
}

// ---------------------------------------------------------------------------
Node chain(int p, int rank) {
  require_ranks(p, "chain");
  require_rank_in(0, p - 1, rank, "chain");
  Node node;
  node.parent = rank == p - 1 ? -1 : rank + 1;
  if (rank > 0) node.children.push_back(rank - 1);
  node.depth = p - 1 - rank;
  node.lo = 0;
  node.hi = rank;
  return node;
}

Node flat(int p, int rank) {
  require_ranks(p, "flat");
  require_rank_in(0, p - 1, rank, "flat");
  Node node;
  if (rank == 0) {
    node.lo = 0;
    node.hi = p - 1;
    node.children.reserve(static_cast<std::size_t>(p - 1));
    for (int child = 1; child < p; ++child) node.children.push_back(child);
  } else {
    node.parent = 0;
    node.depth = 1;
    node.lo = node.hi = rank;
  }
  return node;
}

// ---------------------------------------------------------------------------
// Two-tree (Sanders, Speck, Träff 2009).
//
// Tree t works on the values v = rank + 1 + t, i.e. over [1+t, p+t]. In the
// infinite in-order tree on the positive integers, v with key c = ctz(v) has
// subtree [v - 2^c + 1, v + 2^c - 1] and children v -/+ 2^(c-1): everything
// strictly inside has a smaller key and v -/+ 2^c have larger keys. The
// Cartesian tree of a window [L, R] is that tree clipped to the window: v's
// subtree is its infinite subtree intersected with [L, R], and its child on
// each side is the largest-key value in that side's clipped part, which for
// the part (v, v + d] is v + bit_floor(d) (keys of v + x equal ctz(x) for
// 0 < x < 2^c). Every step down strictly lowers the key, and the root is the
// largest power of two <= R, so height(t) <= floor(log2(p + t)); the
// left spine 2^K, 2^(K-1), ... reaches depth exactly that for tree 0 (down
// to value 1), and for tree 1 when p >= 2 (down to value 2, then 3). Odd values have key 0 and are leaves,
// hence interior ranks are odd in tree 0 and even in tree 1.
//
// Colouring. Give each rank an up port (its edges to parents, one per tree it
// is not the root of) and a down port (its edges to children, all in the one
// tree where it is interior, so at most two). Every tree edge joins a child's
// up port to its parent's down port: a bipartite graph of maximum degree 2,
// i.e. disjoint paths and even cycles, which alternate colours properly.
// Walking each component from any edge outwards in both directions colours it.
//
// Worked example, p = 6 (ranks 0..5). Tree 0 uses values 1..6 (root value 4
// = rank 3), tree 1 values 2..7 (root value 4 = rank 2):
//
//   rank                 0   1   2   3   4   5
//   tree 0 parent        1   3   1   -   5   3    children 3:{1,5} 1:{0,2} 5:{4}
//   tree 1 parent        2   0   -   4   2   4    children 2:{0,4} 0:{1} 4:{3,5}
//   tree 0 edge colour   0   0   1   -   1   1
//   tree 1 edge colour   1   1   -   1   0   0
//
// Interior ranks: {1, 3, 5} in tree 0, {0, 2, 4} in tree 1. Clipping at
// work: rank 5 in tree 0 is value 6 (key 1), whose infinite subtree [5, 7]
// clips to [5, 6], i.e. ranks [4, 5], so its only child is rank 4. The walk starts at edge 0->1 (tree 0, colour 0). Out
// of 0's up port: 0->2 (tree 1, colour 1); out of 2's down port: 4->2 (tree 1, colour 0); out of 4's up port: 4->5
// (tree 0, colour 1); 5 has no other child, the path ends. Back out of 1's down port: 2->1 (tree 0, colour 1); 2 is
// tree 1's root, the path ends. The next walk starts at 1->3 (colour 0), and so on. Check: each rank's two parent edges
// differ (0: 0/1, 4: 1/0, ...) and each rank's two child edges differ (3 receives from 1 on colour 0 and from 5 on
// colour 1; 4 from 3 on colour 1 and from 5 on colour 0).

namespace {

constexpr int kNone = -1;

// Cartesian-tree facts for value v in the window [L, R] (see above).
struct Window {
  std::int64_t lo_value, hi_value;  // [L, R]

  static std::int64_t key_span(std::int64_t v) {  // 2^ctz(v)
    return v & -v;
  }
  std::int64_t subtree_lo(std::int64_t v) const { return std::max(lo_value, v - key_span(v) + 1); }
  std::int64_t subtree_hi(std::int64_t v) const { return std::min(hi_value, v + key_span(v) - 1); }
  std::int64_t lower_child(std::int64_t v) const {
    const std::int64_t reach = v - subtree_lo(v);
    return reach > 0 ? v - static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(reach))) : kNone;
  }
  std::int64_t upper_child(std::int64_t v) const {
    const std::int64_t reach = subtree_hi(v) - v;
    return reach > 0 ? v + static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(reach))) : kNone;
  }
  std::int64_t root() const { return static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(hi_value))); }
};

Window window_of(int p, int tree) { return Window{1 + tree, std::int64_t{p} + tree}; }

}  // namespace

TwoTree::TwoTree(int p) : p_(p) {
  require_ranks(p, "TwoTree");
  const auto n = static_cast<std::size_t>(p);

  for (int tree = 0; tree < 2; ++tree) {
    const Window window = window_of(p, tree);
    const std::int64_t offset = 1 + tree;  // value = rank + offset
    parent_[tree].assign(n, kNone);
    child_[tree][0].assign(n, kNone);
    child_[tree][1].assign(n, kNone);
    depth_[tree].assign(n, 0);
    root_[tree] = static_cast<int>(window.root() - offset);

    for (std::int64_t v = window.lo_value; v <= window.hi_value; ++v) {
      const auto rank = static_cast<std::size_t>(v - offset);
      const std::int64_t lower = window.lower_child(v), upper = window.upper_child(v);
      if (lower != kNone) {
        child_[tree][0][rank] = static_cast<std::int32_t>(lower - offset);
        parent_[tree][static_cast<std::size_t>(lower - offset)] = static_cast<std::int32_t>(rank);
      }
      if (upper != kNone) {
        child_[tree][1][rank] = static_cast<std::int32_t>(upper - offset);
        parent_[tree][static_cast<std::size_t>(upper - offset)] = static_cast<std::int32_t>(rank);
      }
    }

    // Depths top-down in breadth-first order (the queue doubles as the order).
    std::vector<std::int32_t> order;
    order.reserve(n);
    order.push_back(root_[tree]);
    int height = 0;
    for (std::size_t next = 0; next < order.size(); ++next) {
      const auto rank = static_cast<std::size_t>(order[next]);
      height = std::max<int>(height, depth_[tree][rank]);
      for (int side = 0; side < 2; ++side) {
        const std::int32_t child = child_[tree][side][rank];
        if (child == kNone) continue;
        depth_[tree][static_cast<std::size_t>(child)] = static_cast<std::uint8_t>(depth_[tree][rank] + 1);
        order.push_back(child);
      }
    }
    height_[tree] = height;
  }

  // Edge (tree, c) is the edge from c to its parent in that tree.
  colour_[0].assign(n, -1);
  colour_[1].assign(n, -1);

  // Continue a walk: the edge (tree, c) has just been coloured and the walk
  // leaves it through its up endpoint (c's other parent edge) or its down
  // endpoint (the parent's other child edge, necessarily in the same tree,
  // since the parent is interior only there). Returns false at a path end or
  // when the walk closes a cycle.
  auto next_edge = [this](int& tree, int& child, bool through_up) {
    const auto c = static_cast<std::size_t>(child);
    if (through_up) {
      const int other = 1 - tree;
      if (parent_[other][c] == kNone) return false;
      tree = other;
    } else {
      const auto parent = static_cast<std::size_t>(parent_[tree][c]);
      const std::int32_t sibling = child_[tree][0][parent] == child ? child_[tree][1][parent] : child_[tree][0][parent];
      if (sibling == kNone) return false;
      child = sibling;
    }
    return colour_[tree][static_cast<std::size_t>(child)] == -1;
  };

  for (int start_tree = 0; start_tree < 2; ++start_tree) {
    for (int start = 0; start < p; ++start) {
      if (parent_[start_tree][static_cast<std::size_t>(start)] == kNone) continue;
      if (colour_[start_tree][static_cast<std::size_t>(start)] != -1) continue;
      colour_[start_tree][static_cast<std::size_t>(start)] = 0;
      // Walk out of both endpoints; consecutive edges share a port, so they
      // alternate colours. The port used alternates too: an edge entered
      // through its up endpoint is left through its down endpoint.
      for (bool first_through_up : {true, false}) {
        int tree = start_tree, child = start;
        std::int8_t colour = 0;
        bool through_up = first_through_up;
        while (next_edge(tree, child, through_up)) {
          colour = static_cast<std::int8_t>(1 - colour);
          colour_[tree][static_cast<std::size_t>(child)] = colour;
          through_up = !through_up;
        }
      }
    }
  }
}

namespace {
void require_tree(int tree, const char* who) {
  if (tree != 0 && tree != 1) {
    throw UsageError(std::string(who) + ": tree must be 0 or 1, got " + std::to_string(tree));
  }
}
}  // namespace

int TwoTree::root(int tree) const {
  require_tree(tree, "TwoTree::root");
  return root_[tree];
}

int TwoTree::height(int tree) const {
  require_tree(tree, "TwoTree::height");
  return height_[tree];
}

Node TwoTree::node(int tree, int rank) const {
  require_tree(tree, "TwoTree::node");
  require_rank_in(0, p_ - 1, rank, "TwoTree::node");
  const auto r = static_cast<std::size_t>(rank);
  const Window window = window_of(p_, tree);
  const std::int64_t offset = 1 + tree;

  Node node;
  node.parent = parent_[tree][r];
  node.depth = depth_[tree][r];
  node.lo = static_cast<int>(window.subtree_lo(rank + offset) - offset);
  node.hi = static_cast<int>(window.subtree_hi(rank + offset) - offset);
  for (int side = 0; side < 2; ++side) {
    if (child_[tree][side][r] != kNone) node.children.push_back(child_[tree][side][r]);
  }
  return node;
}

int TwoTree::parent(int tree, int rank) const {
  require_tree(tree, "TwoTree::parent");
  require_rank_in(0, p_ - 1, rank, "TwoTree::parent");
  return parent_[tree][static_cast<std::size_t>(rank)];
}

int TwoTree::child(int tree, int side, int rank) const {
  require_tree(tree, "TwoTree::child");
  if (side != 0 && side != 1) throw UsageError("TwoTree::child: side must be 0 or 1, got " + std::to_string(side));
  require_rank_in(0, p_ - 1, rank, "TwoTree::child");
  return child_[tree][side][static_cast<std::size_t>(rank)];
}

int TwoTree::depth(int tree, int rank) const {
  require_tree(tree, "TwoTree::depth");
  require_rank_in(0, p_ - 1, rank, "TwoTree::depth");
  return depth_[tree][static_cast<std::size_t>(rank)];
}

int TwoTree::colour(int tree, int rank) const {
  require_tree(tree, "TwoTree::colour");
  require_rank_in(0, p_ - 1, rank, "TwoTree::colour");
  return colour_[tree][static_cast<std::size_t>(rank)];
}

}  // namespace copse::trees
