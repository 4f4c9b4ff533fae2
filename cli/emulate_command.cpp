// copse emulate: one algorithm on real data on an emulated cluster, verified
// against the sequential reference and cross-checked with the simulator.

#include <iostream>

#include "cli/cluster_options.hpp"
#include "common/units.hpp"

namespace copse {
namespace {

struct EmulateArgs {
  ClusterArgs cluster;
  AlgorithmArgs choice;
  std::string collective = "allreduce";
  int root = 0;
  std::string blocks = "auto";
  std::string trace;  // --trace FILE: Chrome-trace JSON of the last repetition
  bool json = false;
};

int run_emulate(const EmulateArgs& args) {
  const bool select = selects_algorithm(args.choice);  // --algorithm auto
  const AlgorithmInfo* named = select ? nullptr : &chosen_algorithm(args.choice, args.collective);
  const std::optional<int> requested = blocks_option(args.blocks, true);
  const EmulationSetup setup = make_setup(args.cluster);
  const AlgorithmInfo& algorithm =
      named ? *named
            : select_for_cluster(setup.cluster, parse_collective(args.collective), setup.op, setup.count, args.root)
                  .algorithm();
  Timeline timeline;
  const CheckedEmulation run = run_checked_emulation(setup.cluster, algorithm, setup.op, setup.count, args.root,
                                                     requested, args.trace.empty() ? nullptr : &timeline);
  if (!args.trace.empty()) {
    TraceOptions trace;
    trace.name = std::string(to_string(algorithm.collective)) + " " + std::string(algorithm.name) + ", " +
                 std::to_string(setup.cluster.ranks()) + " ranks, " + format_bytes(setup.bytes);
    write_picture_file("--trace", args.trace,
                       [&](std::ostream& out) { write_chrome_trace(out, timeline, setup.cluster.ranks(), trace); });
  }
  Json j = emulation_json(setup, algorithm, run, requested);
  j["selected"] = select;

  if (args.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    const EmulatedCluster& cluster = setup.cluster;
    const auto& hierarchy = cluster.hierarchy();
    std::cout << to_string(algorithm.collective) << " " << algorithm.name << (select ? " (selected)" : "") << ": "
              << (hierarchy ? std::to_string(cluster.nodes()) + " nodes"
                            : std::to_string(cluster.nodes()) + " nodes x " +
                                  std::to_string(cluster.spec().ranks_per_node.front()) + " ranks")
              << " = " << cluster.ranks() << " ranks, " << format_bytes(setup.bytes) << " = " << setup.count << " x "
              << to_string(setup.op.dtype) << ", op " << setup.op.name << ", " << run.blocks << " blocks"
              << (requested ? "" : " (auto)") << "\n"
              << "  cost model    " << model_summary(cluster.spec().model) << "\n";
    if (hierarchy)
      std::cout << "  hierarchy     " << hierarchy->grouping << (hierarchy->multi_leader ? ", multi-leader" : "")
                << ", " << hierarchy->offnode.size() << " off-node ranks, "
                << (cluster.pipelined_across_levels(algorithm) ? "one tree pipelined across levels"
                                                               : "phased (groups reduce in parallel slices)")
                << "\n";
    const WallStats wall = wall_stats(run.emulation.wall_seconds);
    std::cout << "  virtual time  " << format_time(to_seconds(run.emulation.virtual_time))
              << " (simulator: " << format_time(to_seconds(run.simulated_time)) << ")\n"
              << "  wall time     min " << format_time(wall.min) << ", median " << format_time(wall.median) << " over "
              << run.emulation.wall_seconds.size() << " repetitions\n"
              << "  result        " << (run.emulation.verified ? "verified" : "WRONG") << "\n";
    if (!cluster.spec().arrival.none())
      std::cout << "  arrival       " << arrival_summary(cluster.spec().arrival, run.emulation.virtual_finish) << "\n";
  }
  if (!run.ok) throw RunFailure(run.failure);
  return 0;
}

}  // namespace

void add_emulate_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<EmulateArgs>();
  args->cluster = configured_cluster_args(config);
  const auto& blocks = config.options().collectives.blocks;
  args->blocks = blocks ? std::to_string(*blocks) : "auto";
  auto* command = app.add_subcommand("emulate",
                                     "run one algorithm on real data on an emulated cluster (each rank a fiber, one "
                                     "worker thread per core), verify the result");
  add_algorithm_options(command, args->choice);
  add_collective_options(command, args->collective, args->root, args->blocks);
  add_cluster_options(command, args->cluster, true);
  command
      ->add_option("--trace", args->trace,
                   "write the last repetition as Chrome-trace JSON (chrome://tracing, ui.perfetto.dev): virtual "
                   "and wall time as two processes, threads per rank for sends, receives and local work")
      ->type_name("FILE");
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_emulate(*args); };
  });
}

}  // namespace copse
