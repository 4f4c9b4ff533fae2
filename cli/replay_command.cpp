// copse replay FILE: an MPI application's collective calls, recorded by
// libcopse_mpi.so (mpi.trace), costed on the simulator for another cluster
// shape and algorithm choice (tools/replay.hpp has the rules). Prints the
// predicted time per call site and in total, beside the traced times.

#include <iostream>
#include <sstream>

#include "cli/cluster_options.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "tools/replay.hpp"

namespace copse {
namespace {

struct ReplayArgs {
  std::string file;
  ClusterArgs cluster;
  std::vector<std::string> algorithms;  // [COLLECTIVE=]NAME
  std::string blocks = "auto";
  double compute_scale = 1;
  bool json = false;
};

std::string seconds_text(double s) { return format_time(s); }

std::string number_text(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

int run_replay(const ReplayArgs& a, const Config& config) {
  const Trace trace = read_trace(a.file);
  ReplayOptions o;
  // The cluster's node sizes, model and hierarchy, as `copse emulate` reads them.
  o.cluster = make_setup(a.cluster).cluster.spec();
  const Options& conf = config.options();
  for (Collective c : all_collectives()) o.algorithms[c] = std::string(conf.collectives.algorithm(c).name);
  for (const auto& text : a.algorithms) {
    const auto eq = text.find('=');
    const Collective c = eq == std::string::npos
                             ? Collective::allreduce
                             : option_value("--algorithm", [&] { return parse_collective(text.substr(0, eq)); });
    const std::string name = eq == std::string::npos ? text : text.substr(eq + 1);
    option_value("--algorithm", [&] { return &find_algorithm(c, name); });
    o.algorithms[c] = name;
  }
  o.blocks = blocks_option(a.blocks, true);
  if (!(a.compute_scale >= 0)) throw UsageError("--compute-scale must be >= 0");
  o.compute_scale = a.compute_scale;
  const ReplayResult r = replay(trace, o);

  const auto& nodes = o.cluster.ranks_per_node;
  if (a.json) {
    Json algorithms = Json::object();
    for (const auto& [c, name] : o.algorithms) algorithms[std::string(to_string(c))] = name;
    Json sites = Json::array();
    for (const auto& s : r.sites)
      sites.push_back(Json{{"site", s.site},
                           {"collective", s.collective},
                           {"bytes", s.bytes},
                           {"comm_size", s.comm_size},
                           {"group", s.group},
                           {"algorithm", s.algorithm},
                           {"blocks", s.blocks},
                           {"calls", s.calls},
                           {"time", to_seconds(s.time)},
                           {"time_ps", s.time},
                           {"after_last_arrival_ps", s.after_last},
                           {"traced", s.traced}});
    Json out{{"trace", a.file},
             {"processes", r.processes},
             {"calls", r.calls},
             {"nodes", nodes.size()},
             {"ranks_per_node_list", nodes},
             {"ranks", r.ranks},
             {"algorithms", algorithms},
             {"blocks_requested", o.blocks ? Json(*o.blocks) : Json("auto")},
             {"compute_scale", o.compute_scale},
             {"sites", sites},
             {"total",
              {{"time", to_seconds(r.time)},
               {"time_ps", r.time},
               {"after_last_arrival_ps", r.after_last},
               {"compute_ps", r.compute},
               {"end", to_seconds(r.end)},
               {"end_ps", r.end},
               {"traced", r.traced},
               {"traced_end", r.traced_end}}}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  const bool even = std::all_of(nodes.begin(), nodes.end(), [&](int k) { return k == nodes.front(); });
  std::cout << "replay of " << a.file << ": " << r.processes << " processes, " << r.calls << " calls each -> "
            << (even ? std::to_string(nodes.size()) + " nodes x " + std::to_string(nodes.front()) + " ranks"
                     : std::to_string(nodes.size()) + " nodes")
            << " = " << r.ranks << " ranks (rank r computes as traced process r mod " << r.processes
            << (o.compute_scale != 1 ? ", gaps x " + number_text(o.compute_scale) : std::string()) << ")\n"
            << "model: " << model_summary(o.cluster.model) << (o.cluster.form != Form::flat ? "; hierarchical" : "")
            << "\n\n";
  std::cout << pad("site", 26) << pad("collective", 22) << pad("bytes", 10, true) << pad("comm", 6, true)
            << pad("group", 7, true) << "  " << pad("algorithm", 19) << pad("blocks", 7, true) << pad("calls", 7, true)
            << pad("predicted", 12, true) << pad("after last", 12, true) << pad("traced", 12, true) << "\n";
  for (const auto& s : r.sites)
    std::cout << pad(s.site, 26) << pad(s.collective, 22) << pad(format_bytes(s.bytes), 10, true)
              << pad(std::to_string(s.comm_size), 6, true) << pad(std::to_string(s.group), 7, true) << "  "
              << pad(s.algorithm, 19) << pad(std::to_string(s.blocks), 7, true) << pad(std::to_string(s.calls), 7, true)
              << pad(format_time(to_seconds(s.time)), 12, true) << pad(format_time(to_seconds(s.after_last)), 12, true)
              << pad(seconds_text(s.traced), 12, true) << "\n";
  std::cout << "\ntotal: collectives " << format_time(to_seconds(r.time)) << " per rank (after the last arrival "
            << format_time(to_seconds(r.after_last)) << "), computation " << format_time(to_seconds(r.compute))
            << " per rank, predicted end " << format_time(to_seconds(r.end)) << "\n"
            << "traced (" << r.processes << " processes, this machine): collectives " << seconds_text(r.traced)
            << " per process, last call ended at " << seconds_text(r.traced_end) << "\n";
  return 0;
}

}  // namespace

void add_replay_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<ReplayArgs>();
  args->cluster = configured_cluster_args(config);
  if (config.options().collectives.blocks) args->blocks = std::to_string(*config.options().collectives.blocks);
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "cost an MPI application's recorded collectives (COPSE_MPI_TRACE=FILE) on another cluster and algorithms");
  add_config_file_option(cmd);
  cmd->add_option("FILE", args->file, "the trace file (JSON lines, mpi/trace.hpp)")->required();
  add_cluster_options(cmd, args->cluster, true);
  // What a trace fixes, or the simulator does not use.
  for (const char* name : {"--bytes", "--dtype", "--op", "--arrival", "--arrival-error", "--repetitions", "--timeout"})
    cmd->remove_option(cmd->get_option(name));
  cmd->add_option("--algorithm", args->algorithms,
                  "NAME (allreduce) or COLLECTIVE=NAME, repeatable; default: the configuration's collectives.*")
      ->type_name("[C=]NAME");
  cmd->add_option("--blocks", args->blocks, "pipeline blocks, or auto: per call shape, the best for balanced arrival")
      ->type_name("N|auto")
      ->capture_default_str();
  cmd->add_option("--compute-scale", args->compute_scale,
                  "multiply the traced computation between calls (e.g. 0.25 for a strong-scaled run on 4x the ranks)")
      ->type_name("F")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->callback([args, &config, &run_parsed] { run_parsed = [args, &config] { return run_replay(*args, config); }; });
}

}  // namespace copse
