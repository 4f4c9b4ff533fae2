// Exhaustive property tests for the tree builders in topology/trees.hpp.
//
// Every builder is checked for every p in 1..1024 (and a few p around 2^20)
// against the contract's properties rather than against stored outputs: the
// tree spans all ranks and is acyclic, parent and children agree, [lo, hi]
// is exactly the set of descendants, receiving the children in the listed
// order keeps the held range contiguous, and the builder-specific depth,
// shape and colouring rules hold.
//
// The checks run in plain loops and report the first violation as a string,
// so a failure names p, the rank and the property, while a passing run costs
// a handful of Catch2 assertions per p instead of millions.

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "topology/trees.hpp"

namespace {

using copse::trees::Node;

constexpr int kExhaustiveMaxP = 1024;

// Smallest d with 2^d >= n (n >= 1), by counting rather than by a formula the
// code under test might share.
int ceil_log2(std::int64_t n) {
  int d = 0;
  while ((std::int64_t{1} << d) < n) ++d;
  return d;
}

// Largest d with 2^d <= n (n >= 1).
int floor_log2(std::int64_t n) {
  int d = 0;
  while ((std::int64_t{2} << d) <= n) ++d;
  return d;
}

std::vector<Node> collect(int first_rank, int count, const std::function<Node(int)>& node_of) {
  std::vector<Node> nodes;
  nodes.reserve(static_cast<std::size_t>(count));
  for (int rank = first_rank; rank < first_rank + count; ++rank) nodes.push_back(node_of(rank));
  return nodes;
}

struct TreeFacts {
  int root = -1;
  int height = 0;
  std::vector<int> subtree_size;  // indexed by rank - first_rank
};

// Checks the properties every tree of the contract has, for a tree over the
// ranks [first_rank, first_rank + nodes.size()). Returns "" or the first
// violation found.
std::string check_tree(int first_rank, const std::vector<Node>& nodes, TreeFacts& facts) {
  const int count = static_cast<int>(nodes.size());
  const int last_rank = first_rank + count - 1;
  auto in_tree = [&](int rank) { return rank >= first_rank && rank <= last_rank; };
  auto at = [&](int rank) -> const Node& { return nodes[static_cast<std::size_t>(rank - first_rank)]; };
  std::ostringstream problem;

  // One root; every parent in the tree; depth one more than the parent's.
  // Depth strictly increasing along every parent edge rules out cycles, so
  // every rank's parent walk ends at the unique root: the tree spans.
  facts = TreeFacts{};
  for (int rank = first_rank; rank <= last_rank; ++rank) {
    const Node& node = at(rank);
    if (node.parent == -1) {
      if (facts.root != -1) {
        problem << "two roots " << facts.root << " and " << rank;
        return problem.str();
      }
      if (node.depth != 0) {
        problem << "root " << rank << " has depth " << node.depth;
        return problem.str();
      }
      facts.root = rank;
    } else if (!in_tree(node.parent) || node.parent == rank) {
      problem << "rank " << rank << " has parent " << node.parent;
      return problem.str();
    } else if (node.depth != at(node.parent).depth + 1) {
      problem << "rank " << rank << " depth " << node.depth << " but parent " << node.parent << " depth "
              << at(node.parent).depth;
      return problem.str();
    }
    facts.height = std::max(facts.height, node.depth);
  }
  if (facts.root == -1) return "no root";

  // Children lists and parent pointers describe the same edges, each once.
  std::vector<char> listed(static_cast<std::size_t>(count), 0);
  int edges = 0;
  for (int rank = first_rank; rank <= last_rank; ++rank) {
    for (int child : at(rank).children) {
      if (!in_tree(child) || at(child).parent != rank || listed[static_cast<std::size_t>(child - first_rank)]) {
        problem << "rank " << rank << " lists child " << child << " wrongly";
        return problem.str();
      }
      listed[static_cast<std::size_t>(child - first_rank)] = 1;
      ++edges;
    }
  }
  if (edges != count - 1) {
    problem << edges << " child entries for " << count << " ranks";
    return problem.str();
  }

  // Descendant sets bottom-up (deepest ranks first): [lo, hi] must be their
  // exact hull, and the hull must hold no more ranks than the subtree does.
  std::vector<std::vector<int>> by_depth(static_cast<std::size_t>(facts.height) + 1);
  for (int rank = first_rank; rank <= last_rank; ++rank)
    by_depth[static_cast<std::size_t>(at(rank).depth)].push_back(rank);
  std::vector<int> desc_lo(static_cast<std::size_t>(count)), desc_hi(static_cast<std::size_t>(count));
  facts.subtree_size.assign(static_cast<std::size_t>(count), 0);
  for (int depth = facts.height; depth >= 0; --depth) {
    for (int rank : by_depth[static_cast<std::size_t>(depth)]) {
      const auto i = static_cast<std::size_t>(rank - first_rank);
      int lo = rank, hi = rank, size = 1;
      for (int child : at(rank).children) {
        const auto c = static_cast<std::size_t>(child - first_rank);
        lo = std::min(lo, desc_lo[c]);
        hi = std::max(hi, desc_hi[c]);
        size += facts.subtree_size[c];
      }
      desc_lo[i] = lo;
      desc_hi[i] = hi;
      facts.subtree_size[i] = size;
      if (at(rank).lo != lo || at(rank).hi != hi) {
        problem << "rank " << rank << " claims subtree [" << at(rank).lo << ", " << at(rank).hi
                << "] but descendants span [" << lo << ", " << hi << "]";
        return problem.str();
      }
      if (hi - lo + 1 != size) {
        problem << "rank " << rank << " subtree [" << lo << ", " << hi << "] has only " << size << " ranks";
        return problem.str();
      }
    }
  }

  // Reduction order: start holding [rank, rank]; each child's range must
  // attach directly below (child ⊙ held) or above (held ⊙ child).
  for (int rank = first_rank; rank <= last_rank; ++rank) {
    int held_lo = rank, held_hi = rank;
    for (int child : at(rank).children) {
      if (at(child).hi + 1 == held_lo) {
        held_lo = at(child).lo;
      } else if (at(child).lo == held_hi + 1) {
        held_hi = at(child).hi;
      } else {
        problem << "rank " << rank << " holding [" << held_lo << ", " << held_hi << "] cannot combine child " << child
                << " with [" << at(child).lo << ", " << at(child).hi << "]";
        return problem.str();
      }
    }
    if (held_lo != at(rank).lo || held_hi != at(rank).hi) {
      problem << "rank " << rank << " ends holding [" << held_lo << ", " << held_hi << "]";
      return problem.str();
    }
  }
  return "";
}

// Post-order specifics over [first_rank, ...]: the root is the highest rank,
// the first child of i is i-1, and the lower part takes the extra rank.
std::string check_post_order_shape(int first_rank, const std::vector<Node>& nodes, const TreeFacts& facts) {
  const int count = static_cast<int>(nodes.size());
  std::ostringstream problem;
  if (facts.root != first_rank + count - 1) {
    problem << "root " << facts.root;
    return problem.str();
  }
  const int expected_height = ceil_log2(std::int64_t{count} + 1) - 1;
  if (facts.height != expected_height) {
    problem << "height " << facts.height << ", expected " << expected_height;
    return problem.str();
  }
  for (int i = 0; i < count; ++i) {
    const Node& node = nodes[static_cast<std::size_t>(i)];
    const int rank = first_rank + i;
    const int below = facts.subtree_size[static_cast<std::size_t>(i)] - 1;
    if (node.children.size() > 2 || (below > 0 && node.children.front() != rank - 1)) {
      problem << "rank " << rank << " children do not start with rank-1";
      return problem.str();
    }
    if (below > 0) {
      // The last-listed child roots the lower part: ceil(below/2) ranks.
      const int lower_root = node.children.back();
      const int lower_size = facts.subtree_size[static_cast<std::size_t>(lower_root - first_rank)];
      if (lower_size != (below + 1) / 2 || nodes[static_cast<std::size_t>(lower_root - first_rank)].lo != node.lo) {
        problem << "rank " << rank << " lower part has " << lower_size << " of " << below << " ranks";
        return problem.str();
      }
      if ((below >= 2) != (node.children.size() == 2)) {
        problem << "rank " << rank << " has " << node.children.size() << " children for " << below << " ranks below";
        return problem.str();
      }
    }
  }
  return "";
}

bool same_node(const Node& a, const Node& b) {
  return a.parent == b.parent && a.children == b.children && a.depth == b.depth && a.lo == b.lo && a.hi == b.hi;
}

}  // namespace

