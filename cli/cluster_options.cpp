#include "cli/cluster_options.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "common/text.hpp"
#include "common/units.hpp"
#include "internode/schedule_file.hpp"

namespace copse {

ClusterArgs configured_cluster_args(const Config& config) {
  const Options& o = config.options();
  ClusterArgs c;
  c.intra_alpha = exact_time_text(o.model.intra_alpha);
  c.intra_beta = exact_time_text(o.model.intra_beta);
  c.inter_alpha = exact_time_text(o.model.inter_alpha);
  c.inter_beta = exact_time_text(o.model.inter_beta);
  c.gamma = exact_time_text(o.model.gamma);
  c.ports = std::string(ports_name(o.model.ports));
  c.receive_overhead = exact_time_text(o.model.receive_overhead);
  const auto emulator_timeout = std::chrono::duration<double>(EmulatorConfig().wait_timeout).count();
  c.timeout = exact_time_text(o.runtime.wait_timeout.value_or(emulator_timeout));
  const auto set = [&](std::string_view key) {
    return config.source_of(key).kind != ConfigSource::Kind::default_value;
  };
  if (set("hierarchy.grouping")) c.grouping = o.hierarchy.grouping;
  if (set("hierarchy.node_topology")) c.node_topology = o.hierarchy.node_topology;
  if (set("hierarchy.multi_leader")) c.multi_leader = o.hierarchy.multi_leader;
  c.max_group = o.hierarchy.max_group;
  return c;
}

namespace {
std::string dtype_names() { return join(all_dtypes(), ", "); }
std::string op_names() { return join(builtin_op_names(), ", "); }
}  // namespace

void add_cluster_options(CLI::App* cmd, ClusterArgs& c, bool full_model) {
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
    cmd->add_option("--gamma", c.gamma, "time per combined (or copied) byte")->type_name("TIME")->capture_default_str();
    cmd->add_option("--ports", c.ports, "bi: a rank sends and receives concurrently; uni: one message at a time")
        ->type_name("bi|uni")
        ->capture_default_str();
    cmd->add_option("--node-topology", c.node_topology,
                    "each node's hardware in hwloc's synthetic syntax, e.g. \"package:2 l3:2 core:4 pu:1\" "
                    "(default: this machine); turns the hierarchy on")
        ->type_name("DESC");
    cmd->add_option("--grouping", c.grouping,
                    "intranode groups: auto|numa|package|l3|l2|core|size:K (default auto); turns the hierarchy on")
        ->type_name("POLICY");
    cmd->add_option("--max-group", c.max_group, "largest group auto grouping forms")
        ->type_name("M")
        ->capture_default_str();
    cmd->add_flag("--multi-leader", c.multi_leader, "every group leader talks off-node (no node leader)");
    cmd->add_option("--ranks-per-node-list", c.ranks_per_node_list,
                    "uneven nodes, e.g. 5,8,1 (replaces --nodes and --ranks-per-node); turns the hierarchy on")
        ->type_name("K,K,...");
    cmd->add_option("--receive-overhead", c.receive_overhead, "fixed cost to the receiver of every message")
        ->type_name("TIME")
        ->capture_default_str();
  }
  add_arrival_options(cmd, c.arrival, c.arrival_error);
  cmd->add_option("--repetitions", c.repetitions, "timed runs; wall time is reported as min and median")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--timeout", c.timeout, "a rank waiting longer than this fails the run, naming peer and step")
      ->type_name("TIME")
      ->capture_default_str();
}

void add_algorithm_options(CLI::App* cmd, AlgorithmArgs& a) {
  cmd->add_option("--algorithm", a.algorithm, "algorithm name (see 'copse algorithms'); or --schedule-file")
      ->type_name("NAME");
  cmd->add_option("--schedule-file", a.schedule_file,
                  "run the tree or step list written in FILE instead (README, \"Schedule files\"); the verifier "
                  "proves it first, and a bad file exits 2 naming FILE:LINE")
      ->type_name("FILE");
}

void note_algorithm_options(CLI::App* cmd, AlgorithmArgs& a) { a.collective_given = cmd->count("--collective") > 0; }

