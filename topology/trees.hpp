#pragma once
// Tree builders: pure functions of (p, rank), no transport in sight.
//
// Every tree here is order-preserving: the subtree of any rank is a
// contiguous range of ranks, and a rank's children are listed in the order a
// reduction must receive them so that what it holds stays contiguous --
// nearest rank range first. A child below the rank is combined on the left
// (child ⊙ held), a child above it on the right (held ⊙ child). That is what
// lets every tree algorithm serve non-commutative operators.
//
// Ranks are 0..p-1; p >= 1. A query for a rank outside [0, p) throws
// std::out_of_range; p < 1 or k < 1 throws copse::UsageError.

#include <cstdint>
#include <vector>

namespace copse::trees {

struct Node {
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // reduction receive order: nearest subtree first
  int depth = 0;              // edges from the root
  int lo = 0, hi = 0;         // the subtree of this rank is exactly [lo, hi]
};

// Post-order binary tree over [lo, hi] (Träff 2021 §1.1): the root is hi; the
// first child of i is i-1, whose subtree is the upper part of the remaining
// range, and the second child roots the lower part. Sizes split as evenly as
// possible (the lower part takes the extra rank), which keeps the tree as
// balanced and complete as possible: depth = ceil(log2(n+1)) - 1 for n ranks.
Node post_order_binary_range(int lo, int hi, int rank);
// The same tree over [0, p): one name with no overload, so it serves as a
// tree-shape function pointer.
inline Node post_order_binary(int p, int rank) { return post_order_binary_range(0, p - 1, rank); }

// Träff's dual-root pair: post-order trees over [0, ceil(p/2)) and
// [ceil(p/2), p); each root's `dual` is the other root (-1 for p == 1 and for
// non-roots).
struct DualRootNode {
  Node node;
  int dual = -1;
};
DualRootNode dual_root(int p, int rank);

// Binomial tree rooted at 0: rank r receives from r+1, r+2, r+4, ... while
// that bit of r is clear and the child exists; depth <= ceil(log2 p).
Node binomial(int p, int rank);

// k-ary tree (fan-out k >= 1) rooted at 0 in pre-order: the ranks after the
// root are split into at most k contiguous ranges, as even as possible, each
// rooted at its first rank; nearer ranges take the extra ranks. k = 1 is a
// chain from 0 to p-1.
Node kary(int p, int k, int rank);

// Chain rooted at p-1: the child of i is i-1 (so data flows up the ranks).
Node chain(int p, int rank);

// Flat tree rooted at 0: every other rank is a child of the root.
Node flat(int p, int rank);

// Two-tree (Sanders, Speck, Träff 2009; as used in Träff 2021 §1.2 and by
// Lowery–Langou): two binary trees over the same p ranks such that every rank
// is interior (has children) in at most one of them, and an edge colouring
// with two colours such that the two edges from a rank to its parents (one per
// tree) differ in colour, and the child edges of any rank differ in colour.
// In a step of colour c every rank uses only its colour-c edges, so it sends
// on at most one edge and receives on at most one edge per step while
// alternating between the trees.
//
// Construction: both trees are Cartesian trees of the rank sequence keyed by
// the number of trailing zero bits -- tree 0 by ctz(rank+1), tree 1 by
// ctz(rank+2). A Cartesian tree is in-order, so subtrees are contiguous rank
// ranges (order-preserving); keys >= 1 are odd ranks in tree 0 and even ranks
// in tree 1, so the interior sets are disjoint. Heights are exactly floor(log2 p)
// for tree 0 and floor(log2(p+1)) for tree 1 (0 when p = 1): going down
// always lowers the key, and the root's key is floor(log2(p+t)).
// The colouring is a 2-edge-colouring of a bipartite graph of maximum degree
// 2 (a rank's "upward" port versus its "downward" port), found by walking its
// paths and even cycles. Built once per p in O(p) time and memory.
class TwoTree {
 public:
  explicit TwoTree(int p);
  int ranks() const { return p_; }
  int root(int tree) const;
  int height(int tree) const;            // largest depth in that tree
  Node node(int tree, int rank) const;   // children: the lower child first
  int colour(int tree, int rank) const;  // colour of rank -> parent edge; -1 at the root
  // node()'s parts without building a Node: at millions of ranks its vector
  // is most of the cost.
  int parent(int tree, int rank) const;           // -1 at the root
  int child(int tree, int side, int rank) const;  // side 0 the lower child, 1 the upper; -1 if absent
  int depth(int tree, int rank) const;

 private:
  int p_;
  std::vector<std::int32_t> parent_[2];
  std::vector<std::int32_t> child_[2][2];  // [tree][lower, upper]; -1 if absent
  std::vector<std::uint8_t> depth_[2];
  std::vector<std::int8_t> colour_[2];
  int root_[2] = {0, 0};
  int height_[2] = {0, 0};
};

}  // namespace copse::trees
