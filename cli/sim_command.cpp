// copse sim: the simulator on one algorithm's schedule, without data.

#include <sys/resource.h>

#include <algorithm>
#include <iostream>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "cli/cluster_options.hpp"
#include "cli/memory_limits.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"
#include "plan/planner.hpp"
#include "plan/selection.hpp"

namespace copse {
namespace {

struct SimArgs {
  AlgorithmArgs choice;
  std::string collective = "allreduce";
  int ranks = 0;
  std::string bytes;
  int root = 0;
  std::string blocks = "1";
  std::string alpha;
  std::string beta;
  std::string intra_alpha;  // empty: same as alpha
  std::string intra_beta;   // empty: same as beta
  std::string gamma;
  std::string ports;
  ExtendedModelArgs extended;
  int ranks_per_node = 0;
  std::string arrival = "none";
  std::string arrival_error = "0";
  bool unequal_segments = false;
  std::string gantt;  // --gantt FILE: the run's Gantt chart (SVG)
  bool json = false;
  bool force = false;  // --force: skip the memory and time checks
};

// The configuration's model gives the defaults. Without --ranks-per-node
// every link is inter-node, so intra costs apply only when the configuration
// names them.
SimArgs configured_defaults(const Config& config) {
  const ModelOptions& m = config.options().model;
  SimArgs s;
  s.alpha = exact_time_text(m.inter_alpha);
  s.beta = exact_time_text(m.inter_beta);
  s.gamma = exact_time_text(m.gamma);
  s.ports = std::string(ports_name(m.ports));
  s.extended = configured_extended_model(m);
  if (config.source_of("model.intra_alpha").kind != ConfigSource::Kind::default_value)
    s.intra_alpha = exact_time_text(m.intra_alpha);
  if (config.source_of("model.intra_beta").kind != ConfigSource::Kind::default_value)
    s.intra_beta = exact_time_text(m.intra_beta);
  return s;
}

// The process's peak resident memory (the simulation's, measured after it)
// per simulated rank: what a user scales p by.
std::uint64_t peak_bytes_per_rank(int ranks) {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0 || ranks < 1) return 0;
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024 / static_cast<std::uint64_t>(ranks);
}

// The Gantt chart's rows: more would be unreadable (and the timeline large).
constexpr int kGanttRows = 64;

// --gantt FILE: the simulated run's timeline as a Gantt chart (SVG).
void write_sim_gantt(const std::string& path, const Timeline& timeline, const AlgorithmInfo& algorithm,
                     const Shape& shape, std::uint64_t bytes, int blocks, const SimulationOptions& options) {
  GanttOptions gantt;
  gantt.title = std::string(to_string(algorithm.collective)) + " " + std::string(algorithm.name) + ", " +
                std::to_string(shape.ranks) + " ranks, " + format_bytes(bytes) + ", " + std::to_string(blocks) +
                (blocks == 1 ? " block" : " blocks") + " (copse sim)";
  gantt.vector_elements = vector_elements(algorithm.collective, shape);
  gantt.segments = gantt_segments(blocks, algorithm.pipelined_parts);
  gantt.max_rows = kGanttRows;
  if (options.layout) gantt.node_of = options.layout->node_table();
  write_picture_file("--gantt", path, [&](std::ostream& out) { write_gantt_svg(out, timeline, shape.ranks, gantt); });
}

// Refuses (UsageError) a run whose estimated memory cannot fit, or that would
// take hours, before anything is allocated per rank: for --algorithm auto,
// the hungriest and the slowest candidate's.
void check_sim_memory(const SimArgs& args, const AlgorithmInfo* named, const Shape& shape) {
  if (args.force) return;
  // Arrival offsets, their predictions and the run's copy of them: 35 bytes
  // a rank measured (two-tree at p = 2^20: 89 B/rank against 54).
  const double inputs = args.arrival == "none" ? 0.0 : 40.0;
  // The engine simulate() will pick: every pair alike (a node a rank) with
  // bidirectional ports and no timeline is its plain case.
  RunTraits run;
  run.plain = args.ranks_per_node <= 1 && ports_option(args.ports) == Ports::bidirectional && args.gantt.empty();
  run.offsets = args.arrival != "none";
  MemoryEstimate estimate;
  double seconds = 0;
  auto consider = [&](const AlgorithmInfo& algorithm) {
    const MemoryEstimate e = simulation_estimate(algorithm, shape, inputs, run);
    if (e.bytes_per_rank > estimate.bytes_per_rank) estimate = e;
    seconds = std::max(seconds, simulation_seconds(algorithm, shape, run));
  };
  if (named)
    consider(*named);
  else
    for (const AlgorithmInfo& algorithm : algorithms())
      if (algorithm.collective == parse_collective(args.collective) && selectable(algorithm, true)) consider(algorithm);
  check_memory("sim", shape.ranks, estimate);
  check_time("sim", shape.ranks, seconds);
}

// --algorithm auto on more than one node (--ranks-per-node): the planner's
// choice among forms as well as algorithms (plan/planner.hpp, form auto) --
// what a Comm on these nodes runs, and what `copse demo` ranks. Nodes are
// this machine, grouped as the emulator groups them by default.
std::optional<CompiledPlan> plan_every_form(const SimArgs& args, const SimulationOptions& options, const Shape& shape,
                                            std::optional<int> requested) {
  if (!options.layout || options.layout->nodes() < 2) return std::nullopt;
  // Forms compose only collectives with a hierarchy; the others are chosen flat.
  if (!has_hierarchy(parse_collective(args.collective))) return std::nullopt;
  PlanContext context;
  context.layout = *options.layout;
  context.model = options.model;
  context.start = options.start;
  context.node_specs = [sizes = options.layout->node_sizes()] {
    const Machine machine = Machine::detect();
    std::vector<NodeSpec> nodes;
    for (int k : sizes) nodes.push_back(NodeSpec{machine, k, {}});
    return nodes;
  };
  CallKey key;
  key.collective = parse_collective(args.collective);
  key.form = Form::automatic;
  key.count = shape.count;
  key.root = shape.root;
  key.blocks = requested.value_or(0);
  key.hints = shape.hints;
  return Planner(std::move(context)).plan(key);
}

// The cost model --alpha ... --ports and the extended options describe.
ModelOptions sim_model(const SimArgs& args, LinkCost inter, LinkCost intra, double gamma, Ports ports) {
  ModelOptions model;
  model.intra_alpha = intra.alpha;
  model.intra_beta = intra.beta;
  model.inter_alpha = inter.alpha;
  model.inter_beta = inter.beta;
  model.gamma = gamma;
  model.ports = ports;
  apply_extended_model(args.extended, model);
  return model;
}

// The text output's "cost model" line.
void print_sim_model(const SimArgs& args, const ModelOptions& model) {
  std::cout << "  cost model    alpha " << format_time(model.inter_alpha) << ", beta " << format_time(model.inter_beta)
            << "/B, gamma " << format_time(model.gamma) << "/B, " << ports_name(model.ports) << "directional ports";
  if (args.ranks_per_node > 0)
    std::cout << "; same node (" << args.ranks_per_node << " ranks each): alpha " << format_time(model.intra_alpha)
              << ", beta " << format_time(model.intra_beta) << "/B";
  if (model.timing == Timing::loggp)
    std::cout << "; LogGP overhead " << format_time(model.intra_overhead) << " / " << format_time(model.inter_overhead)
              << " (same / other node)";
  if (model.nic_beta > 0)
    std::cout << "; shared interface " << format_time(model.nic_beta) << "/B x " << model.nic_rails << " rail(s)";
  std::cout << "\n";
}

// simulate(), with a progress line on a terminal (cli/progress.hpp) while it
// runs, counting the ranks the simulator has finished.
SimulationResult simulate_in_view(const SchedulePlan& plan, int ranks, SimulationOptions options, bool json) {
  ProgressLine progress("copse sim", json);
  progress.phase("simulating " + std::to_string(ranks) + " ranks", "ranks finished");
  options.progress = progress.callback();
  return simulate(plan, ranks, options);
}

// Refuses, before anything is allocated, a shape the named algorithm cannot
// take or a run that cannot fit in memory (cli/memory_limits.hpp).
void check_sim_request(const SimArgs& args, const AlgorithmInfo* named, std::uint64_t bytes,
                       std::optional<int> requested) {
  if (args.ranks < 1) return;
  Shape probe;
  probe.ranks = args.ranks, probe.count = bytes, probe.root = args.root, probe.blocks = requested.value_or(1);
  if (named) validate_shape(*named, probe);
  check_sim_memory(args, named, probe);
}

int run_sim(SimArgs args) {
  // --algorithm auto: the selection's choice (plan/selection.hpp), for a commutative operator.
  const bool select = selects_algorithm(args.choice);
  const AlgorithmInfo* named = select ? nullptr : &chosen_algorithm(args.choice, args.collective);
  args.ranks = chosen_ranks(args.choice, args.ranks);
  const std::uint64_t bytes = size_option("--bytes", args.bytes);
  const std::optional<int> requested = blocks_option(args.blocks, true);
  require_at_least("--ranks-per-node", args.ranks_per_node, 0);
  const LinkCost inter{time_option("--alpha", args.alpha), time_option("--beta", args.beta)};
  const LinkCost intra{args.intra_alpha.empty() ? inter.alpha : time_option("--intra-alpha", args.intra_alpha),
                       args.intra_beta.empty() ? inter.beta : time_option("--intra-beta", args.intra_beta)};
  const double gamma = time_option("--gamma", args.gamma);
  const Ports ports = ports_option(args.ports);
  check_sim_request(args, named, bytes, requested);

  const ModelOptions model = sim_model(args, inter, intra, gamma, ports);
  SimulationOptions options;
  options.model = make_cost_model(model);
  // Without --ranks-per-node every rank is on a node of its own.
  if (args.ranks_per_node > 0 && args.ranks >= 1) options.layout = RankMap::uniform(args.ranks, args.ranks_per_node);
  options.element_bytes = 1;
  auto [arrival, predicted] = arrival_setup(args.arrival, args.arrival_error, args.ranks);
  options.start = arrival.offsets;

  Shape shape;
  shape.ranks = args.ranks;
  shape.count = bytes;
  shape.root = args.root;
  shape.hints = planning_hints(options, predicted.empty() ? arrival.offsets : predicted);
  const std::optional<CompiledPlan> compiled = select ? plan_every_form(args, options, shape, requested) : std::nullopt;
  const AlgorithmInfo& algorithm =
      compiled ? *compiled->algorithm
      : named  ? *named
               : select_algorithm(parse_collective(args.collective), shape, options, true).algorithm();
  BlockSearch block_search;
  if (compiled)
    shape = compiled->shape;
  else
    shape.blocks = resolve_blocks({}, algorithm, shape, requested, options, &block_search);
  const Form form = compiled ? compiled->form : Form::flat;
  if (args.unequal_segments && form != Form::flat)
    throw UsageError("--unequal-segments: the selection chose the " + std::string(to_string(form)) +
                     " form; unequal segments apply to flat schedules only");

  std::optional<SegmentSearch> search;
  if (args.unequal_segments) {
    search = option_value("--unequal-segments", [&] { return best_unequal_segments(algorithm, shape, options); });
    shape = with_segments(shape, search->segments);
  }
  Timeline timeline;
  if (!args.gantt.empty()) options.timeline = &timeline, options.timeline_ranks = kGanttRows;
  const SimulationResult result =
      simulate_in_view(compiled ? compiled->plan : algorithm.plan(shape), shape.ranks, options, args.json);
  const int blocks = blocks_used(algorithm, shape);
  if (!args.gantt.empty()) write_sim_gantt(args.gantt, timeline, algorithm, shape, bytes, blocks, options);

  if (args.json) {
    Json j{{"algorithm", algorithm.name},
           {"selected", select},
           {"form", to_string(form)},
           {"collective", to_string(algorithm.collective)},
           {"ranks", shape.ranks},
           {"root", shape.root},
           {"bytes", bytes},
           {"blocks", blocks},
           {"blocks_requested", requested ? Json(*requested) : Json("auto")},
           {"blocks_bound", requested ? Json(nullptr) : Json(to_string(block_search.bound))},
           {"blocks_cap", requested || block_search.bound == BlockBound::none ? Json(nullptr) : Json(block_search.cap)},
           {"time", to_seconds(result.time)},
           {"time_ps", result.time},
           {"steps", result.max_steps},
           {"slowest_rank", result.slowest_rank},
           {"messages", result.messages},
           {"elements_moved", result.elements_moved},
           {"max_bytes_moved_per_rank", result.max_elements_received},
           {"peak_bytes_per_rank", peak_bytes_per_rank(shape.ranks)},
           {"ranks_per_node", args.ranks_per_node},
           {"alpha", inter.alpha},
           {"beta", inter.beta},
           {"intra_alpha", intra.alpha},
           {"intra_beta", intra.beta},
           {"gamma", gamma},
           {"ports", ports_name(ports)},
           {"timing", args.extended.timing},
           {"intra_overhead", model.intra_overhead},
           {"inter_overhead", model.inter_overhead},
           {"nic_beta", model.nic_beta},
           {"nic_rails", model.nic_rails}};
    add_arrival_json(j, arrival, args.arrival_error, result.finish);
    if (search) {
      j["segments"] = search->segments;
      j["equal_segments_time_ps"] = search->equal_time;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << to_string(algorithm.collective) << " " << algorithm.name
            << (select ? " (selected" + std::string(compiled ? ", form " + std::string(to_string(form)) : "") + ")"
                       : "")
            << ": " << shape.ranks << " ranks, " << format_bytes(bytes) << " (" << bytes << " B), " << blocks
            << (blocks == 1 ? " block" : " blocks") << (requested ? "" : " (auto)") << "\n";
  if (!requested && block_search.bound != BlockBound::none)
    std::cout << "  block search  at most " << block_search.cap << " blocks (" << to_string(block_search.bound)
              << ")\n";
  std::cout << "  time          " << format_time(to_seconds(result.time)) << " (slowest rank " << result.slowest_rank
            << ")\n"
            << "  steps         " << result.max_steps << " (longest rank)\n"
            << "  messages      " << result.messages << "\n"
            << "  most received " << format_bytes(result.max_elements_received) << " (one rank, from its peers)\n";
  print_sim_model(args, model);
  if (!arrival.none()) std::cout << "  arrival       " << arrival_summary(arrival, result.finish) << "\n";
  if (search)
    std::cout << "  segments      " << join(search->segments, ", ")
              << " (equal segments: " << format_time(to_seconds(search->equal_time)) << ")\n";
  return 0;
}

}  // namespace

void add_sim_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<SimArgs>(configured_defaults(config));
  auto* command =
      app.add_subcommand("sim", "simulate one algorithm under the cost model (no data; one element = one byte)");
  add_algorithm_options(command, args->choice);
  command->add_option("--ranks", args->ranks, "participants (default with --schedule-file: the file's)")
      ->type_name("P");
  command->add_option("--bytes", args->bytes, "bytes per rank")->type_name("SIZE")->required();
  add_collective_options(command, args->collective, args->root, args->blocks);
  command->add_option("--alpha", args->alpha, "per-message latency")->type_name("TIME")->capture_default_str();
  command->add_option("--beta", args->beta, "per-byte transfer time")->type_name("TIME")->capture_default_str();
  command->add_option("--gamma", args->gamma, "time per combined (or copied) byte")
      ->type_name("TIME")
      ->capture_default_str();
  command->add_option("--ports", args->ports, "bi: a rank sends and receives concurrently; uni: one at a time")
      ->type_name("bi|uni")
      ->capture_default_str();
  add_extended_model_options(command, args->extended);
  command
      ->add_option("--ranks-per-node", args->ranks_per_node,
                   "consecutive ranks sharing a node, whose links cost --intra-alpha/--intra-beta "
                   "(0: every rank on its own node)")
      ->type_name("K")
      ->capture_default_str();
  command->add_option("--intra-alpha", args->intra_alpha, "per-message latency within a node (default: --alpha)")
      ->type_name("TIME");
  command->add_option("--intra-beta", args->intra_beta, "per-byte time within a node (default: --beta)")
      ->type_name("TIME");
  add_arrival_options(command, args->arrival, args->arrival_error);
  command->add_flag("--unequal-segments", args->unequal_segments,
                    "from the equal segments (--blocks, or auto: the best), move elements between segments while "
                    "that lowers the simulated time (Lowery-Langou's unequal segmentation; uni-greedy)");
  command
      ->add_option("--gantt", args->gantt,
                   "write a Gantt chart of the run (SVG): a row per rank (the first 64), sends, receives and "
                   "local work as bars over virtual time, coloured by block")
      ->type_name("FILE");
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object");
  command->add_flag("--force", args->force,
                    "run even when the memory the run needs (estimated from the ranks and the schedule) exceeds what "
                    "is available, or its estimated time passes two minutes");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_sim(*args); };
  });
}

}  // namespace copse
