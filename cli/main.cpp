// copse: the command-line program.
//
// Subcommands: algorithms, sim, emulate, verify, demo. The interface is a
// contract other tools script against (tests/cli_contract.sh checks it):
//   exit 0  success
//   exit 1  the run failed: wrong result, unproven schedule, schedule error,
//           timeout, virtual time differing from the simulator's
//   exit 2  bad input (unknown name, malformed size or time, out-of-range
//           number, operator the algorithm cannot serve, CLI syntax)
// Every failure prints exactly one line on stderr, starting "copse: ".

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/config_command.hpp"
#include "common/config.hpp"
#include "cli/options.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "common/units.hpp"
#include "internode/autotune.hpp"
#include "internode/cost_model.hpp"
#include "internode/executor.hpp"
#include "internode/registry.hpp"
#include "internode/verifier.hpp"
#include "node/emulator.hpp"
#include "node/hierarchical.hpp"
#include "topology/plan.hpp"

namespace copse {
void add_topo_command(CLI::App& app, std::function<int()>& run_parsed);  // cli/topo_command.cpp
namespace {

using Json = nlohmann::ordered_json;

// A failed run (not bad input): exit 1 with this message.
struct RunFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// ---------------------------------------------------------------- option values


std::uint64_t size_option(std::string_view option, const std::string& text) {
  return option_value(option, [&] { return parse_size(text); });
}

double time_option(std::string_view option, const std::string& text) {
  return option_value(option, [&] { return parse_time(text); });
}

// A default time written so that parse_time reads back exactly `seconds`:
// "1.5us", "0.1ns".
std::string time_text(double seconds, std::string_view unit) {
  const double scale = unit == "us" ? 1e6 : unit == "ns" ? 1e9 : 1.0;
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.15g", seconds * scale);
  return std::string(buffer) + std::string(unit);
}

// --blocks: "auto" (nullopt) or a whole number >= 1.
std::optional<int> blocks_option(const std::string& text, bool allow_auto) {
  if (allow_auto && text == "auto") return std::nullopt;
  const std::string expected = allow_auto ? "'auto' or a whole number >= 1" : "a whole number >= 1";
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end)
    throw UsageError("--blocks: expected " + expected + ", got \"" + text + "\"");
  if (value < 1) throw UsageError("--blocks: the block count must be at least 1, got " + text);
  return value;
}

Ports ports_option(const std::string& text) {
  if (text == "bi" || text == "bidirectional") return Ports::bidirectional;
  if (text == "uni" || text == "unidirectional") return Ports::unidirectional;
  throw UsageError("--ports: expected bi or uni, got \"" + text + "\"");
}

std::string_view ports_name(Ports p) { return p == Ports::bidirectional ? "bi" : "uni"; }

void require_at_least(std::string_view option, long long value, long long minimum) {
  if (value < minimum)
    throw UsageError(std::string(option) + " must be at least " + std::to_string(minimum) + ", got " +
                     std::to_string(value));
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

std::string dtype_names() {
  std::vector<std::string> names;
  for (DType t : all_dtypes()) names.emplace_back(to_string(t));
  return join(names, ", ");
}

std::string op_names() {
  std::vector<std::string> names;
  for (auto n : builtin_op_names()) names.emplace_back(n);
  return join(names, ", ");
}

// An operator the algorithm can serve, or a UsageError saying why not.

// Fills shape.blocks: the requested count, or the autotuned one.
void choose_blocks(const AlgorithmInfo& algorithm, Shape& shape, std::optional<int> requested,
                   const ExecutionOptions& options,
                   const std::function<SchedulePlan(const Shape&)>& plan_for = nullptr) {
  shape.blocks = 1;
  validate_shape(algorithm, shape);
  if (requested) shape.blocks = *requested;
  else if (plan_for) shape.blocks = best_blocks(plan_for, algorithm.pipelined, shape, options);
  else shape.blocks = best_blocks(algorithm, shape, options);
  validate_shape(algorithm, shape);
}

struct WallStats {
  double min = 0;
  double median = 0;
};

WallStats wall_stats(std::vector<double> seconds) {
  if (seconds.empty()) return {};
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  const double median = n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
  return {seconds.front(), median};
}

std::string pad(std::string text, std::size_t width, bool right = false) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

// ---------------------------------------------------------------- algorithms

struct AlgorithmsArgs {
  bool json = false;
};

int run_algorithms(const AlgorithmsArgs& args) {
  if (args.json) {
    Json list = Json::array();
    for (const auto& a : algorithms()) {
      list.push_back({{"collective", to_string(a.collective)},
                      {"name", a.name},
                      {"description", a.description},
                      {"needs_commutative", a.needs_commutative},
                      {"pipelined", a.pipelined}});
    }
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  std::size_t name_width = 4;
  for (const auto& a : algorithms()) name_width = std::max(name_width, a.name.size());
  std::cout << pad("COLLECTIVE", 11) << pad("NAME", name_width + 2) << pad("PIPELINED", 11)
            << pad("COMMUTATIVE-ONLY", 18) << "DESCRIPTION\n";
  for (const auto& a : algorithms()) {
    std::cout << pad(std::string(to_string(a.collective)), 11) << pad(std::string(a.name), name_width + 2)
              << pad(a.pipelined ? "yes" : "no", 11) << pad(a.needs_commutative ? "yes" : "no", 18)
              << a.description << "\n";
  }
  return 0;
}

// ---------------------------------------------------------------- sim

struct SimArgs {
  std::string algorithm;
  std::string collective = "allreduce";
  int ranks = 0;
  std::string bytes;
  int root = 0;
  std::string blocks = "1";
  std::string alpha = time_text(LinkCost{}.alpha, "us");
  std::string beta = time_text(LinkCost{}.beta, "ns");
  std::string intra_alpha;  // empty: same as alpha
  std::string intra_beta;   // empty: same as beta
  std::string gamma = time_text(CostModel{}.gamma(), "ns");
  std::string ports = "bi";
  int ranks_per_node = 0;
  bool json = false;
};

int run_sim(const SimArgs& args) {
  const AlgorithmInfo& algorithm = find_algorithm(parse_collective(args.collective), args.algorithm);
  const std::uint64_t bytes = size_option("--bytes", args.bytes);
  const std::optional<int> requested = blocks_option(args.blocks, true);
  require_at_least("--ranks-per-node", args.ranks_per_node, 0);
  const LinkCost inter{time_option("--alpha", args.alpha), time_option("--beta", args.beta)};
  const LinkCost intra{args.intra_alpha.empty() ? inter.alpha : time_option("--intra-alpha", args.intra_alpha),
                       args.intra_beta.empty() ? inter.beta : time_option("--intra-beta", args.intra_beta)};
  const double gamma = time_option("--gamma", args.gamma);
  const Ports ports = ports_option(args.ports);

  ExecutionOptions options;
  options.model = CostModel({intra, inter}, gamma, ports);
  options.ranks_per_node = args.ranks_per_node;
  options.element_bytes = 1;

  Shape shape;
  shape.ranks = args.ranks;
  shape.count = bytes;
  shape.root = args.root;
  choose_blocks(algorithm, shape, requested, options);

  const ExecutionResult result = execute(algorithm.plan(shape), shape.ranks, options);
  const int blocks = blocks_used(algorithm, shape);

  if (args.json) {
    Json j{{"algorithm", algorithm.name},
           {"collective", to_string(algorithm.collective)},
           {"ranks", shape.ranks},
           {"root", shape.root},
           {"bytes", bytes},
           {"blocks", blocks},
           {"blocks_requested", requested ? Json(*requested) : Json("auto")},
           {"time", to_seconds(result.time)},
           {"time_ps", result.time},
           {"steps", result.max_steps},
           {"slowest_rank", result.slowest_rank},
           {"messages", result.messages},
           {"elements_moved", result.elements_moved},
           {"ranks_per_node", args.ranks_per_node},
           {"alpha", inter.alpha},
           {"beta", inter.beta},
           {"intra_alpha", intra.alpha},
           {"intra_beta", intra.beta},
           {"gamma", gamma},
           {"ports", ports_name(ports)}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << to_string(algorithm.collective) << " " << algorithm.name << ": " << shape.ranks << " ranks, "
            << format_bytes(bytes) << " (" << bytes << " B), " << blocks << (blocks == 1 ? " block" : " blocks")
            << (requested ? "" : " (auto)") << "\n"
            << "  time          " << format_time(to_seconds(result.time)) << " (slowest rank " << result.slowest_rank
            << ")\n"
            << "  steps         " << result.max_steps << " (longest rank)\n"
            << "  messages      " << result.messages << "\n"
            << "  cost model    alpha " << format_time(inter.alpha) << ", beta " << format_time(inter.beta)
            << "/B, gamma " << format_time(gamma) << "/B, " << (ports == Ports::bidirectional ? "bi" : "uni")
            << "directional ports";
  if (args.ranks_per_node > 0)
    std::cout << "; same node (" << args.ranks_per_node << " ranks each): alpha " << format_time(intra.alpha)
              << ", beta " << format_time(intra.beta) << "/B";
  std::cout << "\n";
  return 0;
}

// ---------------------------------------------------------------- emulate

struct EmulatedCluster {
  int nodes = 8;
  int ranks_per_node = 4;
  std::string bytes = "1MiB";
  std::string dtype = "int32";
  std::string op = "sum";
  std::string intra_alpha = time_text(CostModel{}.level(0).alpha, "us");
  std::string intra_beta = time_text(CostModel{}.level(0).beta, "ns");
  std::string inter_alpha = time_text(CostModel{}.level(1).alpha, "us");
  std::string inter_beta = time_text(CostModel{}.level(1).beta, "ns");
  std::string gamma = time_text(CostModel{}.gamma(), "ns");
  std::string ports = "bi";
  std::string receive_overhead = "0s";
  int repetitions = 3;
  std::string timeout = "60s";
  // The hierarchy (any of these turns it on): intranode groups feeding the
  // inter-node algorithm among the off-node ranks.
  std::string node_topology;        // hwloc synthetic text for every node; empty: this machine
  std::string grouping;             // auto | numa | package | l3 | l2 | core | size:K
  int max_group = 4;
  bool multi_leader = false;
  std::string ranks_per_node_list;  // uneven nodes, e.g. 5,8,1 (replaces --nodes and --ranks-per-node)
};

struct EmulateArgs {
  EmulatedCluster cluster;
  std::string algorithm;
  std::string collective = "allreduce";
  int root = 0;
  std::string blocks = "auto";
  bool json = false;
};

// Everything about one emulated run that does not depend on the algorithm.
struct EmulationSetup {
  std::shared_ptr<const HierarchyPlan> hierarchy;  // null: the algorithm runs flat over all ranks
  EmulatorConfig config;
  ExecutionOptions sim_options;  // the same model, for autotuning and the simulator cross-check
  ReduceOp op;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  int ranks = 0;
};

// Node sizes from --ranks-per-node-list ("5,8,1"), or --nodes x --ranks-per-node.
std::vector<int> node_sizes(const EmulatedCluster& c) {
  if (c.ranks_per_node_list.empty()) return std::vector<int>(static_cast<std::size_t>(c.nodes), c.ranks_per_node);
  return parse_rank_counts(c.ranks_per_node_list);
}

EmulationSetup make_setup(const EmulatedCluster& c) {
  require_at_least("--nodes", c.nodes, 1);
  require_at_least("--ranks-per-node", c.ranks_per_node, 1);
  require_at_least("--repetitions", c.repetitions, 1);
  require_at_least("--max-group", c.max_group, 1);
  const std::vector<int> sizes = node_sizes(c);
  long long ranks = 0;
  for (int k : sizes) ranks += k;
  if (ranks > std::numeric_limits<int>::max())
    throw UsageError("--nodes x --ranks-per-node is too many ranks (" + std::to_string(ranks) + ")");

  EmulationSetup s;
  s.ranks = static_cast<int>(ranks);
  s.op = builtin_op(c.op, parse_dtype(c.dtype));
  s.bytes = size_option("--bytes", c.bytes);
  if (s.bytes % s.op.element_bytes != 0)
    throw UsageError("--bytes: " + std::to_string(s.bytes) + " bytes is not a whole number of " +
                     std::to_string(s.op.element_bytes) + "-byte elements (" + s.op.name + " on " +
                     std::string(to_string(s.op.dtype)) + ")");
  s.count = s.bytes / s.op.element_bytes;

  const LinkCost intra{time_option("--intra-alpha", c.intra_alpha), time_option("--intra-beta", c.intra_beta)};
  const LinkCost inter{time_option("--inter-alpha", c.inter_alpha), time_option("--inter-beta", c.inter_beta)};
  const CostModel model({intra, inter}, time_option("--gamma", c.gamma), ports_option(c.ports),
                        time_option("--receive-overhead", c.receive_overhead));
  const double timeout = time_option("--timeout", c.timeout);
  if (!(timeout > 0)) throw UsageError("--timeout must be positive");
  const double timeout_ms = std::ceil(timeout * 1000);
  if (timeout_ms > 1e12) throw UsageError("--timeout: too long");

  s.config.nodes = c.nodes;
  s.config.ranks_per_node = c.ranks_per_node;
  const bool hierarchical = !c.node_topology.empty() || !c.grouping.empty() || !c.ranks_per_node_list.empty();
  if (hierarchical) {
    const Machine machine = c.node_topology.empty() ? Machine::detect() : Machine::synthetic(c.node_topology);
    std::vector<NodeSpec> nodes;
    for (int k : sizes) nodes.push_back(NodeSpec{machine, k, {}});
    s.hierarchy = std::make_shared<const HierarchyPlan>(
        plan_hierarchy(nodes, Grouping::parse(c.grouping.empty() ? "auto" : c.grouping, c.max_group), c.multi_leader));
    s.config.nodes = static_cast<int>(sizes.size());
    s.config.node_of = s.hierarchy->node_of;
    s.sim_options.node_of = s.hierarchy->node_of;
  }
  s.config.model = model;
  s.config.repetitions = c.repetitions;
  s.config.wait_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_ms));
  s.sim_options.model = model;
  s.sim_options.ranks_per_node = c.ranks_per_node;
  s.sim_options.element_bytes = s.op.element_bytes;
  return s;
}

struct EmulateOutcome {
  Json json;
  bool ok = false;
  std::string failure;  // one line when !ok
};

EmulateOutcome emulate_one(const EmulationSetup& s, const AlgorithmInfo& algorithm, int root,
                           std::optional<int> requested_blocks) {
  check_operator(algorithm, s.op.name, s.op.commutative);
  Shape shape;
  shape.ranks = s.ranks;
  shape.count = s.count;
  shape.root = root;
  std::function<SchedulePlan(const Shape&)> plan_for = [&algorithm](const Shape& sh) { return algorithm.plan(sh); };
  if (s.hierarchy)
    plan_for = [&algorithm, plan = s.hierarchy](const Shape& sh) { return plan_hierarchical(plan, algorithm, sh); };
  choose_blocks(algorithm, shape, requested_blocks, s.sim_options, plan_for);

  const SchedulePlan schedule = plan_for(shape);
  const EmulationResult r = emulate(algorithm, schedule, shape, s.op, s.config);
  const ExecutionResult sim = execute(schedule, shape.ranks, s.sim_options);
  const WallStats wall = wall_stats(r.wall_seconds);

  EmulateOutcome out;
  out.ok = r.verified && sim.time == r.virtual_time;
  if (!r.verified) {
    out.failure = "wrong result: " + (r.failure.empty() ? std::string("(no detail given)") : r.failure);
  } else if (sim.time != r.virtual_time) {
    out.failure = "virtual time " + std::to_string(r.virtual_time) + " ps differs from the simulator's " +
                  std::to_string(sim.time) + " ps";
  }
  out.json = Json{{"algorithm", algorithm.name},
                  {"collective", to_string(algorithm.collective)},
                  {"nodes", s.config.nodes},
                  {"ranks_per_node", s.config.ranks_per_node},
                  {"ranks", s.ranks},
                  {"root", root},
                  {"bytes", s.bytes},
                  {"count", s.count},
                  {"dtype", to_string(s.op.dtype)},
                  {"op", s.op.name},
                  {"blocks", r.blocks},
                  {"blocks_requested", requested_blocks ? Json(*requested_blocks) : Json("auto")},
                  {"verified", r.verified},
                  {"failure", r.failure},
                  {"virtual_time", to_seconds(r.virtual_time)},
                  {"virtual_time_ps", r.virtual_time},
                  {"simulated_time_ps", sim.time},
                  {"matches_simulator", sim.time == r.virtual_time},
                  {"wall_time", {{"min", wall.min}, {"median", wall.median}}},
                  {"repetitions", r.wall_seconds.size()}};
  if (s.hierarchy) {
    Json levels = Json::array();
    for (const auto& node_levels : s.hierarchy->levels) {
      Json per_node = Json::array();
      for (const auto& level : node_levels) {
        Json groups = Json::array();
        for (const auto& g : level) groups.push_back(g.members);
        per_node.push_back(groups);
      }
      levels.push_back(per_node);
    }
    out.json["hierarchy"] = Json{{"grouping", s.hierarchy->grouping},
                                 {"multi_leader", s.hierarchy->multi_leader},
                                 {"offnode", s.hierarchy->offnode},
                                 {"levels", levels},
                                 {"pipelined_across_levels", runs_as_combined_tree(algorithm) && s.hierarchy->offnode.size() > 1}};
  }
  return out;
}

std::string model_summary(const EmulationSetup& s) {
  const CostModel& m = s.config.model;
  std::ostringstream o;
  o << "same node " << format_time(m.level(0).alpha) << " + " << format_time(m.level(0).beta) << "/B, other node "
    << format_time(m.level(1).alpha) << " + " << format_time(m.level(1).beta) << "/B, combine "
    << format_time(m.gamma()) << "/B, " << (m.ports() == Ports::bidirectional ? "bi" : "uni")
    << "directional ports";
  return o.str();
}

int run_emulate(const EmulateArgs& args) {
  const AlgorithmInfo& algorithm = find_algorithm(parse_collective(args.collective), args.algorithm);
  const std::optional<int> requested = blocks_option(args.blocks, true);
  const EmulationSetup setup = make_setup(args.cluster);
  const EmulateOutcome out = emulate_one(setup, algorithm, args.root, requested);

  if (args.json) {
    std::cout << out.json.dump(2) << "\n";
  } else {
    const auto& j = out.json;
    std::cout << to_string(algorithm.collective) << " " << algorithm.name << ": "
              << (setup.hierarchy ? std::to_string(setup.config.nodes) + " nodes"
                                  : std::to_string(setup.config.nodes) + " nodes x " +
                                        std::to_string(setup.config.ranks_per_node) + " ranks")
              << " = " << setup.ranks << " ranks, "
              << format_bytes(setup.bytes) << " = " << setup.count << " x " << to_string(setup.op.dtype) << ", op "
              << setup.op.name << ", " << j["blocks"].get<int>() << " blocks" << (requested ? "" : " (auto)") << "\n"
              << "  cost model    " << model_summary(setup) << "\n"
              << (setup.hierarchy ? "  hierarchy     " + setup.hierarchy->grouping +
                                        (setup.hierarchy->multi_leader ? ", multi-leader" : "") + ", " +
                                        std::to_string(setup.hierarchy->offnode.size()) + " off-node ranks, " +
                                        (j["hierarchy"]["pipelined_across_levels"].get<bool>()
                                             ? "one tree pipelined across levels"
                                             : "phased (groups reduce in parallel slices)") +
                                        "\n"
                                  : std::string())
              << "  virtual time  " << format_time(j["virtual_time"].get<double>()) << " (simulator: "
              << format_time(to_seconds(j["simulated_time_ps"].get<Picos>())) << ")\n"
              << "  wall time     min " << format_time(j["wall_time"]["min"].get<double>()) << ", median "
              << format_time(j["wall_time"]["median"].get<double>()) << " over " << j["repetitions"].get<int>()
              << " repetitions\n"
              << "  result        " << (j["verified"].get<bool>() ? "verified" : "WRONG") << "\n";
  }
  if (!out.ok) throw RunFailure(out.failure);
  return 0;
}

// ---------------------------------------------------------------- verify

struct VerifyArgs {
  std::string algorithm;
  std::string collective = "allreduce";
  int ranks = 0;
  int root = 0;
  std::string blocks = "1";
  std::string count;  // empty: the default
  bool json = false;
};

int run_verify(const VerifyArgs& args) {
  const AlgorithmInfo& algorithm = find_algorithm(parse_collective(args.collective), args.algorithm);
  Shape shape;
  shape.ranks = args.ranks;
  shape.root = args.root;
  shape.blocks = *blocks_option(args.blocks, false);
  // Default: uneven blocks, and no rank's share or block left empty.
  if (args.count.empty()) {
    shape.count = 2 * static_cast<std::uint64_t>(std::max(std::max(args.ranks, shape.blocks), 0)) + 1;
  } else {
    const char* end = args.count.data() + args.count.size();
    const auto [ptr, ec] = std::from_chars(args.count.data(), end, shape.count);
    if (ec != std::errc{} || ptr != end)
      throw UsageError("--count: expected a whole number of elements, got \"" + args.count + "\"");
  }
  validate_shape(algorithm, shape);

  const VerifyResult result = verify(algorithm, shape);
  if (args.json) {
    std::cout << Json{{"algorithm", algorithm.name},
                      {"collective", to_string(algorithm.collective)},
                      {"ranks", shape.ranks},
                      {"root", shape.root},
                      {"blocks", shape.blocks},
                      {"count", shape.count},
                      {"proven", result.proven},
                      {"message", result.message}}
                     .dump(2)
              << "\n";
  } else if (result.proven) {
    std::cout << "proven: " << to_string(algorithm.collective) << " " << algorithm.name << " on " << shape.ranks
              << " ranks, " << shape.count << " elements, " << shape.blocks
              << (shape.blocks == 1 ? " block" : " blocks");
    if (algorithm.collective != Collective::allreduce) std::cout << ", root " << shape.root;
    std::cout << ": sends and receives match, no deadlock, the result is correct\n";
  }
  if (!result.proven) throw RunFailure("not proven: " + result.message);
  return 0;
}

// ---------------------------------------------------------------- demo

struct DemoArgs {
  EmulatedCluster cluster;
  bool json = false;
};

int run_demo(const DemoArgs& args) {
  const EmulationSetup setup = make_setup(args.cluster);
  Json results = Json::array();
  std::vector<std::string> failures;

  if (!args.json) {
    std::cout << "copse demo: every allreduce algorithm on an emulated cluster of " << setup.config.nodes
              << " nodes x " << setup.config.ranks_per_node << " ranks (" << setup.ranks << " threads), "
              << format_bytes(setup.bytes) << " per rank (" << setup.count << " x " << to_string(setup.op.dtype)
              << "), op " << setup.op.name << "\n"
              << "cost model: " << model_summary(setup) << "\n"
              << "blocks: auto (the count that minimises simulated time); virtual time: the emulator's clock\n"
              << "(checked equal to the simulator's); wall time: the slowest rank per repetition, over "
              << setup.config.repetitions << " repetitions\n\n";
    std::cout << pad("ALGORITHM", 20) << pad("BLOCKS", 8, true) << pad("VIRTUAL TIME", 14, true)
              << pad("WALL MIN", 12, true) << pad("WALL MEDIAN", 13, true) << "  VERIFIED\n";
  }
  for (const auto& algorithm : algorithms()) {
    if (algorithm.collective != Collective::allreduce) continue;
    if (algorithm.needs_commutative && !setup.op.commutative) {
      results.push_back({{"algorithm", algorithm.name}, {"skipped", "needs a commutative operator"}});
      if (!args.json)
        std::cout << pad(std::string(algorithm.name), 20) << "  skipped: needs a commutative operator\n";
      continue;
    }
    EmulateOutcome out = emulate_one(setup, algorithm, 0, std::nullopt);
    if (!out.ok) failures.push_back(std::string(algorithm.name) + ": " + out.failure);
    if (!args.json) {
      const auto& j = out.json;
      std::cout << pad(std::string(algorithm.name), 20) << pad(std::to_string(j["blocks"].get<int>()), 8, true)
                << pad(format_time(j["virtual_time"].get<double>()), 14, true)
                << pad(format_time(j["wall_time"]["min"].get<double>()), 12, true)
                << pad(format_time(j["wall_time"]["median"].get<double>()), 13, true) << "  "
                << (out.ok ? "yes" : "NO: " + out.failure) << std::endl;
    }
    results.push_back(std::move(out.json));
  }
  if (args.json) {
    std::cout << Json{{"nodes", setup.config.nodes},
                      {"ranks_per_node", setup.config.ranks_per_node},
                      {"ranks", setup.ranks},
                      {"bytes", setup.bytes},
                      {"count", setup.count},
                      {"dtype", to_string(setup.op.dtype)},
                      {"op", setup.op.name},
                      {"repetitions", setup.config.repetitions},
                      {"results", results}}
                     .dump(2)
              << "\n";
  }
  if (!failures.empty()) throw RunFailure(join(failures, "; "));
  return 0;
}

// ---------------------------------------------------------------- command line

constexpr const char* kSizeHelp = "SIZE: bytes, e.g. 1000, 1e6, 4KB (4000), 4KiB (4096), 1.5MiB";
constexpr const char* kTimeHelp = "TIME: seconds, or with a unit s, ms, us, ns, ps, e.g. 1.5us, 0.1ns, 1e-6";

void add_cluster_options(CLI::App* cmd, EmulatedCluster& c, bool full_model) {
  cmd->add_option("--nodes", c.nodes, "emulated nodes")->type_name("N")->capture_default_str();
  cmd->add_option("--ranks-per-node", c.ranks_per_node, "ranks (threads) per node")
      ->type_name("K")
      ->capture_default_str();
  cmd->add_option("--bytes", c.bytes, "bytes per rank; a whole number of elements")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--dtype", c.dtype, "element type: " + dtype_names())->type_name("T")->capture_default_str();
  cmd->add_option("--op", c.op, "reduction operator: " + op_names() + " (affine is the non-commutative one)")
      ->type_name("OP")
      ->capture_default_str();
  if (full_model) {
    cmd->add_option("--intra-alpha", c.intra_alpha, "per-message latency between ranks on one node")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--intra-beta", c.intra_beta, "per-byte time between ranks on one node")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--inter-alpha", c.inter_alpha, "per-message latency between nodes")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--inter-beta", c.inter_beta, "per-byte time between nodes")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--gamma", c.gamma, "time per combined (or copied) byte")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--ports", c.ports,
                    "bi: a rank sends and receives concurrently; uni: one message at a time")
        ->type_name("bi|uni")
        ->capture_default_str();
  }
  if (full_model) {
    cmd->add_option("--node-topology", c.node_topology,
                    "each node's hardware in hwloc's synthetic syntax, e.g. \"package:2 l3:2 core:4 pu:1\" "
                    "(default: this machine); turns the hierarchy on")
        ->type_name("DESC");
    cmd->add_option("--grouping", c.grouping,
                    "intranode groups: auto|numa|package|l3|l2|core|size:K (default auto); turns the hierarchy on")
        ->type_name("POLICY");
    cmd->add_option("--max-group", c.max_group, "largest group auto grouping forms")->type_name("M")->capture_default_str();
    cmd->add_flag("--multi-leader", c.multi_leader, "every group leader talks off-node (no node leader)");
    cmd->add_option("--ranks-per-node-list", c.ranks_per_node_list,
                    "uneven nodes, e.g. 5,8,1 (replaces --nodes and --ranks-per-node); turns the hierarchy on")
        ->type_name("K,K,...");
  }
  if (full_model)
    cmd->add_option("--receive-overhead", c.receive_overhead, "fixed cost to the receiver of every message")
        ->type_name("TIME")
        ->capture_default_str();
  cmd->add_option("--repetitions", c.repetitions, "timed runs; wall time is reported as min and median")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--timeout", c.timeout, "a rank waiting longer than this fails the run, naming peer and step")
      ->type_name("TIME")
      ->capture_default_str();
}