using namespace copse::trees;

TEST_CASE("post_order_binary is a balanced post-order tree for every p", "[trees][post_order]") {
  auto check_p = [](int p) {
    INFO("p = " << p);
    const auto nodes = collect(0, p, [p](int rank) { return post_order_binary(p, rank); });
    TreeFacts facts;
    const std::string problem = check_tree(0, nodes, facts);
    REQUIRE(problem == "");
    REQUIRE(check_post_order_shape(0, nodes, facts) == "");
  };
  for (int p = 1; p <= kExhaustiveMaxP; ++p) check_p(p);
  check_p((1 << 20) - 1);
  check_p(1 << 20);
}

TEST_CASE("post_order_binary over [lo, hi] is the same tree shifted", "[trees][post_order]") {
  for (int lo : {1, 7, 1000}) {
    for (int n = 1; n <= 200; ++n) {
      INFO("lo = " << lo << ", n = " << n);
      const int hi = lo + n - 1;
      const auto nodes = collect(lo, n, [lo, hi](int rank) { return post_order_binary_range(lo, hi, rank); });
      TreeFacts facts;
      REQUIRE(check_tree(lo, nodes, facts) == "");
      REQUIRE(check_post_order_shape(lo, nodes, facts) == "");
    }
  }
  CHECK_THROWS_AS(post_order_binary_range(5, 9, 4), copse::UsageError);
  CHECK_THROWS_AS(post_order_binary_range(5, 9, 10), copse::UsageError);
  CHECK_THROWS_AS(post_order_binary_range(5, 4, 5), copse::UsageError);
}

