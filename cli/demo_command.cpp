// copse demo: the mission's shape in one table -- allreduce flat and in the
// hierarchical forms (one node leader, multi-leader, lanes) on an emulated
// cluster of 8-way nodes under the cluster cost model, every row verified,
// and a Gantt chart of the winner.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/cluster_options.hpp"
#include "cli/progress.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace copse {
namespace {

struct DemoArgs {
  ClusterArgs cluster;
  std::string model = "cluster";
  std::string gantt = "demo-winner.svg";
  bool json = false;
};

// The rows: the best flat algorithms against the hierarchical forms, each
// form with the inter-node algorithms that suit it (tools/experiment.hpp).
std::vector<HierarchyForm> demo_forms(int per_node) {
  const int group = std::min(per_node, 4);
  using S = Form;
  std::vector<HierarchyForm> forms;
  for (const char* a : {"ring", "rabenseifner", "recursive-doubling", "two-tree", "dual-root"})
    forms.push_back({S::flat, a, 0});
  for (S s : {S::leader, S::multi_leader})
    for (const char* a : {"rabenseifner", "dual-root"}) forms.push_back({s, a, group});
  for (const char* a : {"rabenseifner", "ring", "recursive-doubling"}) forms.push_back({S::lanes, a, 0});
  return forms;
}

// The command that runs `form` for real under mpirun: `nodes` hosts of
// `per_node` processes, the interposer (libcopse_mpi.so, built beside this
// executable) configured by environment (config/config.cpp's names).
std::string mpirun_command(const HierarchyForm& form, int nodes, int per_node) {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string library = (error ? std::filesystem::path("build/default") : exe.parent_path()) / "libcopse_mpi.so";
  std::string command = "mpirun -np " + std::to_string(nodes * per_node) + " --map-by ppr:" + std::to_string(per_node) +
                        ":node -x COPSE_HIERARCHY_FORM=" + std::string(to_string(form.shape)) +
                        " -x COPSE_COLLECTIVES_ALLREDUCE=" + form.algorithm;
  if (form.shape == Form::leader || form.shape == Form::multi_leader)
    command += " -x COPSE_HIERARCHY_GROUPING=size:" + std::to_string(form.group > 0 ? form.group : per_node);
  return command + " -x LD_PRELOAD=" + library + " ./app";
}

std::string two_decimals(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", x);
  return buffer;
}

// The best row of a kind (any, flat, hierarchical): its form, cluster,
// shape and virtual time.
struct Best {
  const HierarchyForm* form = nullptr;
  std::optional<EmulatedCluster> cluster;
  Shape shape;
  Picos time = 0;
};

// What the table's rows are and how they are measured, then its heading.
void print_demo_header(const DemoArgs& args, const EmulationSetup& setup, const ClusterSpec& base) {
  const int per_node = args.cluster.ranks_per_node;
  const ReduceOp& op = setup.op;
  std::cout << "copse demo: allreduce flat and hierarchical on an emulated cluster of " << setup.cluster.nodes()
            << " nodes x " << per_node << " ranks (" << setup.cluster.ranks() << " threads), "
            << format_bytes(setup.bytes) << " per rank (" << setup.count << " x " << to_string(op.dtype) << "), op "
            << op.name << "\n"
            << "cost model (" << args.model << "): " << model_summary(base.model) << "\n"
            << "forms: flat over all ranks; 1 leader per node above groups; multi-leader (every group leader talks "
               "off-node); lanes (node reduce-scatter, one inter-node allreduce per local rank, node allgather)\n"
            << "blocks: auto (the count that minimises simulated time); virtual time: the emulator's clock "
               "(checked equal to the simulator's);\nwall time: the slowest rank per repetition, over "
            << base.repetitions << " repetitions on this machine\n\n";
  std::cout << pad("FORM", 40) << pad("BLOCKS", 8, true) << pad("VIRTUAL TIME", 14, true) << pad("WALL MIN", 12, true)
            << pad("WALL MEDIAN", 13, true) << "  VERIFIED\n";
}

// The winner's Gantt chart, from the simulator (its virtual times are the emulator's).
void write_winner_gantt(const std::string& path, const Best& winner, const EmulationSetup& setup, int per_node) {
  const ReduceOp& op = setup.op;
  const AlgorithmInfo& algorithm = find_algorithm(Collective::allreduce, winner.form->algorithm);
  Timeline timeline;
  constexpr int kRows = 64;
  const SimulatedRun sim =
      run_simulated(*winner.cluster, algorithm, op.element_bytes, setup.count, 0, winner.shape.blocks, &timeline);
  GanttOptions gantt;
  gantt.title = "copse demo winner: " + winner.form->label() + ", " + std::to_string(winner.cluster->nodes()) +
                " nodes x " + std::to_string(per_node) + " ranks, " + format_bytes(setup.bytes) + ", " +
                std::to_string(sim.blocks) + (sim.blocks == 1 ? " block" : " blocks");
  gantt.vector_elements = setup.count;
  gantt.segments = gantt_segments(sim.blocks, algorithm.pipelined_parts);
  gantt.max_rows = kRows;
  gantt.node_of = winner.cluster->emulator_config().layout.node_table();
  write_picture_file("--gantt", path,
                     [&](std::ostream& out) { write_gantt_svg(out, timeline, winner.cluster->ranks(), gantt); });
}

int run_demo(const DemoArgs& args) {
  if (args.model != "cluster" && args.model != "config") throw UsageError("--model: expected cluster or config");
  const EmulationSetup setup = make_setup(args.cluster);
  ClusterSpec base = setup.cluster.spec();
  if (args.model == "cluster") base.model = CostModel::cluster();
  const int per_node = args.cluster.ranks_per_node;
  const ReduceOp& op = setup.op;
  Json results = Json::array();
  std::vector<std::string> failures;

  if (!args.json) print_demo_header(args, setup, base);
  Best best, best_flat, best_hier;
  const std::vector<HierarchyForm> forms = demo_forms(per_node);
  ProgressLine progress("copse demo", args.json);
  progress.phase("emulating", "forms");
  for (const HierarchyForm& form : forms) {
    progress.advance(static_cast<std::uint64_t>(&form - forms.data()), forms.size());
    const AlgorithmInfo& algorithm = find_algorithm(Collective::allreduce, form.algorithm);
    auto skip = [&](const std::string& why) {
      results.push_back(
          {{"form", form.shape_name()}, {"label", form.label()}, {"algorithm", algorithm.name}, {"skipped", why}});
      if (!args.json) progress.above([&] { std::cout << pad(form.label(), 40) << "  skipped: " << why << "\n"; });
    };
    if (algorithm.needs_commutative && !op.commutative) {
      skip("needs a commutative operator");
      continue;
    }
    // A form this cluster cannot take (groups or lanes on nodes of one rank) is skipped.
    std::optional<EmulatedCluster> cluster;
    CheckedEmulation run;
    try {
      cluster.emplace(with_form(base, form));
      run = run_checked_emulation(*cluster, algorithm, op, setup.count, 0, std::nullopt);
    } catch (const UsageError& e) {
      skip(e.what());
      continue;
    }
    if (!run.ok) failures.push_back(form.label() + ": " + run.failure);
    if (!args.json) {
      const WallStats wall = wall_stats(run.emulation.wall_seconds);
      progress.above([&] {
        std::cout << pad(form.label(), 40) << pad(std::to_string(run.blocks), 8, true)
                  << pad(format_time(to_seconds(run.emulation.virtual_time)), 14, true)
                  << pad(format_time(wall.min), 12, true) << pad(format_time(wall.median), 13, true) << "  "
                  << (run.ok ? "yes" : "NO: " + run.failure) << "\n"
                  << "    run it: " << mpirun_command(form, setup.cluster.nodes(), per_node) << std::endl;
      });
    }
    Json row = emulation_json(EmulationSetup{*cluster, op, setup.bytes, setup.count, setup.arrival_error}, algorithm,
                              run, std::nullopt);
    row["form"] = form.shape_name();
    row["label"] = form.label();
    row["command"] = mpirun_command(form, setup.cluster.nodes(), per_node);
    results.push_back(std::move(row));
    const Picos t = run.emulation.virtual_time;
    for (Best* b : {&best, form.shape == Form::flat ? &best_flat : &best_hier})
      if (run.ok && (!b->form || t < b->time)) b->form = &form, b->cluster = cluster, b->shape = run.shape, b->time = t;
  }

  progress.finish();
  std::string gantt_path;
  if (best.form && !args.gantt.empty()) {
    write_winner_gantt(args.gantt, best, setup, per_node);
    gantt_path = args.gantt;
  }

  auto ratio = [](Picos slow, Picos fast) { return static_cast<double>(slow) / static_cast<double>(fast); };
  if (args.json) {
    Json j{{"nodes", setup.cluster.nodes()},
           {"ranks_per_node", per_node},
           {"ranks", setup.cluster.ranks()},
           {"bytes", setup.bytes},
           {"count", setup.count},
           {"dtype", to_string(op.dtype)},
           {"op", op.name},
           {"repetitions", base.repetitions},
           {"model", args.model},
           {"results", results},
           {"winner", best.form ? Json{{"form", best.form->shape_name()},
                                       {"label", best.form->label()},
                                       {"algorithm", best.form->algorithm},
                                       {"virtual_time_ps", best.time}}
                                : Json(nullptr)},
           {"gantt", gantt_path.empty() ? Json(nullptr) : Json(gantt_path)}};
    std::cout << j.dump(2) << "\n";
  } else if (best.form) {
    std::cout << "\nwinner: " << best.form->label() << ", " << format_time(to_seconds(best.time)) << "\n";
    if (best_flat.form && best_hier.form) {
      const bool hier_wins = best_hier.time < best_flat.time;
      std::cout << "best hierarchical (" << best_hier.form->label() << ", " << format_time(to_seconds(best_hier.time))
                << ") ";
      if (best_hier.time == best_flat.time)
        std::cout << "ties with";
      else
        std::cout << "is "
                  << two_decimals(hier_wins ? ratio(best_flat.time, best_hier.time)
                                            : ratio(best_hier.time, best_flat.time))
                  << "x " << (hier_wins ? "faster than" : "slower than");
      std::cout << " the best flat (" << best_flat.form->label() << ", " << format_time(to_seconds(best_flat.time))
                << ")\n";
    }
    if (!gantt_path.empty()) std::cout << "Gantt chart of the winner: " << gantt_path << "\n";
  }
  if (!failures.empty()) throw RunFailure(join(failures, "; "));
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<DemoArgs>();
  args->cluster = configured_cluster_args(config);
  args->cluster.nodes = 4;  // the demo's own cluster: 8-way nodes
  args->cluster.ranks_per_node = 8;
  auto* command = app.add_subcommand(
      "demo",
      "allreduce flat, with one node leader, multi-leader and lanes on an emulated cluster of 8-way nodes under the "
      "cluster cost model: a table of blocks, virtual and wall times and verification, and a Gantt chart of the "
      "winner");
  add_cluster_options(command, args->cluster, false);
  command
      ->add_option("--model", args->model,
                   "cost model: cluster (LogGP, one shared 25 GB/s interface per node: CostModel::cluster()) or "
                   "config (the configuration's model)")
      ->type_name("cluster|config")
      ->capture_default_str();
  command->add_option("--gantt", args->gantt, "write the winner's Gantt chart (SVG) here ('': none)")
      ->type_name("FILE")
      ->capture_default_str();
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object with a result per form");
  command->callback([args, &run_parsed] { run_parsed = [args] { return run_demo(*args); }; });
}

}  // namespace copse