// The configuration in force (defaults < config file < COPSE_* variables);
// a --config FILE anywhere on the command line names the file. Its values
// become the defaults of the matching options, so a flag on the command line
// has the last word and --help shows what a run would really use.
Config load_config(int argc, char** argv) {
  LoadArgs load;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc) load.config_file = argv[i + 1];
    else if (arg.starts_with("--config=")) load.config_file = std::string(arg.substr(9));
  }
  return Config::load(load);
}

// The hierarchy options apply only where a file or variable sets them: by
// default an emulated cluster runs its algorithm flat over all ranks.
void apply_config(const Config& config, EmulatedCluster& c) {
  const Options& o = config.options();
  c.intra_alpha = exact_time_text(o.model.intra_alpha);
  c.intra_beta = exact_time_text(o.model.intra_beta);
  c.inter_alpha = exact_time_text(o.model.inter_alpha);
  c.inter_beta = exact_time_text(o.model.inter_beta);
  c.gamma = exact_time_text(o.model.gamma);
  c.ports = o.model.ports == Ports::bidirectional ? "bi" : "uni";
  c.receive_overhead = exact_time_text(o.model.receive_overhead);
  c.timeout = exact_time_text(o.runtime.wait_timeout);
  const auto set = [&](std::string_view key) {
    return config.source_of(key).kind != ConfigSource::Kind::default_value;
  };
  if (set("hierarchy.grouping")) c.grouping = o.hierarchy.grouping;
  if (set("hierarchy.node_topology")) c.node_topology = o.hierarchy.node_topology;
  if (set("hierarchy.multi_leader")) c.multi_leader = o.hierarchy.multi_leader;
  c.max_group = o.hierarchy.max_group;
}

