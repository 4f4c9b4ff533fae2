// copse study depth | bjorndalen | flat-hier | traff: the studies that were
// bench programs, now tools/study_*.hpp runs; this file reads their options,
// shows a progress line while they run, and prints the table or the JSON.

#include "cli/study_runs.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/progress.hpp"
#include "common/units.hpp"
#include "tools/study_bjorndalen.hpp"
#include "tools/study_depth.hpp"
#include "tools/study_flat_hier.hpp"
#include "tools/study_traff.hpp"

namespace copse {
namespace study_runs {

// What every study takes besides its own options.
struct CommonArgs {
  std::string out;
  std::string model = "cluster";  // cluster | config (depth, flat-hier, traff)
  bool json = false;
};

// "a,b,c" -> {"a", "b", "c"}; UsageError naming `option` for an empty item.
std::vector<std::string> split_list(std::string_view option, const std::string& text) {
  std::vector<std::string> items;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    items.push_back(text.substr(at, comma - at));
    if (items.back().empty()) throw UsageError(std::string(option) + ": an empty item in \"" + text + "\"");
    at = comma + 1;
  }
  return items;
}

// Sizes of int32 vectors: whole numbers of 4 bytes, at least one.
std::vector<std::uint64_t> size_list(std::string_view option, const std::string& text) {
  std::vector<std::uint64_t> sizes;
  for (const auto& item : split_list(option, text)) {
    sizes.push_back(size_option(option, item));
    if (sizes.back() == 0 || sizes.back() % 4 != 0)
      throw UsageError(std::string(option) + ": " + item + " is not a positive whole number of int32 (4 bytes)");
  }
  return sizes;
}

std::vector<std::uint64_t> count_list(std::string_view option, const std::string& text) {
  std::vector<std::uint64_t> counts;
  for (const auto& item : split_list(option, text)) {
    if (item.find_first_not_of("0123456789") != std::string::npos || item.size() > 18)
      throw UsageError(std::string(option) + ": \"" + item + "\" is not a whole number");
    counts.push_back(std::stoull(item));
  }
  return counts;
}

// Node or rank counts: whole numbers >= 1.
std::vector<int> positive_list(std::string_view option, const std::string& text) {
  std::vector<int> values;
  for (const std::uint64_t n : count_list(option, text)) {
    if (n < 1 || n > 1u << 24)
      throw UsageError(std::string(option) + ": " + std::to_string(n) + " is not in 1 .. 2^24");
    values.push_back(static_cast<int>(n));
  }
  return values;
}

CostModel study_model(const CommonArgs& args, const Config& config) {
  if (args.model == "cluster") return CostModel::cluster();
  if (args.model == "config") return make_cost_model(config.options().model);
  throw UsageError("--model: expected cluster or config (got \"" + args.model + "\")");
}

// The study's directory, created.
std::filesystem::path output_dir(const CommonArgs& args) {
  const std::filesystem::path dir = args.out;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw SystemError("--out " + dir.string() + ": " + error.message());
  return dir;
}

// Prints the study: its tables and where the files went, or `json` with the plot's path.
void print_study(const CommonArgs& args, const std::string& tables, const StudyPlot& plot, Json json) {
  if (args.json) {
    json["plot"] = plot.svg.empty() ? "" : plot.svg.string();
    std::cout << json.dump(2) << "\n";
    return;
  }
  std::cout << tables << "\nWrote " << plot.data.string() << " and " << plot.script.string() << "; "
            << plot_summary(plot) << "\n";
}

// `run(progress)`, the study, with a progress line "copse study NAME: PHASE,
// N of M UNIT" on a terminal, erased before the study's output.
template <class Run>
auto run_in_view(const CommonArgs& args, const std::string& name, const std::string& phase, const std::string& unit,
                 Run&& run) {
  ProgressLine progress("copse study " + name, args.json);
  progress.phase(phase, unit);
  return run(progress.callback());
}

// The options every study has: --out, --json, --config and (with_model) --model.
void add_common_options(CLI::App* command, CommonArgs& args, bool with_model) {
  if (with_model)
    command
        ->add_option("--model", args.model,
                     "cluster: the studies' cluster model (LogGP, shared 25 GB/s interface per node); config: the "
                     "configuration's [model] (--config FILE, COPSE_MODEL_*; e.g. copse calibrate's file)")
        ->type_name("cluster|config")
        ->capture_default_str();
  command->add_option("--out", args.out, "directory for the data, the gnuplot script and the plot")
      ->type_name("DIR")
      ->capture_default_str();
  add_config_file_option(command);
  command->add_flag("--json", args.json, "print the rows as JSON (no progress line)");
}

Json time_json(Picos time) { return Json{{"time_ps", time}, {"time", to_seconds(time)}}; }

// ---- depth ----

struct DepthArgs {
  CommonArgs common{"study-depth", "cluster", false};
  std::string nodes = "2,8,32,128,512";
  int ranks_per_node = 8;
  std::string bytes = "8,1MiB";
  std::string forms =
      "binomial,binary-tree,chain,dual-root,flat,groups-2,groups-4,groups-8,multi-leader-2,"
      "multi-leader-4,lanes";
  int linear_limit = 1024;
};

int run_depth(const DepthArgs& args, const Config& config) {
  DepthStudyOptions o;
  o.nodes = positive_list("--nodes", args.nodes);
  require_at_least("--ranks-per-node", args.ranks_per_node, 1);
  o.ranks_per_node = args.ranks_per_node;
  o.bytes = size_list("--bytes", args.bytes);
  o.forms.clear();
  for (const auto& name : split_list("--forms", args.forms))
    o.forms.push_back(option_value("--forms", [&] { return parse_depth_form(name); }));
  o.model = study_model(args.common, config);
  o.linear_limit = args.linear_limit;
  const std::filesystem::path dir = output_dir(args.common);
  const DepthStudy study = run_in_view(args.common, "depth", "simulating", "points",
                                       [&](const ProgressCallback& progress) { return run_depth_study(o, progress); });
  const StudyPlot plot = write_depth_plot(dir, study);
  Json rows = Json::array();
  for (const DepthPoint& p : study.points) {
    Json row{{"form", o.forms[p.form].name},
             {"label", o.forms[p.form].label(o.ranks_per_node)},
             {"nodes", p.nodes},
             {"ranks", p.nodes * o.ranks_per_node},
             {"bytes", p.bytes},
             {"blocks", p.blocks}};
    row.update(time_json(p.time));
    rows.push_back(row);
  }
  print_study(args.common, depth_tables(study), plot,
              Json{{"study", "depth"},
                   {"ranks_per_node", o.ranks_per_node},
                   {"nodes", o.nodes},
                   {"bytes", o.bytes},
                   {"rows", rows}});
  return 0;
}

}  // namespace study_runs

