// The hwloc machine model and the hierarchy planner, on synthetic topologies
// (so the expectations do not depend on the machine running the tests) and
// once on this machine.

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "support.hpp"
#include "topology/plan.hpp"

using namespace copse;
using copse::testing::inclusive_range;

namespace {

std::vector<NodeSpec> uniform_nodes(const Machine& machine, int nodes, int ranks_per_node) {
  return std::vector<NodeSpec>(static_cast<std::size_t>(nodes), NodeSpec{machine, ranks_per_node, {}});
}

// members of every group of one level, in order
std::vector<std::vector<int>> members_of(const std::vector<Group>& level) {
  std::vector<std::vector<int>> out;
  for (const auto& g : level) out.push_back(g.members);
  return out;
}

std::vector<int> leaders_of(const std::vector<Group>& level) {
  std::vector<int> out;
  for (const auto& g : level) out.push_back(g.leader());
  return out;
}

// Every level's groups' members: plans compare equal when these do.
std::vector<std::vector<std::vector<int>>> shape_of(const HierarchyPlan& plan, std::size_t node) {
  std::vector<std::vector<std::vector<int>>> out;
  for (const auto& level : plan.levels[node]) out.push_back(members_of(level));
  return out;
}

std::size_t count_commas(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), ','));
}

// Everything plan.hpp promises about any plan.
void check_invariants(const HierarchyPlan& plan, const std::vector<NodeSpec>& nodes, bool multi_leader) {
  int total = 0;
  for (const auto& n : nodes) total += n.ranks;
  REQUIRE(plan.ranks == total);
  REQUIRE(plan.multi_leader == multi_leader);
  REQUIRE(plan.levels.size() == nodes.size());
  REQUIRE(plan.level_names.size() == nodes.size());
  REQUIRE(plan.first_rank.size() == nodes.size());
  REQUIRE(plan.machine.size() == nodes.size());
  REQUIRE(plan.node_of.size() == static_cast<std::size_t>(total));
  REQUIRE(plan.pu_of.size() == static_cast<std::size_t>(total));

  std::vector<int> expected_offnode;
  int first = 0;
  for (std::size_t node = 0; node < nodes.size(); ++node) {
    const int count = nodes[node].ranks;
    const int last = first + count - 1;
    CHECK(plan.first_rank[node] == first);
    CHECK(plan.machine[node] == nodes[node].machine.source());
    for (int r = first; r <= last; ++r) {
      CHECK(plan.node_of[static_cast<std::size_t>(r)] == static_cast<int>(node));
      const int pu = plan.pu_of[static_cast<std::size_t>(r)];
      CHECK(pu >= 0);
      CHECK(pu < nodes[node].machine.pus());
    }
    const auto& levels = plan.levels[node];
    REQUIRE(!levels.empty());
    REQUIRE(count_commas(plan.level_names[node]) + 1 == levels.size());

    // Level 0: contiguous ascending ranges covering the node's ranks once, in order.
    std::vector<int> covered;
    for (const auto& group : levels[0]) {
      REQUIRE(!group.members.empty());
      CHECK(group.members == inclusive_range(group.members.front(), group.members.back()));
      covered.insert(covered.end(), group.members.begin(), group.members.end());
    }
    CHECK(covered == inclusive_range(first, last));

    for (std::size_t l = 0; l < levels.size(); ++l) {
      for (const auto& group : levels[l]) {
        CHECK(group.node == static_cast<int>(node));
        CHECK(group.level == static_cast<int>(l));
        CHECK(std::is_sorted(group.members.begin(), group.members.end()));
        CHECK(std::adjacent_find(group.members.begin(), group.members.end()) == group.members.end());
      }
      if (l > 0) {
        // The leaders of level l-1, in order, are exactly the members of level l.
        std::vector<int> members;
        for (const auto& group : levels[l]) members.insert(members.end(), group.members.begin(), group.members.end());
        CHECK(members == leaders_of(levels[l - 1]));
      }
    }

    if (multi_leader) {
      CHECK(levels.size() == 1);
      const auto leaders = leaders_of(levels[0]);
      expected_offnode.insert(expected_offnode.end(), leaders.begin(), leaders.end());
    } else {
      CHECK(levels.back().size() == 1);
      CHECK(levels.back().front().leader() == first);
      expected_offnode.push_back(first);
      // No level is a no-op, unless the node has a single rank.
      if (count > 1)
        for (const auto& level : levels)
          CHECK(std::any_of(level.begin(), level.end(), [](const Group& g) { return g.members.size() > 1; }));
    }
    first = last + 1;
  }
  CHECK(plan.offnode == expected_offnode);
}

}  // namespace