TEST_CASE("post_order_binary answers one rank of a huge tree cheaply", "[trees][post_order]") {
  // Near the largest int p: the descent must neither overflow nor walk p ranks.
  const int p = 2'000'000'000;
  const Node root = post_order_binary(p, p - 1);
  CHECK(root.parent == -1);
  CHECK(root.lo == 0);
  CHECK(root.hi == p - 1);
  CHECK(root.children.size() == 2);
  const Node leaf = post_order_binary(p, 0);
  CHECK(leaf.children.empty());
  CHECK(leaf.lo == 0);
  CHECK(leaf.hi == 0);
  CHECK(leaf.depth == ceil_log2(std::int64_t{p} + 1) - 1);  // the lowest leaf is on the deepest path
}

TEST_CASE("dual_root pairs two post-order trees whose roots know each other", "[trees][dual_root]") {
  for (int p = 1; p <= kExhaustiveMaxP; ++p) {
    INFO("p = " << p);
    const int lower_size = (p + 1) / 2;
    std::vector<DualRootNode> all;
    for (int rank = 0; rank < p; ++rank) all.push_back(dual_root(p, rank));

    std::vector<Node> lower, upper;
    for (int rank = 0; rank < p; ++rank)
      (rank < lower_size ? lower : upper).push_back(all[static_cast<std::size_t>(rank)].node);
    TreeFacts facts;
    REQUIRE(check_tree(0, lower, facts) == "");
    REQUIRE(check_post_order_shape(0, lower, facts) == "");
    if (!upper.empty()) {
      REQUIRE(check_tree(lower_size, upper, facts) == "");
      REQUIRE(check_post_order_shape(lower_size, upper, facts) == "");
    }
    // Halves as even as possible, the lower one taking the extra rank.
    REQUIRE(static_cast<int>(lower.size()) - static_cast<int>(upper.size()) == p % 2);

    for (int rank = 0; rank < p; ++rank) {
      const int expected_dual = p == 1 ? -1 : rank == lower_size - 1 ? p - 1 : rank == p - 1 ? lower_size - 1 : -1;
      if (all[static_cast<std::size_t>(rank)].dual != expected_dual)
        FAIL("rank " << rank << " dual " << all[static_cast<std::size_t>(rank)].dual);
      // Each half is exactly the post-order tree over its own range.
      const Node alone = rank < lower_size ? post_order_binary_range(0, lower_size - 1, rank)
                                           : post_order_binary_range(lower_size, p - 1, rank);
      if (!same_node(all[static_cast<std::size_t>(rank)].node, alone))
        FAIL("rank " << rank << " differs from its half's tree");
    }
  }
  CHECK_THROWS_AS(dual_root(4, 4), copse::UsageError);
  CHECK_THROWS_AS(dual_root(4, -1), copse::UsageError);
  CHECK_THROWS_AS(dual_root(0, 0), copse::UsageError);
}