void add_depth_study(CLI::App* study, const Config& config, RunParsed& run_parsed) {
  using namespace study_runs;
  auto args = std::make_shared<DepthArgs>();
  auto* command = study->add_subcommand(
      "depth",
      "depth versus fan-out: allreduce through the simulator on nodes of equal size, flat trees (binomial, "
      "binary-tree, chain, dual-root, fan-out p-1) against groups inside nodes and lanes (tables and a plot)");
  command->add_option("--nodes", args->nodes, "node counts to sweep (p = nodes x ranks per node)")
      ->type_name("N,N,...")
      ->capture_default_str();
  command->add_option("--ranks-per-node", args->ranks_per_node, "ranks on each node")
      ->type_name("K")
      ->capture_default_str();
  command->add_option("--bytes", args->bytes, "bytes of int32 per rank, one table each")
      ->type_name("SIZE,...")
      ->capture_default_str();
  command
      ->add_option("--forms", args->forms,
                   "forms: a flat algorithm (binomial, binary-tree, chain, dual-root, flat), groups-K (groups of K "
                   "ranks in a node, binomial between nodes), multi-leader-K, lanes")
      ->type_name("FORM,...")
      ->capture_default_str();
  command->add_option("--linear-limit", args->linear_limit, "the chain and flat forms stop beyond this many ranks")
      ->type_name("P")
      ->capture_default_str();
  add_common_options(command, args->common, true);
  command->callback(
      [args, &config, &run_parsed] { run_parsed = [args, &config] { return run_depth(*args, config); }; });
}