TEST_CASE("synthetic machine: containers at every level", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:4 pu:1");
  CHECK(m.pus() == 16);
  CHECK(m.source() == "package:2 l3:2 core:4 pu:1");
  CHECK(m.has_level("core"));
  CHECK(m.has_level("l3"));
  CHECK(m.has_level("package"));
  CHECK(m.has_level("numa"));  // hwloc gives every topology a NUMA node
  CHECK_FALSE(m.has_level("l2"));
  CHECK_FALSE(m.has_level("nonsense"));
  CHECK(m.objects("core") == 16);
  CHECK(m.objects("l3") == 4);
  CHECK(m.objects("package") == 2);
  CHECK(m.objects("numa") == 1);
  CHECK(m.objects("l2") == 0);
  for (int pu = 0; pu < 16; ++pu) {
    CHECK(m.container("core", pu) == pu);
    CHECK(m.container("l3", pu) == pu / 4);
    CHECK(m.container("package", pu) == pu / 8);
    CHECK(m.container("numa", pu) == 0);
    CHECK(m.container("l2", pu) == -1);
  }
  CHECK_THROWS_AS(m.container("l3", 16), UsageError);
  const std::string tree = m.describe();
  CHECK(tree.find("Package L#1") != std::string::npos);
  CHECK(tree.find("L3 L#3") != std::string::npos);
  CHECK(tree.find("Core L#15 + PU L#15") != std::string::npos);
}

TEST_CASE("synthetic machine: NUMA nodes are found through memory children", "[plan]") {
  // hwloc 2 attaches NUMA nodes beside the CPU tree, not above the PUs.
  const Machine flat = Machine::synthetic("numa:2 core:2 pu:2");
  CHECK(flat.pus() == 8);
  CHECK(flat.objects("numa") == 2);
  for (int pu = 0; pu < 8; ++pu) CHECK(flat.container("numa", pu) == pu / 4);

  const Machine nested = Machine::synthetic("package:2 numa:2 core:2 pu:1");
  CHECK(nested.objects("numa") == 4);
  for (int pu = 0; pu < 8; ++pu) {
    CHECK(nested.container("numa", pu) == pu / 2);
    CHECK(nested.container("package", pu) == pu / 4);
  }
  CHECK(nested.describe().find("NUMANode L#3") != std::string::npos);
}

