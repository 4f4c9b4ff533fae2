// copse tree: the communication graph of one algorithm's schedule as Graphviz
// dot -- who sends to whom, in which steps and blocks -- read from the
// schedule itself (algorithms/comm_graph.hpp), so every registered algorithm
// and every schedule file can be drawn.

#include <fstream>
#include <iostream>

#include "algorithms/comm_graph.hpp"
#include "cli/cluster_options.hpp"
#include "cli/options.hpp"

namespace copse {
namespace {

struct TreeArgs {
  AlgorithmArgs choice;
  ScheduleShapeArgs shape;
  int ranks_per_node = 0;
  std::string dot = "-";
  bool json = false;
};

int run_tree(const TreeArgs& args) {
  const AlgorithmInfo& algorithm = chosen_algorithm(args.choice, args.shape.collective);
  const int ranks = chosen_ranks(args.choice, args.shape.ranks);
  require_at_least("--ranks-per-node", args.ranks_per_node, 0);
  const Shape shape = schedule_shape(args.shape, ranks);
  validate_shape(algorithm, shape);
  if (!algorithm.plan) throw UsageError("algorithm '" + std::string(algorithm.name) + "' has no schedule builder");
  const CommGraph graph = communication_graph(algorithm.plan(shape), shape, algorithm.pipelined_parts);

  DotOptions dot;
  dot.title = std::string(to_string(algorithm.collective)) + " " + std::string(algorithm.name) + ", " +
              std::to_string(shape.ranks) + " ranks, " + std::to_string(shape.count) + " elements, " +
              std::to_string(shape.blocks) + (shape.blocks == 1 ? " block" : " blocks") +
              (graph.parts > 1 ? ", " + std::to_string(graph.parts) + " parts" : "");
  const bool rooted = algorithm.collective == Collective::reduce || algorithm.collective == Collective::bcast;
  if (rooted) dot.root = shape.root;
  for (int r = 0; r < shape.ranks && args.ranks_per_node > 0; ++r) dot.node_of.push_back(r / args.ranks_per_node);

  if (args.dot == "-") {
    if (!args.json) write_dot(std::cout, graph, dot);
  } else {
    std::ofstream file(args.dot);
    if (!file) throw UsageError("--dot: cannot write " + args.dot);
    write_dot(file, graph, dot);
    file.close();
    if (!file) throw SystemError("--dot: writing " + args.dot + " failed");
  }
  if (args.json) {
    Json edges = Json::array();
    for (const CommEdge& e : graph.edges)
      edges.push_back({{"from", e.from},
                       {"to", e.to},
                       {"part", e.part},
                       {"steps", e.steps},
                       {"blocks", e.blocks},
                       {"elements", e.elements}});
    Json out = schedule_shape_json(algorithm.name, algorithm.collective, shape);
    out["parts"] = graph.parts;
    out["edges"] = edges;
    std::cout << out.dump(2) << "\n";
  } else if (args.dot != "-") {
    std::cout << "wrote " << args.dot << ": " << graph.edges.size() << " edges among " << shape.ranks
              << " ranks (render: dot -Tsvg " << args.dot << " -o graph.svg)\n";
  }
  return 0;
}

}  // namespace

void add_tree_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto args = std::make_shared<TreeArgs>();
  auto* command = app.add_subcommand(
      "tree", "draw an algorithm's communication graph (who sends to whom, in which steps and blocks) as Graphviz dot");
  add_algorithm_options(command, args->choice);
  add_schedule_shape_options(command, args->shape);
  command->add_option("--ranks-per-node", args->ranks_per_node, "draw consecutive ranks of K in a box per node")
      ->type_name("K")
      ->capture_default_str();
  command->add_option("--dot", args->dot, "write the dot here ('-': standard output)")
      ->type_name("FILE")
      ->capture_default_str();
  add_config_file_option(command);
  command->add_flag("--json", args->json,
                    "print the edges as JSON instead of the dot (with --dot FILE: the dot to the file, the JSON here)");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_tree(*args); };
  });
}

}  // namespace copse