namespace study_runs {

// ---- bjorndalen ----

struct BjorndalenArgs {
  CommonArgs common{"study-bjorndalen", "cluster", false};
  std::string intra_latency = "37.5us", inter_latency = "150us", overhead = "10us";
  bool no_sweep = false;
};

Json bjorndalen_json(const BjorndalenStudy& study) {
  Json rows = Json::array();
  for (const BjorndalenRow& r : study.rows) {
    const BjorndalenScheme& s = bjorndalen_schemes()[r.scheme];
    rows.push_back({{"model", r.timing == Timing::loggp ? "loggp" : "hockney"},
                    {"configuration", s.label},
                    {"paper_us", s.paper_us},
                    {"simulated_ps", r.simulated},
                    {"emulated_ps", r.emulated},
                    {"verified", r.verified},
                    {"ok", r.ok()}});
  }
  Json sweeps = Json::array();
  const std::size_t columns = study.options.sweep_fractions.size();
  for (const BjorndalenSweep& sweep : study.sweeps) {
    Json grid = Json::array();
    for (std::size_t at = 0; at < sweep.orders.size(); at += columns)
      grid.push_back(std::vector<std::string>(sweep.orders.begin() + static_cast<long>(at),
                                              sweep.orders.begin() + static_cast<long>(at + columns)));
    sweeps.push_back({{"model", sweep.timing == Timing::loggp ? "loggp" : "hockney"},
                      {"overheads", study.options.sweep_overheads},
                      {"fractions", study.options.sweep_fractions},
                      {"orders", grid},
                      {"paper_cells", sweep.paper_cells()}});
  }
  return Json{{"study", "bjorndalen"},
              {"intra_latency", study.options.intra_latency},
              {"inter_latency", study.options.inter_latency},
              {"overhead", study.options.overhead},
              {"rows", rows},
              {"sweeps", sweeps}};
}

int run_bjorndalen(const BjorndalenArgs& args) {
  BjorndalenStudyOptions o;
  o.intra_latency = time_option("--intra-latency", args.intra_latency);
  o.inter_latency = time_option("--inter-latency", args.inter_latency);
  o.overhead = time_option("--overhead", args.overhead);
  if (args.no_sweep) o.sweep_overheads.clear(), o.sweep_fractions.clear();
  const std::filesystem::path dir = output_dir(args.common);
  const BjorndalenStudy study =
      run_in_view(args.common, "bjorndalen", "emulating and simulating", "runs",
                  [&](const ProgressCallback& progress) { return run_bjorndalen_study(o, progress); });
  const StudyPlot plot = write_bjorndalen_plot(dir, study);
  print_study(args.common, bjorndalen_tables(study), plot, bjorndalen_json(study));
  if (!study.ok()) throw RunFailure("an emulated run gave a wrong result or a virtual time unlike the simulator's");
  return 0;
}

// ---- flat-hier ----

struct FlatHierArgs {
  CommonArgs common{"study-flat-hier", "cluster", false};
  std::string clusters = "4x8,16x16,64x32";
  std::string bytes = "1MiB,8";
  std::string forms;  // empty: the study's
  int emulate_up_to = 32;
};

std::pair<int, int> parse_cluster(const std::string& text) {
  const auto x = text.find('x');
  const std::vector<int> both = x == std::string::npos
                                    ? std::vector<int>{}
                                    : positive_list("--clusters", text.substr(0, x) + "," + text.substr(x + 1));
  if (both.size() != 2) throw UsageError("--clusters: \"" + text + "\" is not NODESxRANKS (e.g. 16x16)");
  return {both[0], both[1]};
}

int run_flat_hier(const FlatHierArgs& args, const Config& config) {
  FlatHierStudyOptions o;
  o.clusters.clear();
  for (const auto& item : split_list("--clusters", args.clusters)) o.clusters.push_back(parse_cluster(item));
  o.bytes = size_list("--bytes", args.bytes);
  if (!args.forms.empty()) {
    o.forms.clear();
    for (const auto& text : split_list("--forms", args.forms))
      o.forms.push_back(option_value("--forms", [&] { return parse_flat_hier_form(text); }));
  }
  o.model = study_model(args.common, config);
  o.emulate_up_to = args.emulate_up_to;
  const std::filesystem::path dir = output_dir(args.common);
  const FlatHierStudy study =
      run_in_view(args.common, "flat-hier", "emulating and simulating", "points",
                  [&](const ProgressCallback& progress) { return run_flat_hier_study(o, progress); });
  const StudyPlot plot = write_flat_hier_plot(dir, study);
  Json rows = Json::array();
  for (const FlatHierPoint& p : study.points) {
    Json row{{"cluster", std::to_string(p.nodes) + "x" + std::to_string(p.per_node)},
             {"nodes", p.nodes},
             {"ranks_per_node", p.per_node},
             {"bytes", p.bytes},
             {"form", flat_hier_form_name(o.forms[p.form])},
             {"label", o.forms[p.form].label()},
             {"blocks", p.blocks},
             {"emulated", p.emulated},
             {"ok", p.ok}};
    row.update(time_json(p.time));
    rows.push_back(row);
  }
  print_study(args.common, flat_hier_tables(study), plot, Json{{"study", "flat-hier"}, {"rows", rows}});
  if (!study.ok()) throw RunFailure("an emulated run gave a wrong result or a virtual time unlike the simulator's");
  return 0;
}

// ---- traff ----

struct TraffArgs {
  CommonArgs common{"study-traff", "config", false};
  int nodes = 36, ranks_per_node = 8;
  std::string counts;  // empty: his Table 2's
  std::uint64_t block_elements = 16000;
};

Json traff_json(const TraffStudy& study) {
  const auto cell = [](const TraffTime& t) { return Json{{"time_ps", t.time}, {"blocks", t.blocks}}; };
  Json rows = Json::array();
  for (const TraffRow& r : study.rows)
    rows.push_back({{"count", r.count},
                    {"native_algorithm", r.native_algorithm},
                    {"native", cell(r.native)},
                    {"reduce_bcast", cell(r.reduce_bcast)},
                    {"tree_paper", cell(r.tree_paper)},
                    {"dual_paper", cell(r.dual_paper)},
                    {"tree_auto", cell(r.tree_auto)},
                    {"dual_auto", cell(r.dual_auto)}});
  return Json{{"study", "traff"},
              {"nodes", study.options.nodes},
              {"ranks_per_node", study.options.ranks_per_node},
              {"block_elements", study.options.block_elements},
              {"rows", rows},
              {"gamma0",
               {{"count", study.options.counts.back()},
                {"tree_auto", cell(study.tree_gamma0)},
                {"dual_auto", cell(study.dual_gamma0)}}}};
}

int run_traff(const TraffArgs& args, const Config& config) {
  TraffStudyOptions o;
  require_at_least("--nodes", args.nodes, 1);
  require_at_least("--ranks-per-node", args.ranks_per_node, 1);
  o.nodes = args.nodes;
  o.ranks_per_node = args.ranks_per_node;
  if (!args.counts.empty()) o.counts = count_list("--counts", args.counts);
  require_at_least("--block-elements", static_cast<long long>(args.block_elements), 1);
  o.block_elements = args.block_elements;
  o.model = study_model(args.common, config);
  const std::filesystem::path dir = output_dir(args.common);
  const TraffStudy study = run_in_view(args.common, "traff", "simulating", "counts",
                                       [&](const ProgressCallback& progress) { return run_traff_study(o, progress); });
  const StudyPlot plot = write_traff_plot(dir, study);
  print_study(args.common, traff_table(study), plot, traff_json(study));
  return 0;
}

}  // namespace study_runs