TEST_CASE("binomial tree: children r+2^j below r's lowest set bit, depth popcount", "[trees][binomial]") {
  auto check_p = [](int p) {
    INFO("p = " << p);
    const auto nodes = collect(0, p, [p](int rank) { return binomial(p, rank); });
    TreeFacts facts;
    REQUIRE(check_tree(0, nodes, facts) == "");
    REQUIRE(facts.root == 0);
    REQUIRE(facts.height <= ceil_log2(p));
    for (int rank = 0; rank < p; ++rank) {
      const Node& node = nodes[static_cast<std::size_t>(rank)];
      if (node.depth != std::popcount(static_cast<unsigned>(rank))) FAIL("rank " << rank << " depth " << node.depth);
      int previous_step = 0;
      for (int child : node.children) {
        const int step = child - rank;
        // A power of two, increasing, and the bits of rank up to it are clear.
        const bool ok =
            step > previous_step && std::has_single_bit(static_cast<unsigned>(step)) && (rank & (2 * step - 1)) == 0;
        if (!ok) FAIL("rank " << rank << " child " << child);
        previous_step = step;
      }
    }
  };
  for (int p = 1; p <= kExhaustiveMaxP; ++p) check_p(p);
  check_p((1 << 20) - 1);
  check_p(1 << 20);
  CHECK_THROWS_AS(binomial(8, 8), copse::UsageError);
  CHECK_THROWS_AS(binomial(-3, 0), copse::UsageError);
}

TEST_CASE("k-ary pre-order tree: even contiguous ranges, minimal depth", "[trees][kary][exhaustive]") {
  auto check_p = [](int p, int k) {
    INFO("p = " << p << ", k = " << k);
    const auto nodes = collect(0, p, [p, k](int rank) { return kary(p, k, rank); });
    TreeFacts facts;
    REQUIRE(check_tree(0, nodes, facts) == "");
    REQUIRE(facts.root == 0);
    // Minimal depth: smallest d with 1 + k + ... + k^d >= p.
    int expected_height = 0;
    for (std::int64_t reach = 1, level = 1; reach < p; ++expected_height) {
      level *= k;
      reach += level;
    }
    REQUIRE(facts.height == expected_height);
    for (int rank = 0; rank < p; ++rank) {
      const Node& node = nodes[static_cast<std::size_t>(rank)];
      const int below = facts.subtree_size[static_cast<std::size_t>(rank)] - 1;
      if (static_cast<int>(node.children.size()) != std::min(k, below)) FAIL("rank " << rank << " child count");
      if (below > 0 && node.children.front() != rank + 1) FAIL("rank " << rank << " is not pre-order");
      // Ranges as even as possible, nearer ranges never smaller.
      int previous_size = below;
      for (int child : node.children) {
        const int size = facts.subtree_size[static_cast<std::size_t>(child)];
        if (size > previous_size || size < below / k || size > (below + k - 1) / k)
          FAIL("rank " << rank << " uneven child " << child);
        previous_size = size;
      }
    }
  };
  for (int k : {1, 2, 3, 4, 5, 8, 16, 2000}) {
    for (int p = 1; p <= (k == 1 ? 300 : kExhaustiveMaxP); ++p) check_p(p, k);
  }
  check_p((1 << 20) - 1, 2);
  check_p(1 << 20, 3);
  check_p(1 << 20, 64);
  CHECK_THROWS_AS(kary(5, 0, 0), copse::UsageError);
  CHECK_THROWS_AS(kary(5, 2, 5), copse::UsageError);
}

