// A registry row is all it takes: an algorithm on a tree plan/hierarchical.cpp
// has never heard of -- a pre-order ternary tree, defined here -- composes
// with every hierarchy for every collective and runs in lanes, proven by the
// verifier, because its row carries the tree trait. Without the trait the
// hierarchical forms that need a tree refuse it by name.
#include <catch2/catch.hpp>

#include "algorithms/patterns.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "plan/hierarchical.hpp"

using namespace copse;

namespace {

// [lo+1, hi] in up to three contiguous parts, sizes as even as possible.
std::vector<std::pair<int, int>> ternary_parts(int lo, int hi) {
  std::vector<std::pair<int, int>> parts;
  const int n = hi - lo, count = std::min(n, 3);
  for (int part = 0, at = lo + 1; part < count; ++part) {
    const int size = n / count + (part < n % count ? 1 : 0);
    parts.emplace_back(at, at + size - 1);
    at += size;
  }
  return parts;
}

// Pre-order ternary tree over 0..p-1: a subtree [lo, hi] is rooted at lo and
// its children root the parts of [lo+1, hi]. Order-preserving, every child
// above its parent.
trees::Node ternary(int p, int rank) {
  trees::Node node;
  node.lo = 0;
  node.hi = p - 1;
  while (rank != node.lo) {
    for (auto [lo, hi] : ternary_parts(node.lo, node.hi))
      if (rank >= lo && rank <= hi) {
        node.parent = node.lo;
        node.lo = lo;
        node.hi = hi;
        ++node.depth;
        break;
      }
  }
  for (auto [lo, hi] : ternary_parts(node.lo, node.hi)) node.children.push_back(lo);
  return node;
}

std::vector<trees::Node> ternary_children(int p, const trees::Node& node) {
  std::vector<trees::Node> kids;
  for (int c : node.children) kids.push_back(ternary(p, c));
  return kids;
}

// The flat builder, from the shared patterns, as an algorithm file would.
RankSchedule ternary_rank(Collective collective, Shape shape, int rank) {
  const trees::Node node = ternary(shape.ranks, rank);
  const BlockPartition part(collective == Collective::barrier ? 1 : shape.count, shape.blocks);
  const BlockPartition whole(vector_elements(collective, shape), shape.blocks);
  const auto kids = ternary_children(shape.ranks, node);
  std::vector<RankSchedule> phases;
  switch (collective) {
    case Collective::allreduce:
    case Collective::barrier:
      phases.push_back(patterns::tree_reduce(rank, node, part));
      phases.push_back(patterns::tree_bcast(rank, node, part));
      break;
    case Collective::reduce:
      phases.push_back(patterns::tree_reduce(rank, node, part));
      phases.push_back(patterns::forward(rank, 0, shape.root, part));
      break;
    case Collective::bcast:
      phases.push_back(patterns::forward(rank, shape.root, 0, part));
      phases.push_back(patterns::tree_bcast(rank, node, part));
      break;
    case Collective::allgather:
      phases.push_back(patterns::tree_gather(rank, node, kids, shape.count));
      phases.push_back(patterns::tree_bcast(rank, node, whole));
      break;
    case Collective::reduce_scatter:
      phases.push_back(patterns::tree_reduce(rank, node, whole));
      phases.push_back(patterns::tree_scatter(rank, node, kids, shape.count));
      break;
    case Collective::scatter:  // not composed over trees (their rows take the flat form only)
    case Collective::gather:
    case Collective::alltoall: break;
  }
  for (auto& phase : phases)
    while (phase.next()) co_yield phase.value();
}

template <Collective C>
SchedulePlan ternary_plan(const Shape& shape) {
  return [shape](int rank) { return ternary_rank(C, shape, rank); };
}

AlgorithmInfo ternary_row(Collective c, bool with_tree) {
  constexpr SchedulePlan (*kPlans[])(const Shape&) = {
      ternary_plan<Collective::allreduce>, ternary_plan<Collective::reduce>,
      ternary_plan<Collective::bcast>,     ternary_plan<Collective::barrier>,
      ternary_plan<Collective::allgather>, ternary_plan<Collective::reduce_scatter>};
  AlgorithmInfo row{c,     "test-ternary", "pre-order ternary tree (test only)",
                    false, true,           kPlans[static_cast<std::size_t>(c)]};
  if (with_tree) row.tree = TreeTrait{ternary};
  return row;
}

std::shared_ptr<const HierarchyPlan> hierarchy(const std::vector<int>& ranks_per_node, std::string_view grouping,
                                               bool multi_leader) {
  std::vector<NodeSpec> nodes;
  for (int k : ranks_per_node) nodes.push_back(NodeSpec{Machine::synthetic("package:2 core:4 pu:1"), k, {}});
  return std::make_shared<const HierarchyPlan>(plan_hierarchy(nodes, Grouping::parse(grouping), multi_leader));
}

}  // namespace

