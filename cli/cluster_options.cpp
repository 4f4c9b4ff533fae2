#include "cli/cluster_options.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "algorithms/schedule_file.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "plan/selection.hpp"

namespace copse {

ExtendedModelArgs configured_extended_model(const ModelOptions& m) {
  ExtendedModelArgs e;
  e.timing = m.timing == Timing::hockney ? "hockney" : "loggp";
  e.intra_overhead = exact_time_text(m.intra_overhead);
  e.inter_overhead = exact_time_text(m.inter_overhead);
  e.intra_gap = exact_time_text(m.intra_gap);
  e.inter_gap = exact_time_text(m.inter_gap);
  e.nic_beta = exact_time_text(m.nic_beta);
  e.nic_rails = m.nic_rails;
  return e;
}

void add_extended_model_options(CLI::App* cmd, ExtendedModelArgs& e) {
  cmd->add_option("--timing", e.timing,
                  "hockney: rendezvous, alpha + beta*n; loggp: eager sends, overhead and gap per message, "
                  "wire latencies overlap")
      ->type_name("hockney|loggp")
      ->capture_default_str();
  const std::pair<const char*, std::string*> times[] = {{"--intra-overhead", &e.intra_overhead},
                                                        {"--inter-overhead", &e.inter_overhead},
                                                        {"--intra-gap", &e.intra_gap},
                                                        {"--inter-gap", &e.inter_gap},
                                                        {"--nic-beta", &e.nic_beta}};
  const char* help[] = {"LogGP o per message at each end, same node", "LogGP o per message at each end, other node",
                        "LogGP g between messages of a port, same node",
                        "LogGP g between messages of a port, other node",
                        "per-byte time of one lane of a node's shared network interface (0s: none)"};
  for (std::size_t i = 0; i < std::size(times); ++i)
    cmd->add_option(times[i].first, *times[i].second, help[i])->type_name("TIME")->capture_default_str();
  cmd->add_option("--nic-rails", e.nic_rails, "lanes of a node's shared interface")
      ->type_name("R")
      ->capture_default_str();
}

void apply_extended_model(const ExtendedModelArgs& e, ModelOptions& m) {
  if (e.timing != "hockney" && e.timing != "loggp") throw UsageError("--timing: expected hockney or loggp");
  m.timing = e.timing == "hockney" ? Timing::hockney : Timing::loggp;
  m.intra_overhead = time_option("--intra-overhead", e.intra_overhead);
  m.inter_overhead = time_option("--inter-overhead", e.inter_overhead);
  m.intra_gap = time_option("--intra-gap", e.intra_gap);
  m.inter_gap = time_option("--inter-gap", e.inter_gap);
  m.nic_beta = time_option("--nic-beta", e.nic_beta);
  m.nic_rails = e.nic_rails;
}

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
  c.extended = configured_extended_model(o.model);
  c.group_size = o.model.group_size;
  c.group_alpha = exact_time_text(o.model.group_alpha);
  c.group_beta = exact_time_text(o.model.group_beta);
  const auto emulator_timeout = std::chrono::duration<double>(EmulatorConfig().wait_timeout).count();
  c.timeout = exact_time_text(o.runtime.wait_timeout.value_or(emulator_timeout));
  const auto set = [&](std::string_view key) {
    return config.source_of(key).kind != ConfigSource::Kind::default_value;
  };
  if (set("hierarchy.grouping")) c.grouping = o.hierarchy.grouping;
  if (set("hierarchy.node_topology")) c.node_topology = o.hierarchy.node_topology;
  if (set("hierarchy.multi_leader")) c.multi_leader = o.hierarchy.multi_leader;
  if (set("hierarchy.form")) c.form = std::string(to_string(o.hierarchy.form));
  c.max_group = o.hierarchy.max_group;
  return c;
}

namespace {
std::string dtype_names() { return join(all_dtypes(), ", "); }
std::string op_names() { return join(builtin_op_names(), ", "); }
}  // namespace

void add_cluster_options(CLI::App* cmd, ClusterArgs& c, bool full_model) {
  cmd->add_option("--nodes", c.nodes, "emulated nodes")->type_name("N")->capture_default_str();
  cmd->add_option("--ranks-per-node", c.ranks_per_node, "ranks per node")->type_name("K")->capture_default_str();
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
    cmd->add_flag("--multi-leader", c.multi_leader,
                  "every group leader talks off-node (no node leader); deprecated: --form multi-leader");
    cmd->add_option("--form", c.form,
                    "how the algorithm runs: flat, leader (one node leader above groups), multi-leader, lanes "
                    "(nodes of equal size) or auto (the fastest for the algorithm); default: flat, or leader when "
                    "a node topology, grouping or node list is given")
        ->type_name("FORM");
    cmd->add_option("--ranks-per-node-list", c.ranks_per_node_list,
                    "uneven nodes, e.g. 5,8,1 (replaces --nodes and --ranks-per-node); turns the hierarchy on")
        ->type_name("K,K,...");
    cmd->add_option("--receive-overhead", c.receive_overhead, "fixed cost to the receiver of every message")
        ->type_name("TIME")
        ->capture_default_str();
    add_extended_model_options(cmd, c.extended);
    cmd->add_option("--group-alpha", c.group_alpha, "per-message latency within a --group-size group")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--group-beta", c.group_beta, "per-byte time within a --group-size group")
        ->type_name("TIME")
        ->capture_default_str();
    cmd->add_option("--group-size", c.group_size, "K > 0: K consecutive ranks form a group with its own link level")
        ->type_name("K")
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
  cmd->add_option("--algorithm", a.algorithm,
                  "algorithm name (see 'copse algorithms'; sim and emulate also take auto: the one the selection "
                  "finds fastest under the cost model); or --schedule-file")
      ->type_name("NAME");
  cmd->add_option("--schedule-file", a.schedule_file,
                  "run the tree or step list written in FILE instead (README, \"Schedule files\"); the verifier "
                  "proves it first, and a bad file exits 2 naming FILE:LINE")
      ->type_name("FILE");
}

