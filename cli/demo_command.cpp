// copse demo: every allreduce algorithm on one emulated cluster, as a table.

#include <iostream>

#include "cli/cluster_options.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace copse {
namespace {

struct DemoArgs {
  ClusterArgs cluster;
  bool json = false;
};

int run_demo(const DemoArgs& args) {
  const EmulationSetup setup = make_setup(args.cluster);
  const EmulatedCluster& cluster = setup.cluster;
  Json results = Json::array();
  std::vector<std::string> failures;

  if (!args.json) {
    std::cout << "copse demo: every allreduce algorithm on an emulated cluster of " << cluster.nodes() << " nodes x "
              << args.cluster.ranks_per_node << " ranks (" << cluster.ranks() << " threads), "
              << format_bytes(setup.bytes) << " per rank (" << setup.count << " x " << to_string(setup.op.dtype)
              << "), op " << setup.op.name << "\n"
              << "cost model: " << model_summary(cluster.spec().model) << "\n"
              << "blocks: auto (the count that minimises simulated time); virtual time: the emulator's clock\n"
              << "(checked equal to the simulator's); wall time: the slowest rank per repetition, over "
              << cluster.spec().repetitions << " repetitions\n\n";
    std::cout << pad("ALGORITHM", 20) << pad("BLOCKS", 8, true) << pad("VIRTUAL TIME", 14, true)
              << pad("WALL MIN", 12, true) << pad("WALL MEDIAN", 13, true) << "  VERIFIED\n";
  }
  for (const auto& algorithm : algorithms()) {
    if (algorithm.collective != Collective::allreduce) continue;
    if (algorithm.needs_commutative && !setup.op.commutative) {
      results.push_back({{"algorithm", algorithm.name}, {"skipped", "needs a commutative operator"}});
      if (!args.json) std::cout << pad(std::string(algorithm.name), 20) << "  skipped: needs a commutative operator\n";
      continue;
    }
    const CheckedEmulation run = run_checked_emulation(cluster, algorithm, setup.op, setup.count, 0, std::nullopt);
    if (!run.ok) failures.push_back(std::string(algorithm.name) + ": " + run.failure);
    if (!args.json) {
      const WallStats wall = wall_stats(run.emulation.wall_seconds);
      std::cout << pad(std::string(algorithm.name), 20) << pad(std::to_string(run.blocks), 8, true)
                << pad(format_time(to_seconds(run.emulation.virtual_time)), 14, true)
                << pad(format_time(wall.min), 12, true) << pad(format_time(wall.median), 13, true) << "  "
                << (run.ok ? "yes" : "NO: " + run.failure) << std::endl;
    }
    results.push_back(emulation_json(setup, algorithm, run, std::nullopt));
  }
  if (args.json) {
    std::cout << Json{{"nodes", cluster.nodes()}, {"ranks_per_node", args.cluster.ranks_per_node},
                      {"ranks", cluster.ranks()}, {"bytes", setup.bytes},
                      {"count", setup.count},     {"dtype", to_string(setup.op.dtype)},
                      {"op", setup.op.name},      {"repetitions", cluster.spec().repetitions},
                      {"results", results}}
                     .dump(2)
              << "\n";
  }
  if (!failures.empty()) throw RunFailure(join(failures, "; "));
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<DemoArgs>();
  args->cluster = configured_cluster_args(config);
  auto* command = app.add_subcommand(
      "demo",
      "every allreduce algorithm on an emulated cluster with auto blocks: a table of blocks, virtual and wall "
      "times, and verification");
  add_cluster_options(command, args->cluster, false);
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object with a result per algorithm");
  command->callback([args, &run_parsed] { run_parsed = [args] { return run_demo(*args); }; });
}

}  // namespace copse