TEST_CASE("chain and flat trees", "[trees][chain][flat]") {
  for (int p = 1; p <= kExhaustiveMaxP; ++p) {
    INFO("p = " << p);
    TreeFacts facts;
    const auto chain_nodes = collect(0, p, [p](int rank) { return chain(p, rank); });
    REQUIRE(check_tree(0, chain_nodes, facts) == "");
    REQUIRE(facts.root == p - 1);
    REQUIRE(facts.height == p - 1);
    // k = 1 is documented as the chain from 0 to p-1: the same path, reversed.
    if (p <= 64) {
      for (int rank = 0; rank < p; ++rank) {
        REQUIRE(kary(p, 1, rank).depth == rank);
      }
    }

    const auto flat_nodes = collect(0, p, [p](int rank) { return flat(p, rank); });
    REQUIRE(check_tree(0, flat_nodes, facts) == "");
    REQUIRE(facts.root == 0);
    REQUIRE(facts.height == (p > 1 ? 1 : 0));
  }
  CHECK_THROWS_AS(chain(3, 3), copse::UsageError);
  CHECK_THROWS_AS(flat(3, -1), copse::UsageError);
  CHECK_THROWS_AS(chain(0, 0), copse::UsageError);
  CHECK_THROWS_AS(flat(0, 0), copse::UsageError);
}