void note_algorithm_options(CLI::App* cmd, AlgorithmArgs& a) {
  a.collective_given = cmd->count("--collective") > 0;
  if (const auto* ranks = cmd->get_option_no_throw("--ranks")) a.ranks_given = ranks->count() > 0;
}

bool selects_algorithm(const AlgorithmArgs& a) { return a.algorithm == kSelectAlgorithm && a.schedule_file.empty(); }

const AlgorithmInfo& chosen_algorithm(const AlgorithmArgs& a, const std::string& collective) {
  if (a.algorithm.empty() == a.schedule_file.empty())
    throw UsageError(a.algorithm.empty() ? "give --algorithm NAME or --schedule-file FILE"
                                         : "give --algorithm or --schedule-file, not both");
  if (a.schedule_file.empty()) return find_algorithm(parse_collective(collective), a.algorithm);
  const Collective c =
      a.collective_given ? parse_collective(collective) : read_schedule_file(a.schedule_file).collectives.front();
  return find_algorithm(c, std::string(kScheduleFilePrefix) + a.schedule_file);
}

int chosen_ranks(const AlgorithmArgs& a, int ranks) {
  if (a.ranks_given) return ranks;
  if (a.schedule_file.empty())
    throw UsageError("--ranks is required (or a --schedule-file, whose rank count it takes)");
  return read_schedule_file(a.schedule_file).ranks;
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

  ModelOptions m;
  m.intra_alpha = time_option("--intra-alpha", c.intra_alpha);
  m.intra_beta = time_option("--intra-beta", c.intra_beta);
  m.inter_alpha = time_option("--inter-alpha", c.inter_alpha);
  m.inter_beta = time_option("--inter-beta", c.inter_beta);
  m.gamma = time_option("--gamma", c.gamma);
  m.ports = ports_option(c.ports);
  m.receive_overhead = time_option("--receive-overhead", c.receive_overhead);
  apply_extended_model(c.extended, m);
  m.group_size = c.group_size;
  m.group_alpha = time_option("--group-alpha", c.group_alpha);
  m.group_beta = time_option("--group-beta", c.group_beta);
  spec.model = make_cost_model(m);
  const double timeout = time_option("--timeout", c.timeout);
  if (!(timeout > 0)) throw UsageError("--timeout must be positive");
  const double timeout_ms = std::ceil(timeout * 1000);
  if (timeout_ms > 1e12) throw UsageError("--timeout: too long");
  spec.wait_timeout = std::chrono::milliseconds(static_cast<long long>(timeout_ms));
  spec.repetitions = c.repetitions;

  std::tie(spec.arrival, spec.predicted_arrival) = arrival_setup(c.arrival, c.arrival_error, static_cast<int>(ranks));

  // A node topology, grouping or node list asks for a hierarchy (one leader,
  // or multi-leader); --form names any form.
  const bool hierarchical = !c.node_topology.empty() || !c.grouping.empty() || !c.ranks_per_node_list.empty();
  spec.form = !c.form.empty()  ? parse_form(c.form)
              : !hierarchical  ? Form::flat
              : c.multi_leader ? Form::multi_leader
                               : Form::leader;
  if (spec.form == Form::leader && c.multi_leader) spec.form = Form::multi_leader;
  if (spec.form != Form::flat) {
    if (!c.node_topology.empty()) spec.machine = Machine::synthetic(c.node_topology);
    spec.grouping = Grouping::parse(c.grouping.empty() ? "auto" : c.grouping, c.max_group);
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
  const int node = m.off_node_level() - 1;
  if (m.group_size() > 0)
    o << "same group of " << m.group_size() << " " << format_time(m.level(0).alpha) << " + "
      << format_time(m.level(0).beta) << "/B, ";
  o << "same node " << format_time(m.level(node).alpha) << " + " << format_time(m.level(node).beta) << "/B, other node "
    << format_time(m.level(node + 1).alpha) << " + " << format_time(m.level(node + 1).beta) << "/B, combine "
    << format_time(m.gamma()) << "/B, " << ports_name(m.ports()) << "directional ports";
  if (m.timing() == Timing::loggp)
    o << ", LogGP (overhead " << format_time(m.level(node).overhead) << " / " << format_time(m.level(node + 1).overhead)
      << ", gap " << format_time(m.level(node).gap) << " / " << format_time(m.level(node + 1).gap) << ")";
  if (m.nic().beta > 0)
    o << ", shared interface " << format_time(m.nic().beta) << "/B x " << m.nic().rails << " rail(s)";
  return o.str();
}

}  // namespace copse
