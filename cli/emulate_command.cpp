// copse emulate: one algorithm on real data on an emulated cluster, verified
// against the sequential reference and cross-checked with the simulator.

#include <iostream>

#include "cli/cluster_options.hpp"
#include "cli/memory_limits.hpp"
#include "cli/progress.hpp"
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
  bool force = false;  // --force: skip the memory check
};

// Refuses (UsageError) an emulation whose estimated memory cannot fit, before
// its ranks are set up: for --algorithm auto, the hungriest candidate's.
void check_emulation_memory(const EmulationSetup& setup, const AlgorithmInfo* named, Collective collective, int root) {
  Shape shape;
  shape.ranks = setup.cluster.ranks(), shape.count = setup.count, shape.root = root;
  for (bool count_steps : {false, true}) {
    MemoryEstimate estimate;
    auto consider = [&](const AlgorithmInfo& algorithm) {
      const MemoryEstimate e = emulation_estimate(algorithm, shape, setup.bytes, count_steps);
      if (e.bytes_per_rank > estimate.bytes_per_rank) estimate = e;
    };
    if (named)
      consider(*named);
    else
      for (const AlgorithmInfo& algorithm : algorithms())
        if (algorithm.collective == collective && selectable(algorithm, setup.op.commutative)) consider(algorithm);
    check_memory("emulate", shape.ranks, estimate);
  }
}

int run_emulate(const EmulateArgs& args) {
  const bool select = selects_algorithm(args.choice);  // --algorithm auto
  const AlgorithmInfo* named = select ? nullptr : &chosen_algorithm(args.choice, args.collective);
  const std::optional<int> requested = blocks_option(args.blocks, true);
  const EmulationSetup setup = make_setup(args.cluster);
  if (!args.force) check_emulation_memory(setup, named, parse_collective(args.collective), args.root);
  const AlgorithmInfo& algorithm =
      named ? *named
            : select_for_cluster(setup.cluster, parse_collective(args.collective), setup.op, setup.count, args.root)
                  .algorithm();
  Timeline timeline;
  ProgressLine progress("copse emulate", args.json);
  progress.phase("emulating " + std::string(algorithm.name) + " on " + std::to_string(setup.cluster.ranks()) +
                 " ranks");
  const CheckedEmulation run = run_checked_emulation(setup.cluster, algorithm, setup.op, setup.count, args.root,
                                                     requested, args.trace.empty() ? nullptr : &timeline);
  progress.finish();
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
  command->add_flag("--force", args->force,
                    "run even when the memory the run needs (estimated from the ranks, the size and the schedule) "
                    "exceeds what is available");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_emulate(*args); };
  });
}

}  // namespace copse