const AlgorithmInfo& chosen_algorithm(const AlgorithmArgs& a, const std::string& collective) {
  if (a.algorithm.empty() == a.schedule_file.empty())
    throw UsageError(a.algorithm.empty() ? "give --algorithm NAME or --schedule-file FILE"
                                         : "give --algorithm or --schedule-file, not both");
  if (a.schedule_file.empty()) return find_algorithm(parse_collective(collective), a.algorithm);
  const Collective c =
      a.collective_given ? parse_collective(collective) : read_schedule_file(a.schedule_file).collectives.front();
  return find_algorithm(c, std::string(kScheduleFilePrefix) + a.schedule_file);
}

int schedule_file_ranks(const AlgorithmArgs& a) {
  return a.schedule_file.empty() ? 0 : read_schedule_file(a.schedule_file).ranks;
}

void add_arrival_options(CLI::App* cmd, std::string& arrival, std::string& arrival_error) {
  cmd->add_option("--arrival", arrival,
                  "per-rank start offsets in virtual time: none, one-late:DELAY (rank 1 late), "
                  "rand-late:MAX[:SEED] (uniform in [0, MAX]) or file:PATH (one TIME per line)")
      ->type_name("PATTERN")
      ->capture_default_str();
  cmd->add_option("--arrival-error", arrival_error,
                  "error of the arrival predictions schedules are planned from: 0, E%[:SEED] (relative) or "
                  "TIME[:SEED] (absolute)")
      ->type_name("E")
      ->capture_default_str();
}

std::pair<ArrivalPattern, std::vector<Picos>> arrival_setup(const std::string& arrival,
                                                            const std::string& arrival_error, int ranks) {
  ArrivalPattern pattern = parse_arrival(arrival, ranks);
  const ArrivalError error = parse_arrival_error(arrival_error);
  std::vector<Picos> predicted;
  if (error.amount > 0)  // balanced arrival predicted wrongly: perturb zeros
    predicted = predict_arrivals(
        pattern.none() ? std::vector<Picos>(static_cast<std::size_t>(std::max(ranks, 0)), 0) : pattern.offsets, error);
  return {std::move(pattern), std::move(predicted)};
}

void add_arrival_json(Json& json, const ArrivalPattern& pattern, const std::string& arrival_error,
                      const std::vector<Picos>& finish) {
  const ArrivalMeasures m = arrival_measures(finish, pattern.offsets);
  const Picos last = pattern.none() ? 0 : *std::max_element(pattern.offsets.begin(), pattern.offsets.end());
  json["arrival"] = Json{{"pattern", pattern.text}, {"error", arrival_error}, {"max_offset_ps", last}};
  json["after_last_arrival_ps"] = m.after_last_arrival;
  json["mean_elapsed_ps"] = m.mean_elapsed;
}

std::string arrival_summary(const ArrivalPattern& pattern, const std::vector<Picos>& finish) {
  const ArrivalMeasures m = arrival_measures(finish, pattern.offsets);
  return pattern.text + ": after the last arrival " + format_time(to_seconds(m.after_last_arrival)) +
         ", mean elapsed " + format_time(to_seconds(m.mean_elapsed));
}

namespace {

ClusterSpec cluster_spec(const ClusterArgs& c) {
  require_at_least("--nodes", c.nodes, 1);
  require_at_least("--ranks-per-node", c.ranks_per_node, 1);
  require_at_least("--repetitions", c.repetitions, 1);
  require_at_least("--max-group", c.max_group, 1);
  ClusterSpec spec;
  spec.ranks_per_node = c.ranks_per_node_list.empty()
                            ? std::vector<int>(static_cast<std::size_t>(c.nodes), c.ranks_per_node)
                            : parse_rank_counts(c.ranks_per_node_list);
  long long ranks = 0;
  for (int k : spec.ranks_per_node) ranks += k;
  if (ranks > std::numeric_limits<int>::max())
    throw UsageError("--nodes x --ranks-per-node is too many ranks (" + std::to_string(ranks) + ")");

  const LinkCost intra{time_option("--intra-alpha", c.intra_alpha), time_option("--intra-beta", c.intra_beta)};
  const LinkCost inter{time_option("--inter-alpha", c.inter_alpha), time_option("--inter-beta", c.inter_beta)};
  spec.model = CostModel({intra, inter}, time_option("--gamma", c.gamma), ports_option(c.ports),
                         time_option("--receive-overhead", c.receive_overhead));
  const double timeout = time_option("--timeout", c.timeout);
  if (!(timeout > 0)) throw UsageError("--timeout must be positive");
  const double timeout_ms = std::ceil(timeout * 1000);
  if (timeout_ms > 1e12) throw UsageError("--timeout: too long");
  spec.wait_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_ms));
  spec.repetitions = c.repetitions;

  std::tie(spec.arrival, spec.predicted_arrival) = arrival_setup(c.arrival, c.arrival_error, static_cast<int>(ranks));

  spec.hierarchical = !c.node_topology.empty() || !c.grouping.empty() || !c.ranks_per_node_list.empty();
  if (spec.hierarchical) {
    if (!c.node_topology.empty()) spec.machine = Machine::synthetic(c.node_topology);
    spec.grouping = Grouping::parse(c.grouping.empty() ? "auto" : c.grouping, c.max_group);
    spec.multi_leader = c.multi_leader;
  }
  return spec;
}

}  // namespace