void apply_config(const Config& config, SimArgs& s) {
  const Options& o = config.options();
  s.alpha = exact_time_text(o.model.inter_alpha);
  s.beta = exact_time_text(o.model.inter_beta);
  s.gamma = exact_time_text(o.model.gamma);
  s.ports = o.model.ports == Ports::bidirectional ? "bi" : "uni";
  // Without --ranks-per-node every link is inter-node; intra costs apply to
  // nodes only when the configuration names them.
  if (config.source_of("model.intra_alpha").kind != ConfigSource::Kind::default_value)
    s.intra_alpha = exact_time_text(o.model.intra_alpha);
  if (config.source_of("model.intra_beta").kind != ConfigSource::Kind::default_value)
    s.intra_beta = exact_time_text(o.model.intra_beta);
}

std::string blocks_text(const Config& config) {
  const auto& blocks = config.options().collectives.blocks;
  return blocks ? std::to_string(*blocks) : "auto";
}

int run(int argc, char** argv) {
  const Config config = load_config(argc, argv);
  CLI::App app{
      "copse: collective-communication schedules, their verifier, simulator and emulated cluster.\n"};
  app.name("copse");
  app.require_subcommand(1);
  app.footer(std::string("\n") + kSizeHelp + "\n" + kTimeHelp +
             "\nExit status: 0 success; 1 the run failed (wrong result, unproven schedule, timeout);"
             " 2 bad input.\nRun 'copse SUBCOMMAND --help' for a subcommand's options.");

  AlgorithmsArgs algorithms_args;
  auto* algorithms_cmd = app.add_subcommand("algorithms", "list every registered algorithm");
  algorithms_cmd->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")->type_name("FILE");
  algorithms_cmd->add_flag("--json", algorithms_args.json, "print a JSON array instead of a table");

  SimArgs sim_args;
  apply_config(config, sim_args);
  auto* sim_cmd = app.add_subcommand(
      "sim", "simulate one algorithm under the cost model (no data; one element = one byte)");
  sim_cmd->add_option("--algorithm", sim_args.algorithm, "algorithm name (see 'copse algorithms')")
      ->type_name("NAME")
      ->required();
  sim_cmd->add_option("--ranks", sim_args.ranks, "participants")->type_name("P")->required();
  sim_cmd->add_option("--bytes", sim_args.bytes, "bytes per rank")->type_name("SIZE")->required();
  sim_cmd->add_option("--collective", sim_args.collective, "allreduce, reduce, bcast, barrier, allgather or reduce_scatter")
      ->type_name("C")
      ->capture_default_str();
  sim_cmd->add_option("--root", sim_args.root, "root rank of reduce and bcast")->type_name("R")->capture_default_str();
  sim_cmd->add_option("--blocks", sim_args.blocks,
                      "pipeline blocks, or auto for the count that minimises simulated time")
      ->type_name("N|auto")
      ->capture_default_str();
  sim_cmd->add_option("--alpha", sim_args.alpha, "per-message latency")->type_name("TIME")->capture_default_str();
  sim_cmd->add_option("--beta", sim_args.beta, "per-byte transfer time")->type_name("TIME")->capture_default_str();
  sim_cmd->add_option("--gamma", sim_args.gamma, "time per combined (or copied) byte")
      ->type_name("TIME")
      ->capture_default_str();
  sim_cmd->add_option("--ports", sim_args.ports, "bi: a rank sends and receives concurrently; uni: one at a time")
      ->type_name("bi|uni")
      ->capture_default_str();
  sim_cmd->add_option("--ranks-per-node", sim_args.ranks_per_node,
                      "consecutive ranks sharing a node, whose links cost --intra-alpha/--intra-beta "
                      "(0: every rank on its own node)")
      ->type_name("K")
      ->capture_default_str();
  sim_cmd->add_option("--intra-alpha", sim_args.intra_alpha,
                      "per-message latency within a node (default: --alpha)")
      ->type_name("TIME");
  sim_cmd->add_option("--intra-beta", sim_args.intra_beta, "per-byte time within a node (default: --beta)")
      ->type_name("TIME");
  sim_cmd->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")->type_name("FILE");
  sim_cmd->add_flag("--json", sim_args.json, "print one JSON object");

  EmulateArgs emulate_args;
  auto* emulate_cmd = app.add_subcommand(
      "emulate", "run one algorithm on real data on an emulated cluster (one thread per rank), verify the result");
  emulate_cmd->add_option("--algorithm", emulate_args.algorithm, "algorithm name (see 'copse algorithms')")
      ->type_name("NAME")
      ->required();
  emulate_cmd->add_option("--collective", emulate_args.collective, "allreduce, reduce, bcast, barrier, allgather or reduce_scatter")
      ->type_name("C")
      ->capture_default_str();
  emulate_cmd->add_option("--root", emulate_args.root, "root rank of reduce and bcast")
      ->type_name("R")
      ->capture_default_str();
  emulate_cmd->add_option("--blocks", emulate_args.blocks,
                          "pipeline blocks, or auto for the count that minimises simulated time")
      ->type_name("N|auto")
      ->capture_default_str();
  apply_config(config, emulate_args.cluster);
  emulate_args.blocks = blocks_text(config);
  add_cluster_options(emulate_cmd, emulate_args.cluster, true);
  emulate_cmd->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")->type_name("FILE");
  emulate_cmd->add_flag("--json", emulate_args.json, "print one JSON object");

  VerifyArgs verify_args;
  auto* verify_cmd = app.add_subcommand(
      "verify", "prove one schedule correct by symbolic execution (exit 0 only when proven)");
  verify_cmd->add_option("--algorithm", verify_args.algorithm, "algorithm name (see 'copse algorithms')")
      ->type_name("NAME")
      ->required();
  verify_cmd->add_option("--ranks", verify_args.ranks, "participants")->type_name("P")->required();
  verify_cmd->add_option("--collective", verify_args.collective, "allreduce, reduce, bcast, barrier, allgather or reduce_scatter")
      ->type_name("C")
      ->capture_default_str();
  verify_cmd->add_option("--root", verify_args.root, "root rank of reduce and bcast")
      ->type_name("R")
      ->capture_default_str();
  verify_cmd->add_option("--blocks", verify_args.blocks, "pipeline blocks")->type_name("N")->capture_default_str();
  verify_cmd->add_option("--count", verify_args.count,
                         "elements per rank (default: 2*max(P, blocks)+1, so blocks are uneven and none is empty)")
      ->type_name("N");
  verify_cmd->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")->type_name("FILE");
  verify_cmd->add_flag("--json", verify_args.json, "print one JSON object");

  DemoArgs demo_args;
  auto* demo_cmd = app.add_subcommand(
      "demo", "every allreduce algorithm on an emulated cluster with auto blocks: a table of blocks, virtual and wall "
      "times, and verification");
  apply_config(config, demo_args.cluster);
  add_cluster_options(demo_cmd, demo_args.cluster, false);
  demo_cmd->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")->type_name("FILE");
  demo_cmd->add_flag("--json", demo_args.json, "print one JSON object with a result per algorithm");

  CLI::App* config_cmd = add_config_command(app);
  std::function<int()> run_topo_cmd;  // set when `topo` is the subcommand parsed
  add_topo_command(app, run_topo_cmd);

  // CLI11 reports a mistyped subcommand as a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> known;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) known.push_back(sub->get_name());
    if (std::find(known.begin(), known.end(), argv[1]) == known.end())
      throw UsageError("unknown subcommand '" + std::string(argv[1]) + "' (known: " + join(known, ", ") + ")");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "copse";
    for (const auto* sub : app.get_subcommands())
      if (sub) where += " " + sub->get_name();
    std::cerr << "copse: " << one_line(e.what()) << " (see '" << where << " --help')\n";
    return 2;
  }

  if (algorithms_cmd->parsed()) return run_algorithms(algorithms_args);
  if (sim_cmd->parsed()) return run_sim(sim_args);
  if (emulate_cmd->parsed()) return run_emulate(emulate_args);
  if (verify_cmd->parsed()) return run_verify(verify_args);
  if (demo_cmd->parsed()) return run_demo(demo_args);
  if (config_cmd->parsed()) return run_config_command(*config_cmd);
  if (run_topo_cmd) return run_topo_cmd();
  std::cerr << "copse: no subcommand (see 'copse --help')\n";
  return 2;
}

}  // namespace
}  // namespace copse

int main(int argc, char** argv) {
  try {
    return copse::run(argc, argv);
  } catch (const copse::UsageError& e) {
    std::cout.flush();
    std::cerr << "copse: " << copse::one_line(e.what()) << "\n";
    return 2;
  } catch (const copse::RunFailure& e) {
    std::cout.flush();
    std::cerr << "copse: " << copse::one_line(e.what()) << "\n";
    return 1;
  } catch (const copse::ScheduleError& e) {
    std::cout.flush();
    std::cerr << "copse: schedule error: " << copse::one_line(e.what()) << "\n";
    return 1;
  } catch (const copse::TimeoutError& e) {
    std::cout.flush();
    std::cerr << "copse: timeout: " << copse::one_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "copse: error: " << copse::one_line(e.what()) << "\n";
    return 1;
  }
}