namespace {

// Everything the two-tree contract promises, for one p. Returns "" or the
// first violation.
std::string check_two_tree(int p) {
  const TwoTree two_tree(p);
  std::ostringstream problem;
  if (two_tree.ranks() != p) return "ranks() differs from p";

  std::vector<Node> nodes[2];
  for (int tree = 0; tree < 2; ++tree) {
    nodes[tree] = collect(0, p, [&](int rank) { return two_tree.node(tree, rank); });
    TreeFacts facts;
    const std::string tree_problem = check_tree(0, nodes[tree], facts);
    if (!tree_problem.empty()) {
      problem << "tree " << tree << ": " << tree_problem;
      return problem.str();
    }
    if (two_tree.root(tree) != facts.root || two_tree.height(tree) != facts.height) {
      problem << "tree " << tree << ": root()/height() disagree with the nodes";
      return problem.str();
    }
    // Height: every step down lowers the ctz key and the root's key is
    // floor(log2(p + tree)); the spine 2^K, 2^(K-1), ..., 1 (tree 0) or
    // ..., 2, 3 (tree 1, p >= 2) attains it.
    const int expected_height = tree == 0 ? floor_log2(p) : (p >= 2 ? floor_log2(p + 1) : 0);
    if (facts.height != expected_height || facts.height > floor_log2(p + 1)) {
      problem << "tree " << tree << ": height " << facts.height << ", expected " << expected_height;
      return problem.str();
    }

    // Cartesian tree keyed by ctz(rank + 1 + tree): in-order binary tree
    // (lower child's subtree is [lo, rank-1], upper's [rank+1, hi]) with
    // every child's key strictly below its parent's.
    auto key = [tree](int rank) { return std::countr_zero(static_cast<unsigned>(rank + 1 + tree)); };
    for (int rank = 0; rank < p; ++rank) {
      const Node& node = nodes[tree][static_cast<std::size_t>(rank)];
      int lower = -1, upper = -1;
      for (int child : node.children) (child < rank ? lower : upper) = child;
      const bool in_order = node.children.size() <= 2 &&
                            (node.children.size() < 2 || node.children[0] < node.children[1]) &&
                            (lower == -1 ? node.lo == rank
                                         : nodes[tree][static_cast<std::size_t>(lower)].lo == node.lo &&
                                               nodes[tree][static_cast<std::size_t>(lower)].hi == rank - 1) &&
                            (upper == -1 ? node.hi == rank
                                         : nodes[tree][static_cast<std::size_t>(upper)].lo == rank + 1 &&
                                               nodes[tree][static_cast<std::size_t>(upper)].hi == node.hi);
      if (!in_order) {
        problem << "tree " << tree << ": rank " << rank << " is not an in-order binary node";
        return problem.str();
      }
      for (int child : node.children) {
        if (key(child) >= key(rank)) {
          problem << "tree " << tree << ": child " << child << " key not below parent " << rank;
          return problem.str();
        }
      }
    }
  }

  for (int rank = 0; rank < p; ++rank) {
    const Node& in0 = nodes[0][static_cast<std::size_t>(rank)];
    const Node& in1 = nodes[1][static_cast<std::size_t>(rank)];
    if (!in0.children.empty() && !in1.children.empty()) {
      problem << "rank " << rank << " is interior in both trees";
      return problem.str();
    }
    // Colours exist exactly on parent edges.
    for (int tree = 0; tree < 2; ++tree) {
      const int colour = two_tree.colour(tree, rank);
      const bool is_root = nodes[tree][static_cast<std::size_t>(rank)].parent == -1;
      if (is_root ? colour != -1 : (colour != 0 && colour != 1)) {
        problem << "tree " << tree << ": rank " << rank << " colour " << colour;
        return problem.str();
      }
    }
    // (a) The two parent edges of a rank differ in colour.
    if (in0.parent != -1 && in1.parent != -1 && two_tree.colour(0, rank) == two_tree.colour(1, rank)) {
      problem << "rank " << rank << " sends to both parents on colour " << two_tree.colour(0, rank);
      return problem.str();
    }
    // (b) The child edges of a rank (all in one tree, at most two) differ.
    const int interior_tree = in0.children.empty() ? 1 : 0;
    const auto& children = nodes[interior_tree][static_cast<std::size_t>(rank)].children;
    if (children.size() == 2 &&
        two_tree.colour(interior_tree, children[0]) == two_tree.colour(interior_tree, children[1])) {
      problem << "rank " << rank << " receives from both children on the same colour";
      return problem.str();
    }
  }
  return "";
}

}  // namespace

TEST_CASE("two-tree: Cartesian trees, disjoint interiors, proper colouring for every p",
          "[trees][two_tree][exhaustive]") {
  for (int p = 1; p <= kExhaustiveMaxP; ++p) {
    INFO("p = " << p);
    REQUIRE(check_two_tree(p) == "");
  }
  for (int p : {(1 << 20) - 1, 1 << 20, (1 << 20) + 1}) {
    INFO("p = " << p);
    REQUIRE(check_two_tree(p) == "");
  }
}

TEST_CASE("two-tree rejects bad queries", "[trees][two_tree]") {
  CHECK_THROWS_AS(TwoTree(0), copse::UsageError);
  const TwoTree two_tree(6);
  CHECK_THROWS_AS(two_tree.node(0, 6), copse::UsageError);
  CHECK_THROWS_AS(two_tree.node(1, -1), copse::UsageError);
  CHECK_THROWS_AS(two_tree.node(2, 0), copse::UsageError);
  CHECK_THROWS_AS(two_tree.colour(-1, 0), copse::UsageError);
  CHECK_THROWS_AS(two_tree.colour(0, 6), copse::UsageError);
  CHECK_THROWS_AS(two_tree.root(2), copse::UsageError);
  CHECK_THROWS_AS(two_tree.height(2), copse::UsageError);
}