EmulationSetup make_setup(const ClusterArgs& c) {
  ClusterSpec spec = cluster_spec(c);
  ReduceOp op = builtin_op(c.op, parse_dtype(c.dtype));
  const std::uint64_t bytes = size_option("--bytes", c.bytes);
  if (bytes % op.element_bytes != 0)
    throw UsageError("--bytes: " + std::to_string(bytes) + " bytes is not a whole number of " +
                     std::to_string(op.element_bytes) + "-byte elements (" + op.name + " on " +
                     std::string(to_string(op.dtype)) + ")");
  const std::uint64_t count = bytes / op.element_bytes;
  return EmulationSetup{EmulatedCluster(std::move(spec)), std::move(op), bytes, count, c.arrival_error};
}

Json emulation_json(const EmulationSetup& setup, const AlgorithmInfo& algorithm, const CheckedEmulation& run,
                    std::optional<int> requested_blocks) {
  const EmulatedCluster& cluster = setup.cluster;
  const EmulationResult& r = run.emulation;
  const WallStats wall = wall_stats(r.wall_seconds);
  const auto& sizes = cluster.spec().ranks_per_node;
  const bool even = std::all_of(sizes.begin(), sizes.end(), [&](int k) { return k == sizes.front(); });
  Json json{{"algorithm", algorithm.name},
            {"collective", to_string(algorithm.collective)},
            {"nodes", cluster.nodes()},
            {"ranks_per_node", even ? Json(sizes.front()) : Json(nullptr)},
            {"ranks_per_node_list", sizes},
            {"ranks", cluster.ranks()},
            {"root", run.shape.root},
            {"bytes", setup.bytes},
            {"count", setup.count},
            {"dtype", to_string(setup.op.dtype)},
            {"op", setup.op.name},
            {"blocks", run.blocks},
            {"blocks_requested", requested_blocks ? Json(*requested_blocks) : Json("auto")},
            {"verified", r.verified},
            {"failure", r.failure},
            {"virtual_time", to_seconds(r.virtual_time)},
            {"virtual_time_ps", r.virtual_time},
            {"simulated_time_ps", run.simulated_time},
            {"matches_simulator", run.matches_simulator},
            {"wall_time", {{"min", wall.min}, {"median", wall.median}}},
            {"repetitions", r.wall_seconds.size()}};
  add_arrival_json(json, cluster.spec().arrival, setup.arrival_error, r.virtual_finish);
  if (const auto& hierarchy = cluster.hierarchy()) {
    Json levels = Json::array();
    for (const auto& node_levels : hierarchy->levels) {
      Json per_node = Json::array();
      for (const auto& level : node_levels) {
        Json groups = Json::array();
        for (const auto& g : level) groups.push_back(g.members);
        per_node.push_back(groups);
      }
      levels.push_back(per_node);
    }
    json["hierarchy"] = Json{{"grouping", hierarchy->grouping},
                             {"multi_leader", hierarchy->multi_leader},
                             {"offnode", hierarchy->offnode},
                             {"levels", levels},
                             {"pipelined_across_levels", cluster.pipelined_across_levels(algorithm)}};
  }
  return json;
}

std::string model_summary(const CostModel& m) {
  std::ostringstream o;
  o << "same node " << format_time(m.level(0).alpha) << " + " << format_time(m.level(0).beta) << "/B, other node "
    << format_time(m.level(1).alpha) << " + " << format_time(m.level(1).beta) << "/B, combine "
    << format_time(m.gamma()) << "/B, " << ports_name(m.ports()) << "directional ports";
  return o.str();
}

}  // namespace copse
