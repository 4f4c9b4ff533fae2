// copse topo: the node's machine (detected by hwloc, or hwloc's synthetic
// syntax) and the hierarchy planned over it: which rank is in which group,
// who leads, which ranks talk off-node. Exit codes and errors follow
// cli/main.cpp: 0 success, 2 bad input (a UsageError, one line on stderr).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.hpp"
#include "common/error.hpp"
#include "topology/plan.hpp"

namespace copse {
namespace {

// The plan is printed rank by rank; beyond this many ranks it is no longer
// something to read, and memory would be the only limit.
constexpr long long kMaxRanks = 1 << 20;

struct TopoArgs {
  std::string node_topology;  // empty: this machine
  int nodes = 1;
  int ranks_per_node = 0;  // 0: the machine's PU count
  std::string ranks_per_node_list;
  std::string grouping = "auto";
  int max_group = 4;
  bool multi_leader = false;
  std::string dot_file;
  bool json = false;
};

// "5,8,1": whole numbers >= 1 separated by commas.
std::vector<int> ranks_on_each_node(const TopoArgs& args, const CLI::App& command, const Machine& machine) {
  if (args.nodes < 1) throw UsageError("--nodes must be at least 1, got " + std::to_string(args.nodes));
  std::vector<int> counts;
  if (command.count("--ranks-per-node-list") > 0) {
    counts = parse_rank_counts(args.ranks_per_node_list);
    if (command.count("--nodes") > 0 && static_cast<std::size_t>(args.nodes) != counts.size())
      throw UsageError("--nodes " + std::to_string(args.nodes) + " disagrees with --ranks-per-node-list, which names " +
                       std::to_string(counts.size()) + " nodes");
  } else {
    const int per_node = command.count("--ranks-per-node") > 0 ? args.ranks_per_node : machine.pus();
    if (per_node < 1) throw UsageError("--ranks-per-node must be at least 1, got " + std::to_string(per_node));
    counts.assign(static_cast<std::size_t>(args.nodes), per_node);
  }
  long long total = 0;
  for (int count : counts) total += count;
  if (total > kMaxRanks)
    throw UsageError("too many ranks to print a plan for (" + std::to_string(total) + "; at most " +
                     std::to_string(kMaxRanks) + ")");
  return counts;
}

Json machine_json(const Machine& machine) {
  Json levels = Json::object();
  for (const auto& level : Machine::level_names())
    if (machine.has_level(level)) levels[level] = machine.objects(level);
  Json tree = Json::array();
  std::istringstream lines(machine.describe());
  for (std::string line; std::getline(lines, line);) tree.push_back(line);
  return Json{{"source", machine.source()}, {"pus", machine.pus()}, {"levels", levels}, {"tree", tree}};
}

Json plan_json(const HierarchyPlan& plan) {
  Json nodes = Json::array();
  for (std::size_t node = 0; node < plan.levels.size(); ++node) {
    const int first = plan.first_rank[node];
    const int end = node + 1 < plan.first_rank.size() ? plan.first_rank[node + 1] : plan.ranks;
    std::vector<std::string> names;
    std::istringstream joined(plan.level_names[node]);
    for (std::string name; std::getline(joined, name, ',');) names.push_back(name);
    Json levels = Json::array();
    for (std::size_t l = 0; l < plan.levels[node].size(); ++l) {
      Json groups = Json::array();
      for (const Group& group : plan.levels[node][l])
        groups.push_back({{"members", group.members}, {"leader", group.leader()}});
      levels.push_back({{"level", l}, {"name", l < names.size() ? names[l] : ""}, {"groups", groups}});
    }
    const std::vector<int> binding(plan.pu_of.begin() + first, plan.pu_of.begin() + end);
    nodes.push_back({{"node", node},
                     {"machine", plan.machine[node]},
                     {"first_rank", first},
                     {"ranks", end - first},
                     {"binding", binding},
                     {"leader", first},
                     {"levels", levels}});
  }
  return Json{{"ranks", plan.ranks},
              {"grouping", plan.grouping},
              {"multi_leader", plan.multi_leader},
              {"nodes", nodes},
              {"offnode", plan.offnode}};
}

void write_dot(const std::string& path, const std::string& dot) {
  std::ofstream file(path);
  if (file) file << dot;
  file.close();
  if (!file) throw UsageError("--dot: cannot write \"" + path + "\": " + std::strerror(errno));
}

int run_topo(const TopoArgs& args, const CLI::App& command) {
  if (args.max_group < 1) throw UsageError("--max-group must be at least 1, got " + std::to_string(args.max_group));
  const Grouping grouping = option_value("--grouping", [&] { return Grouping::parse(args.grouping, args.max_group); });
  // An explicitly empty --node-topology is a mistake, not a request to detect.
  const Machine machine = command.count("--node-topology") == 0
                              ? Machine::detect()
                              : option_value("--node-topology", [&] { return Machine::synthetic(args.node_topology); });
  const std::vector<int> counts = ranks_on_each_node(args, command, machine);

  std::vector<NodeSpec> nodes;
  for (int count : counts) nodes.push_back(NodeSpec{machine, count, {}});
  const HierarchyPlan plan = plan_hierarchy(nodes, grouping, args.multi_leader);

  if (!args.dot_file.empty()) write_dot(args.dot_file, plan.dot());
  if (args.json) {
    std::cout << Json{{"machine", machine_json(machine)},
                      {"nodes", counts.size()},
                      {"ranks_per_node", counts},
                      {"max_group", grouping.max_group},
                      {"plan", plan_json(plan)},
                      {"dot", args.dot_file.empty() ? Json(nullptr) : Json(args.dot_file)}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::string present;
  for (const auto& level : Machine::level_names())
    if (machine.has_level(level))
      present += (present.empty() ? "" : ", ") + level + " x" + std::to_string(machine.objects(level));
  std::cout << "machine: " << machine.source() << ", " << machine.pus() << (machine.pus() == 1 ? " PU" : " PUs") << " ("
            << present << ")\n"
            << machine.describe();
  if (grouping.kind == Grouping::Kind::automatic)
    std::cout << "auto grouping: groups of at most " << grouping.max_group << " ranks\n";
  std::cout << plan.describe();
  if (!args.dot_file.empty()) std::cout << "wrote " << args.dot_file << "\n";
  return 0;
}

}  // namespace

void add_topo_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* command =
      app.add_subcommand("topo",
                         "print the node's machine (detected, or synthetic) and the hierarchy planned over it: groups, "
                         "leaders, and the ranks that talk off-node");
  command
      ->add_option("--node-topology", args->node_topology,
                   "each node's machine in hwloc's synthetic syntax, e.g. \"package:2 l3:2 core:4 pu:1\" "
                   "(default: this machine, detected by hwloc)")
      ->type_name("DESC");
  command->add_option("--nodes", args->nodes, "nodes, all with this machine")->type_name("N")->capture_default_str();
  auto* per_node = command
                       ->add_option("--ranks-per-node", args->ranks_per_node,
                                    "ranks on every node (default: the machine's PU count)")
                       ->type_name("K");
  command
      ->add_option("--ranks-per-node-list", args->ranks_per_node_list,
                   "ranks on each node, for uneven nodes, e.g. 5,8,1 (implies --nodes)")
      ->type_name("K,K,...")
      ->excludes(per_node);
  command
      ->add_option("--grouping", args->grouping,
                   "auto, core, l2, l3, numa, package or size:K; auto takes the finest of l2, l3, numa that "
                   "shares ranks, if its groups fit --max-group, else size:M")
      ->type_name("POLICY")
      ->capture_default_str();
  command->add_option("--max-group", args->max_group, "largest group auto may choose")
      ->type_name("M")
      ->capture_default_str();
  command->add_flag("--multi-leader", args->multi_leader,
                    "one level of groups whose leaders all talk off-node, instead of one leader per node");
  command->add_option("--dot", args->dot_file, "also write the plan as Graphviz to FILE")->type_name("FILE");
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback(
      [args, command, &run_parsed] { run_parsed = [args, command] { return run_topo(*args, *command); }; });
}

}  // namespace copse