TEST_CASE("synthetic machine: other spellings, and refusals", "[plan]") {
  const Machine m = Machine::synthetic("pack:1 l3:1 l2:4 core:1 pu:1");
  CHECK(m.pus() == 4);
  CHECK(m.objects("l2") == 4);
  CHECK(m.objects("l3") == 1);

  for (const std::string bad : {"bogus:3", "", "   ", "package:2 core:0 pu:1", "core:2 pu"}) {
    INFO("desc: \"" << bad << "\"");
    try {
      Machine::synthetic(bad);
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("\"" + bad + "\"") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(Machine::synthetic("pu:100000"), UsageError);  // refused before hwloc loads it
  CHECK_THROWS_AS(Machine::synthetic("package:64 core:64 pu:2"), UsageError);
}

TEST_CASE("describe() stays compact for 64 PUs", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:8 pu:2");
  REQUIRE(m.pus() == 64);
  const std::string tree = m.describe();
  const auto lines = std::count(tree.begin(), tree.end(), '\n');
  CHECK(lines <= 64);
  CHECK(tree.find("Core L#31: PU L#62, PU L#63") != std::string::npos);
  CHECK(tree.rfind("Machine", 0) == 0);
}

TEST_CASE("this machine is detected", "[plan]") {
  const Machine m = Machine::detect();
  CHECK(m.pus() >= 1);
  CHECK(m.source() == "this machine (hwloc)");
  CHECK(m.has_level("numa"));
  CHECK_FALSE(m.describe().empty());
  for (int pu = 0; pu < m.pus(); ++pu) CHECK(m.container("numa", pu) >= 0);
  for (bool multi : {false, true}) {
    const auto nodes = uniform_nodes(m, 2, m.pus());
    check_invariants(plan_hierarchy(nodes, Grouping::parse("auto"), multi), nodes, multi);
  }
}

TEST_CASE("Grouping::parse and to_string", "[plan]") {
  for (const std::string text : {"auto", "core", "l2", "l3", "numa", "package", "size:1", "size:4", "size:17"})
    CHECK(Grouping::parse(text).to_string() == text);
  const Grouping size = Grouping::parse("size:3");
  CHECK(size.kind == Grouping::Kind::size);
  CHECK(size.size == 3);
  const Grouping level = Grouping::parse("l3");
  CHECK(level.kind == Grouping::Kind::level);
  CHECK(level.level == "l3");
  CHECK(Grouping::parse("auto", 6).max_group == 6);

  for (const std::string bad :
       {"", "AUTO", "l4", "size:", "size:0", "size:-2", "size:2x", "size:99999999999", "cores"}) {
    INFO("text: \"" << bad << "\"");
    try {
      Grouping::parse(bad);
      FAIL("accepted");
    } catch (const UsageError& e) {
      const std::string message = e.what();
      CHECK(message.find("\"" + bad + "\"") != std::string::npos);
      if (bad.rfind("size:", 0) != 0)
        CHECK(message.find("auto, core, l2, l3, numa, package, size:K") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(Grouping::parse("auto", 0), UsageError);
}

TEST_CASE("auto on package:2 l3:2 core:4 pu:1: groups of four under each L3, then packages, then the node", "[plan]") {
  const auto nodes = uniform_nodes(Machine::synthetic("package:2 l3:2 core:4 pu:1"), 1, 16);
  const HierarchyPlan plan = plan_hierarchy(nodes, Grouping::parse("auto"), false);
  check_invariants(plan, nodes, false);
  CHECK(plan.grouping == "auto");
  CHECK(plan.level_names[0] == "l3,package,node");
  REQUIRE(plan.levels[0].size() == 3);
  CHECK(members_of(plan.levels[0][0]) == std::vector<std::vector<int>>{inclusive_range(0, 3), inclusive_range(4, 7),
                                                                       inclusive_range(8, 11),
                                                                       inclusive_range(12, 15)});
  CHECK(members_of(plan.levels[0][1]) == std::vector<std::vector<int>>{{0, 4}, {8, 12}});
  CHECK(members_of(plan.levels[0][2]) == std::vector<std::vector<int>>{{0, 8}});
  CHECK(plan.offnode == std::vector<int>{0});

  const std::string text = plan.describe();
  CHECK(text.find("package:2 l3:2 core:4 pu:1") != std::string::npos);
  CHECK(text.find("level 0 (l3): [0-3] leader 0, [4-7] leader 4, [8-11] leader 8, [12-15] leader 12") !=
        std::string::npos);
  CHECK(text.find("level 1 (package): {0,4} leader 0, {8,12} leader 8") != std::string::npos);
  CHECK(text.find("level 2 (node): {0,8} leader 0") != std::string::npos);
  CHECK(text.find("off-node ranks (1): 0") != std::string::npos);

  // An explicit l3 policy is the same plan; max_group 3 is too small for the L3s.
  CHECK(shape_of(plan_hierarchy(nodes, Grouping::parse("l3"), false), 0) == shape_of(plan, 0));
  const HierarchyPlan small = plan_hierarchy(nodes, Grouping::parse("auto", 3), false);
  check_invariants(small, nodes, false);
  CHECK(small.level_names[0] == "size:3,size:3,size:3");
  CHECK(members_of(small.levels[0][0]).size() == 6);
}

TEST_CASE("no L3: auto falls back to size:max_group, an absent level is refused", "[plan]") {
  const Machine m = Machine::synthetic("package:2 core:4 pu:1");
  CHECK_FALSE(m.has_level("l3"));
  CHECK(m.container("l3", 0) == -1);
  const auto nodes = uniform_nodes(m, 1, 8);

  // The only NUMA node holds all 8 ranks: more than 4, so size:4.
  const HierarchyPlan automatic = plan_hierarchy(nodes, Grouping::parse("auto"), false);
  check_invariants(automatic, nodes, false);
  CHECK(automatic.level_names[0] == "size:4,size:4");
  CHECK(members_of(automatic.levels[0][0]) ==
        std::vector<std::vector<int>>{inclusive_range(0, 3), inclusive_range(4, 7)});

  // auto with room for 8 takes the NUMA node.
  const HierarchyPlan roomy = plan_hierarchy(nodes, Grouping::parse("auto", 8), false);
  CHECK(roomy.level_names[0] == "numa");
  CHECK(members_of(roomy.levels[0][0]) == std::vector<std::vector<int>>{inclusive_range(0, 7)});

  const HierarchyPlan packages = plan_hierarchy(nodes, Grouping::parse("package"), false);
  check_invariants(packages, nodes, false);
  CHECK(packages.level_names[0] == "package,node");
  CHECK(members_of(packages.levels[0][1]) == std::vector<std::vector<int>>{{0, 4}});

  try {
    plan_hierarchy(nodes, Grouping::parse("l3"), false);
    FAIL("l3 accepted on a machine without L3");
  } catch (const UsageError& e) {
    const std::string message = e.what();
    CHECK(message.find("no l3") != std::string::npos);
    CHECK(message.find("package:2 core:4 pu:1") != std::string::npos);
  }
}

TEST_CASE("numa grouping and NUMA nodes finer than the L3", "[plan]") {
  const auto flat = uniform_nodes(Machine::synthetic("numa:2 core:2 pu:2"), 1, 8);
  const HierarchyPlan numa = plan_hierarchy(flat, Grouping::parse("auto"), false);
  check_invariants(numa, flat, false);
  CHECK(numa.level_names[0] == "numa,node");
  CHECK(members_of(numa.levels[0][0]) == std::vector<std::vector<int>>{inclusive_range(0, 3), inclusive_range(4, 7)});
  CHECK(shape_of(plan_hierarchy(flat, Grouping::parse("numa"), false), 0) == shape_of(numa, 0));

  // Two NUMA nodes under one L3: the NUMA nodes are the finer level here.
  const auto split = uniform_nodes(Machine::synthetic("package:1 l3:1 numa:2 core:2 pu:1"), 1, 4);
  const HierarchyPlan finer = plan_hierarchy(split, Grouping::parse("auto"), false);
  check_invariants(finer, split, false);
  CHECK(finer.level_names[0] == "numa,node");
  CHECK(members_of(finer.levels[0][0]) == std::vector<std::vector<int>>{{0, 1}, {2, 3}});

  // core grouping climbs through every level that merges.
  const auto nested = uniform_nodes(Machine::synthetic("package:2 numa:2 core:2 pu:2"), 1, 16);
  const HierarchyPlan cores = plan_hierarchy(nested, Grouping::parse("core"), false);
  check_invariants(cores, nested, false);
  CHECK(cores.level_names[0] == "core,numa,package,node");
}

TEST_CASE("size:2 on 8 ranks makes three levels of pairs", "[plan]") {
  const auto nodes = uniform_nodes(Machine::synthetic("package:1 core:8 pu:1"), 1, 8);
  const HierarchyPlan plan = plan_hierarchy(nodes, Grouping::parse("size:2"), false);
  check_invariants(plan, nodes, false);
  CHECK(plan.level_names[0] == "size:2,size:2,size:2");
  REQUIRE(plan.levels[0].size() == 3);
  CHECK(members_of(plan.levels[0][0]) == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(members_of(plan.levels[0][1]) == std::vector<std::vector<int>>{{0, 2}, {4, 6}});
  CHECK(members_of(plan.levels[0][2]) == std::vector<std::vector<int>>{{0, 4}});

  // size:1 merges nothing by itself: the node level gathers everyone.
  const HierarchyPlan ones = plan_hierarchy(nodes, Grouping::parse("size:1"), false);
  check_invariants(ones, nodes, false);
  CHECK(ones.level_names[0] == "node");
  CHECK(members_of(ones.levels[0][0]) == std::vector<std::vector<int>>{inclusive_range(0, 7)});
}

TEST_CASE("multi-leader: size:4 on 4 nodes x 8 ranks gives 8 off-node leaders", "[plan]") {
  const auto nodes = uniform_nodes(Machine::synthetic("package:2 core:4 pu:1"), 4, 8);
  const HierarchyPlan plan = plan_hierarchy(nodes, Grouping::parse("size:4"), true);
  check_invariants(plan, nodes, true);
  CHECK(plan.offnode == std::vector<int>{0, 4, 8, 12, 16, 20, 24, 28});
  for (std::size_t node = 0; node < 4; ++node) {
    REQUIRE(plan.levels[node].size() == 1);
    CHECK(plan.level_names[node] == "size:4");
  }
  CHECK(members_of(plan.levels[3][0]) ==
        std::vector<std::vector<int>>{inclusive_range(24, 27), inclusive_range(28, 31)});
  CHECK(plan.describe().find("off-node ranks (8): 0,4,8,12,16,20,24,28") != std::string::npos);

  // Multi-leader keeps level 0 even when every group is one rank.
  const HierarchyPlan cores = plan_hierarchy(nodes, Grouping::parse("core"), true);
  check_invariants(cores, nodes, true);
  CHECK(cores.offnode == inclusive_range(0, 31));
}

TEST_CASE("uneven nodes: 5, 8 and 1 ranks", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:4 pu:1");
  const std::vector<NodeSpec> nodes{{m, 5, {}}, {m, 8, {}}, {m, 1, {}}};
  for (bool multi : {false, true}) {
    const HierarchyPlan plan = plan_hierarchy(nodes, Grouping::parse("auto"), multi);
    check_invariants(plan, nodes, multi);
    CHECK(plan.first_rank == std::vector<int>{0, 5, 13});
    // The single-rank node is one group of itself, and still talks off-node.
    CHECK(plan.level_names[2] == "node");
    CHECK(members_of(plan.levels[2][0]) == std::vector<std::vector<int>>{{13}});
    if (!multi) CHECK(plan.offnode == std::vector<int>{0, 5, 13});
  }
  // 5 ranks spread over 16 PUs by block: PUs 0, 3, 6, 9, 12.
  const HierarchyPlan plan = plan_hierarchy(nodes, Grouping::parse("auto"), false);
  CHECK(std::vector<int>(plan.pu_of.begin(), plan.pu_of.begin() + 5) == std::vector<int>{0, 3, 6, 9, 12});
  CHECK(members_of(plan.levels[0][0]) == std::vector<std::vector<int>>{{0, 1}, {2}, {3}, {4}});
  CHECK(members_of(plan.levels[1][0]) == std::vector<std::vector<int>>{{5, 6}, {7, 8}, {9, 10}, {11, 12}});
  for (int uneven : {2, 3, 6, 7, 10, 13}) {
    const std::vector<NodeSpec> more{{m, uneven, {}}, {m, 1, {}}, {m, 16, {}}};
    for (bool multi : {false, true})
      check_invariants(plan_hierarchy(more, Grouping::parse("auto"), multi), more, multi);
  }
}

TEST_CASE("oversubscribed and undersubscribed nodes", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:4 pu:1");

  // 32 ranks on 16 PUs: two ranks per PU, so per core.
  const auto over = uniform_nodes(m, 1, 32);
  const HierarchyPlan cores = plan_hierarchy(over, Grouping::parse("core"), false);
  check_invariants(cores, over, false);
  CHECK(cores.pu_of[31] == 15);
  CHECK(cores.level_names[0] == "core,l3,package,node");
  CHECK(members_of(cores.levels[0][0]).front() == std::vector<int>{0, 1});
  CHECK(members_of(cores.levels[0][1]).front() == std::vector<int>{0, 2, 4, 6});
  // auto: eight ranks under each L3 is more than 4.
  const HierarchyPlan automatic = plan_hierarchy(over, Grouping::parse("auto"), false);
  check_invariants(automatic, over, false);
  CHECK(automatic.level_names[0] == "size:4,size:4,size:4");
  CHECK(plan_hierarchy(over, Grouping::parse("auto", 8), false).level_names[0] == "l3,package,node");

  // 4 ranks on 16 PUs: one per L3, so the L3s share nothing; the NUMA node does.
  const auto under = uniform_nodes(m, 1, 4);
  const HierarchyPlan sparse = plan_hierarchy(under, Grouping::parse("auto"), false);
  check_invariants(sparse, under, false);
  CHECK(sparse.pu_of == std::vector<int>{0, 4, 8, 12});
  CHECK(sparse.level_names[0] == "numa");
  const HierarchyPlan l3 = plan_hierarchy(under, Grouping::parse("l3"), false);
  check_invariants(l3, under, false);
  CHECK(l3.level_names[0] == "package,node");  // single-rank L3 groups add nothing
}

TEST_CASE("bindings: honoured when contiguous, refused when they scatter a group", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:2 pu:1");
  const std::vector<NodeSpec> swapped{{m, 8, {1, 0, 3, 2, 5, 4, 7, 6}}};
  const HierarchyPlan plan = plan_hierarchy(swapped, Grouping::parse("l3"), false);
  check_invariants(plan, swapped, false);
  CHECK(plan.pu_of == std::vector<int>{1, 0, 3, 2, 5, 4, 7, 6});
  CHECK(members_of(plan.levels[0][0]) == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});

  const std::vector<NodeSpec> scattered{{m, 4, {0, 2, 1, 3}}};
  try {
    plan_hierarchy(scattered, Grouping::parse("l3"), false);
    FAIL("scattered binding accepted");
  } catch (const UsageError& e) {
    const std::string message = e.what();
    CHECK(message.find("contiguous") != std::string::npos);
    CHECK(message.find("rank order") != std::string::npos);
  }
  // Size groups do not look at PUs, so any binding works for them.
  check_invariants(plan_hierarchy(scattered, Grouping::parse("size:2"), false), scattered, false);

  CHECK_THROWS_AS(plan_hierarchy({{m, 4, {0, 1, 2}}}, Grouping::parse("auto"), false), UsageError);
  CHECK_THROWS_AS(plan_hierarchy({{m, 2, {0, 8}}}, Grouping::parse("auto"), false), UsageError);
  CHECK_THROWS_AS(plan_hierarchy({{m, 2, {-1, 0}}}, Grouping::parse("auto"), false), UsageError);
}

TEST_CASE("bad plans are refused", "[plan]") {
  const Machine m = Machine::synthetic("package:1 core:4 pu:1");
  CHECK_THROWS_AS(plan_hierarchy({}, Grouping::parse("auto"), false), UsageError);
  CHECK_THROWS_AS(plan_hierarchy({{m, 0, {}}}, Grouping::parse("auto"), false), UsageError);
  Grouping unknown;
  unknown.kind = Grouping::Kind::level;
  unknown.level = "l9";
  CHECK_THROWS_AS(plan_hierarchy({{m, 4, {}}}, unknown, false), UsageError);
  Grouping zero;
  zero.kind = Grouping::Kind::size;
  CHECK_THROWS_AS(plan_hierarchy({{m, 4, {}}}, zero, false), UsageError);
}

TEST_CASE("invariants hold over many shapes", "[plan]") {
  const std::vector<Machine> machines{Machine::synthetic("package:2 l3:2 core:4 pu:1"),
                                      Machine::synthetic("package:2 core:4 pu:1"),
                                      Machine::synthetic("numa:2 core:2 pu:2"),
                                      Machine::synthetic("pack:1 l3:1 l2:4 core:1 pu:1"),
                                      Machine::synthetic("package:2 numa:2 l3:1 l2:2 core:2 pu:2"),
                                      Machine::synthetic("core:3 pu:1"),
                                      Machine::synthetic("package:1 l3:1 numa:2 core:2 pu:1"),
                                      Machine::detect()};
  std::vector<std::string> policies{"auto", "size:1", "size:2", "size:3", "size:4", "size:7", "size:64"};
  for (const auto& level : Machine::level_names()) policies.push_back(level);

  std::mt19937 random(12345);  // fixed: the same shapes every run
  int plans = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int node_count = 1 + static_cast<int>(random() % 5);
    std::vector<NodeSpec> nodes;
    for (int n = 0; n < node_count; ++n) {
      const Machine& machine = machines[random() % machines.size()];
      // Mostly up to twice the PUs, sometimes a single rank.
      const int ranks = random() % 6 == 0 ? 1 : 1 + static_cast<int>(random() % (2 * machine.pus()));
      nodes.push_back({machine, ranks, {}});
    }
    const std::string policy = policies[random() % policies.size()];
    const int max_group = 1 + static_cast<int>(random() % 8);
    const bool multi = random() % 3 == 0;
    INFO("trial " << trial << ": " << policy << " max " << max_group << (multi ? " multi-leader" : ""));
    const Grouping grouping = Grouping::parse(policy, max_group);
    const bool level_missing =
        grouping.kind == Grouping::Kind::level && std::any_of(nodes.begin(), nodes.end(), [&](const NodeSpec& n) {
          return n.ranks > 1 && !n.machine.has_level(grouping.level);
        });
    if (level_missing) {
      CHECK_THROWS_AS(plan_hierarchy(nodes, grouping, multi), UsageError);
      continue;
    }
    const HierarchyPlan plan = plan_hierarchy(nodes, grouping, multi);
    check_invariants(plan, nodes, multi);
    // auto's own level 0 (not a "node" level standing in for an omitted one) respects max_group.
    if (grouping.kind == Grouping::Kind::automatic)
      for (std::size_t node = 0; node < nodes.size(); ++node) {
        const std::string first_level = plan.level_names[node].substr(0, plan.level_names[node].find(','));
        if (first_level == "l2" || first_level == "l3" || first_level == "numa" ||
            first_level == "size:" + std::to_string(max_group))
          for (const Group& g : plan.levels[node][0]) CHECK(static_cast<int>(g.members.size()) <= max_group);
      }
    ++plans;
  }
  CHECK(plans > 200);
}

TEST_CASE("dot() writes a Graphviz digraph with clusters, leader edges and the inter-node group", "[plan]") {
  const Machine m = Machine::synthetic("package:2 l3:2 core:4 pu:1");
  const std::vector<NodeSpec> nodes{{m, 5, {}}, {m, 8, {}}, {m, 1, {}}};
  const std::string dot = plan_hierarchy(nodes, Grouping::parse("auto"), false).dot();
  CHECK(dot.rfind("digraph ", 0) == 0);
  CHECK(std::count(dot.begin(), dot.end(), '{') == std::count(dot.begin(), dot.end(), '}'));
  CHECK(std::count(dot.begin(), dot.end(), '"') % 2 == 0);
  for (const char* part : {"subgraph cluster_node0", "subgraph cluster_node2", "r1 -> r0", "r6 -> r5",
                           "r5 -> internode", "r13 -> internode", "style=dashed", "fillcolor=gold"})
    CHECK(dot.find(part) != std::string::npos);
  CHECK(dot.find("r0 -> r") == std::string::npos);  // the node leader leads everything
}