TEST_CASE("a tree algorithm added by one registry row runs flat, hierarchically and in lanes", "[registry]") {
  int proven = 0;
  for (Collective c : all_collectives()) {
    if (!has_hierarchy(c)) continue;  // flat schedules only (issue 19)
    const AlgorithmInfo row = ternary_row(c, true);
    for (Form f : {Form::flat, Form::leader, Form::multi_leader, Form::lanes}) CHECK(takes_form(row, f));
    for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{13}}) {
      for (int p = 1; p <= 9; ++p) {
        const Shape shape{p, count, 2, p - 1};
        const auto result = verify(row, shape);
        INFO(to_string(c) << " flat p " << p << " count " << count << ": " << result.message);
        REQUIRE(result.proven);
        ++proven;
      }
      for (const auto& [sizes, grouping, multi] :
           {std::tuple{std::vector<int>{8, 8, 8}, "size:2", false}, std::tuple{std::vector<int>{5, 8, 1}, "auto", true},
            std::tuple{std::vector<int>{6}, "size:3", false},
            std::tuple{std::vector<int>{1, 1, 1, 1, 1}, "auto", false}}) {
        const auto plan = hierarchy(sizes, grouping, multi);
        const Shape shape{plan->ranks, count, 3, plan->ranks / 2};
        const auto result = verify(row, plan_hierarchical(plan, row, shape), shape);
        INFO(to_string(c) << " hierarchical over " << plan->ranks << " ranks, " << grouping << " count " << count
                          << ": " << result.message);
        REQUIRE(result.proven);
        ++proven;
      }
      const auto equal = hierarchy({4, 4, 4}, "size:2", false);
      const Shape shape{equal->ranks, count, 3, 5};
      const auto result = verify(row, plan_lanes(equal, row, shape), shape);
      INFO(to_string(c) << " lanes count " << count << ": " << result.message);
      REQUIRE(result.proven);
      ++proven;
    }
  }
  CHECK(proven == 6 * 3 * (9 + 4 + 1));
}

TEST_CASE("without a tree trait the hierarchical forms that need one refuse the row", "[registry]") {
  const auto plan = hierarchy({4, 4}, "size:2", false);
  for (Collective c : all_collectives()) {
    if (!has_hierarchy(c)) continue;
    const AlgorithmInfo row = ternary_row(c, false);
    const bool phased = c == Collective::allreduce || c == Collective::barrier;  // three phases around any algorithm
    CHECK(takes_form(row, Form::leader) == phased);
    if (!phased)
      CHECK_THROWS_WITH(plan_hierarchical(plan, row, Shape{8, 10, 1, 0}),
                        Catch::Contains("test-ternary") && Catch::Contains("tree"));
    AlgorithmInfo no_lanes = ternary_row(c, true);
    no_lanes.forms.lanes = false;
    CHECK_THROWS_WITH(plan_lanes(plan, no_lanes, Shape{8, 10, 1, 0}), Catch::Contains("lanes"));
  }
}

TEST_CASE("the registry's rows: every tree-based row takes every form", "[registry]") {
  for (const AlgorithmInfo& a : algorithms()) {
    INFO(to_string(a.collective) << ":" << a.name);
    CHECK(takes_form(a, Form::flat));
    // The data-movement collectives (issue 19) have flat schedules only so far.
    CHECK(takes_form(a, Form::lanes) == has_hierarchy(a.collective));
    if (a.tree) CHECK(takes_form(a, Form::leader));
    if (a.tree.dual_roots) CHECK(a.tree.use == TreeUse::doubly_pipelined);
  }
}