void add_bjorndalen_study(CLI::App* study, RunParsed& run_parsed) {
  using namespace study_runs;
  auto args = std::make_shared<BjorndalenArgs>();
  auto* command = study->add_subcommand(
      "bjorndalen",
      "Bjorndalen et al.'s 8-way cluster (4 nodes x 8 ranks, allreduce of one int32): the paper's four "
      "configurations emulated under LogGP with a shared 100 Mbit/s interface and under Hockney, beside the paper's "
      "figures, and where each model keeps the paper's order (tables and a plot)");
  command->add_option("--intra-latency", args->intra_latency, "latency between ranks of a node")
      ->type_name("TIME")
      ->capture_default_str();
  command->add_option("--inter-latency", args->inter_latency, "latency between nodes")
      ->type_name("TIME")
      ->capture_default_str();
  command->add_option("--overhead", args->overhead, "per-message overhead o")->type_name("TIME")->capture_default_str();
  command->add_flag("--no-sweep", args->no_sweep, "leave out the sweep of o and the intra/inter latency ratio");
  add_common_options(command, args->common, false);
  command->callback([args, &run_parsed] { run_parsed = [args] { return run_bjorndalen(*args); }; });
}

void add_flat_hier_study(CLI::App* study, const Config& config, RunParsed& run_parsed) {
  using namespace study_runs;
  auto args = std::make_shared<FlatHierArgs>();
  auto* command = study->add_subcommand(
      "flat-hier",
      "flat versus hierarchical allreduce: flat ring, Rabenseifner, recursive doubling, two-tree and dual-root "
      "against one node leader, multi-leader and lanes, each at its best block count (tables and a plot)");
  command->add_option("--clusters", args->clusters, "clusters, nodes x ranks per node")
      ->type_name("NxK,...")
      ->capture_default_str();
  command->add_option("--bytes", args->bytes, "bytes of int32 per rank")->type_name("SIZE,...")->capture_default_str();
  command
      ->add_option("--forms", args->forms,
                   "forms SHAPE:ALGORITHM[:GROUP] (flat:ring, leader:rabenseifner:4, leader:rabenseifner -- one "
                   "group per node --, multi-leader:dual-root:4, lanes:ring); default: 5 flat, 5 leader, 2 "
                   "multi-leader and 4 lanes forms")
      ->type_name("FORM,...");
  command
      ->add_option("--emulate-up-to", args->emulate_up_to,
                   "clusters of at most this many ranks run on the emulator (verified); larger ones are simulated")
      ->type_name("P")
      ->capture_default_str();
  add_common_options(command, args->common, true);
  command->callback(
      [args, &config, &run_parsed] { run_parsed = [args, &config] { return run_flat_hier(*args, config); }; });
}

void add_traff_study(CLI::App* study, const Config& config, RunParsed& run_parsed) {
  using namespace study_runs;
  auto args = std::make_shared<TraffArgs>();
  auto* command = study->add_subcommand(
      "traff",
      "Traff 2021's Table 2 under the model: native (best of three), reduce+bcast, binary-tree and dual-root with "
      "his blocks and the best ones, and tree/dual (his 4/3) per element count (a table and a plot; "
      "scripts/bench-traff.sh adds the mpirun part)");
  command->add_option("--nodes", args->nodes, "nodes")->type_name("N")->capture_default_str();
  command->add_option("--ranks-per-node", args->ranks_per_node, "ranks on each node")
      ->type_name("K")
      ->capture_default_str();
  command
      ->add_option("--counts", args->counts,
                   "MPI_INT elements per rank (default: his Table 2's 30 counts, 0 .. 8388608)")
      ->type_name("N,N,...");
  command->add_option("--block-elements", args->block_elements, "his block size: ceil(count / this) blocks")
      ->type_name("N")
      ->capture_default_str();
  add_common_options(command, args->common, true);
  command->callback(
      [args, &config, &run_parsed] { run_parsed = [args, &config] { return run_traff(*args, config); }; });
}

}  // namespace copse
